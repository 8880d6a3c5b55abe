//go:build tools

// Package tools pins the Temporal binaries Kernodeck runs beside itself: the
// CLI (dev server and Web UI) and, from the very module graph the CLI embeds,
// the Temporal server and its SQL tool for the production-shaped deployment
// (scripts/prodlike.sh). One graph means one build: the server reuses the
// CLI's compiled packages (about 30 s instead of about 12 minutes).
package tools

import (
	_ "github.com/temporalio/cli/cmd/temporal"
	_ "go.temporal.io/server/cmd/server"
	_ "go.temporal.io/server/cmd/tools/sql"
)
