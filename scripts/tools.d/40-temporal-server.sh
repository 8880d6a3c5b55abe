# The Temporal server and its SQL tool (go.temporal.io/server, the version
# scripts/prodlike.sh pins), built once and cached: the production-shaped
# deployment of `go test ./deploy` (TestProdlikeSmallBurst) runs them.
# Sourced by scripts/ensure-tools.sh, after the Temporal CLI: built from the
# CLI's module graph (scripts/temporal-tools), it reuses the CLI's compiled
# packages (~30 s).
"$(dirname "${BASH_SOURCE[0]}")/../prodlike.sh" build-tools
