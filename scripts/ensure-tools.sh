#!/usr/bin/env bash
# Installs and starts what Kernodeck needs on a fresh machine, idempotently:
# the Temporal CLI (dev server + Web UI), staticcheck, and a running PostgreSQL.
# Prints nothing but progress on stderr; safe to run every time.
set -euo pipefail

# The Temporal CLI's version (and the server's, for scripts/prodlike.sh) is
# the one scripts/temporal-tools/go.mod pins.
TEMPORAL_TOOLS="$(cd "$(dirname "$0")" && pwd)/temporal-tools"
GOBIN_DIR="$(go env GOBIN)"
[ -n "$GOBIN_DIR" ] || GOBIN_DIR="$(go env GOPATH)/bin"

log() { echo "ensure-tools: $*" >&2; }

# Temporal CLI: the dev server used by `kernodeck dev` and the end-to-end tests.
if ! command -v temporal >/dev/null 2>&1 && [ ! -x "$GOBIN_DIR/temporal" ]; then
	log "installing the Temporal CLI (scripts/temporal-tools; first build takes several minutes)"
	(cd "$TEMPORAL_TOOLS" && GOFLAGS=-buildvcs=false go build -o "$GOBIN_DIR/temporal" github.com/temporalio/cli/cmd/temporal)
fi

# staticcheck, for the lint step of the test command.
if [ ! -x "$GOBIN_DIR/staticcheck" ]; then
	log "installing staticcheck"
	GOFLAGS=-buildvcs=false go install "honnef.co/go/tools/cmd/staticcheck@v0.8.2"
fi

# oapi-codegen, whose client of api/openapi.yaml the tests of e2e/openapi
# keep current and rent a machine with.
if [ ! -x "$GOBIN_DIR/oapi-codegen" ]; then
	log "installing oapi-codegen"
	GOFLAGS=-buildvcs=false go install "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2"
fi

# PostgreSQL on 127.0.0.1:5432.
pg_up() { (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; }
if ! pg_up; then
	if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
		log "installing PostgreSQL from Debian's packages"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
		v=$(ls /etc/postgresql | head -n1)
		sed -i 's/^\(host.*127.0.0.1\/32\s*\)\S*$/\1trust/; s/^\(local\s*all\s*postgres\s*\)\S*$/\1trust/' "/etc/postgresql/$v/main/pg_hba.conf"
	fi
	log "starting PostgreSQL"
	pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
	for _ in $(seq 1 30); do pg_up && break; sleep 1; done
	pg_up || { log "PostgreSQL does not answer on 127.0.0.1:5432"; exit 1; }
fi

# Tools of the chain watchers, the SSH driver and the mail tests: one snippet
# each, sourced in name order (they may use log and GOBIN_DIR).
for snippet in "$(dirname "$0")"/tools.d/*.sh; do
	[ -e "$snippet" ] || continue
	# shellcheck source=/dev/null
	. "$snippet"
done
