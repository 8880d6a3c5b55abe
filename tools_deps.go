//go:build tools

// Package kernodeck pins dependencies while packages are being written.
package kernodeck

import (
	_ "github.com/getkin/kin-openapi/openapi3"
	_ "github.com/getkin/kin-openapi/routers/gorillamux"
	_ "github.com/gin-gonic/gin"
	_ "github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"
	_ "github.com/pressly/goose/v3"
	_ "github.com/stretchr/testify/require"
	_ "github.com/stretchr/testify/suite"
	_ "go.temporal.io/api/operatorservice/v1"
	_ "go.temporal.io/sdk/client"
	_ "go.temporal.io/sdk/testsuite"
	_ "go.temporal.io/sdk/worker"
	_ "go.temporal.io/sdk/workflow"
	_ "golang.org/x/crypto/argon2"
	_ "github.com/google/uuid"
)
