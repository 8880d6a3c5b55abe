// Package migrations embeds the numbered SQL migrations run by goose.
package migrations

import "embed"

// FS holds the SQL migration files.
//
//go:embed *.sql
var FS embed.FS
