#!/usr/bin/env bash
# Runs every test: installs and starts what the tests need, then gofmt, vet,
# staticcheck and `go test` on every package (unit, PostgreSQL and the
# end-to-end tests against a real Temporal dev server). CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-tools.sh
GOBIN_DIR="$(go env GOBIN)"
[ -n "$GOBIN_DIR" ] || GOBIN_DIR="$(go env GOPATH)/bin"
export PATH="$GOBIN_DIR:$PATH"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go vet ./...
staticcheck ./...
# The OpenAPI document against a real validator's recommended rules
# (@redocly/cli, installed by scripts/tools.d/30-web.sh; no telemetry).
REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true redocly lint api/openapi.yaml
# Alert rules: syntax, then their unit tests (deploy/monitoring).
promtool check rules deploy/monitoring/kernodeck.rules.yml
(cd deploy/monitoring && promtool test rules kernodeck.rules.test.yml)
go test -count=1 -timeout 40m "$@" ./...
(cd scripts/temporal-tools && go vet ./kdtemporal/... && go test -count=1 ./kdtemporal/...) # Temporal's authorization table (own module)
# The fuzz targets' seed corpora (testdata/fuzz) are replayed by `go test`
# above; fuzzing itself is a separate command, scripts/fuzz.sh
# (docs/operating.md, BENCHMARKS.md): its instrumented builds took 7 of the
# test command's minutes.
