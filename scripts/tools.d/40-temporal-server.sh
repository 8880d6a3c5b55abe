# The Temporal server and its SQL tool (go.temporal.io/server, the version
# scripts/prodlike.sh pins), built once and cached: the production-shaped
# deployment of `go test ./deploy` (TestProdlikeSmallBurst) runs them.
# Sourced by scripts/ensure-tools.sh. The first build takes ~12 minutes.
"$(dirname "${BASH_SOURCE[0]}")/../prodlike.sh" build-tools
