#!/usr/bin/env bash
# Regenerates e2e/openapi/client_gen_test.go, the Go client oapi-codegen
# (pinned in scripts/ensure-tools.sh) makes of api/openapi.yaml; the tests
# of e2e/openapi check it is current and rent a machine with it.
set -euo pipefail
cd "$(dirname "$0")/.."
GOBIN_DIR="$(go env GOBIN)"
[ -n "$GOBIN_DIR" ] || GOBIN_DIR="$(go env GOPATH)/bin"
"$GOBIN_DIR/oapi-codegen" -generate types,client -package openapi api/openapi.yaml > e2e/openapi/client_gen_test.go
