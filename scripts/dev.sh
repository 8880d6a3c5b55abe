#!/usr/bin/env bash
# Runs the whole service locally: installs what is missing, then `kernodeck
# dev` (migrations, API on :8080, worker, Temporal dev server + Web UI on :8233).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-tools.sh
GOBIN_DIR="$(go env GOBIN)"
[ -n "$GOBIN_DIR" ] || GOBIN_DIR="$(go env GOPATH)/bin"
export PATH="$GOBIN_DIR:$PATH"
exec go run ./cmd/kernodeck dev
