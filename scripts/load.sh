#!/usr/bin/env bash
# Load measurement (not part of scripts/test.sh): starts a Temporal dev
# server, `kernodeck worker` and `kernodeck api` as separate processes on
# loopback ports of their own (37233, 38080, 39091/39092) against a fresh
# database kd_load, then runs `kdload rentals` up to each total in STEPS
# (live rentals accumulate: 1000, then 5000, then 10000) and `kdload api`.
# Usage: scripts/load.sh [STEPS]   e.g. scripts/load.sh 1000,5000,10000
# STEPS 0 runs the API measurement only. KDLOAD_PORTS="temporal api
# api-metrics worker-metrics" and KDLOAD_DB move the run off the defaults
# (a second run beside another one).
# Results go to stdout; BENCHMARKS.md records them.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS="${1:-1000,5000,10000}"
API_LEVELS="${KDLOAD_API_LEVELS:-1,4,16,64}"
OUT="${KDLOAD_DIR:-/tmp/kdload}"
mkdir -p "$OUT"
GOBIN_DIR="$(go env GOBIN)"; [ -n "$GOBIN_DIR" ] || GOBIN_DIR="$(go env GOPATH)/bin"
export PATH="$GOBIN_DIR:$PATH"

# KDLOAD_NOBUILD=1 runs the binaries already in $OUT (two builds compared
# in the same conditions: build each into its own directory first).
if [ "${KDLOAD_NOBUILD:-0}" != 1 ]; then
	go build -o "$OUT/kernodeck" ./cmd/kernodeck
	go build -o "$OUT/kdload" ./cmd/kdload
fi

read -r TPORT APORT AMPORT WMPORT <<<"${KDLOAD_PORTS:-37233 38080 39091 39092}"
DB="${KDLOAD_DB:-kd_load}"
psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
export KERNODECK_DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB?sslmode=disable"
export TEMPORAL_ADDRESS=127.0.0.1:$TPORT
export KERNODECK_HTTP_ADDR=127.0.0.1:$APORT
export KERNODECK_SECRET_KEYS="load1:$(head -c 32 /dev/urandom | base64)"
export KERNODECK_SUPPORT_TOKENS="kdload:kdload-support-token-0123456789"
export KERNODECK_LOG_LEVEL=warn
export KERNODECK_COOKIE_SECURE=false
export KERNODECK_TRUSTED_PROXIES=127.0.0.1 # kdload registers customers "behind" it
# kdload's customers each create 100 orders at once (paid by support later),
# and its POST /v1/orders measurement thousands more, never paid: the
# per-account quota (5 unpaid orders) would refuse them.
export KERNODECK_MAX_UNPAID_ORDERS=1000000
# kdload's one agent pays those orders by attribution, alone: no second
# agent approves in a load run (four-eyes and the daily cap out of reach).
export KERNODECK_FOUR_EYES_CENTS=100000000000
export KERNODECK_AGENT_DAILY_CAP_CENTS=100000000000
export TEMPORAL_CONFIG_FILE="$OUT/none.toml"

# Another helper's service on one of these ports would receive the load:
# refuse to start rather than share.
for port in $TPORT $APORT $AMPORT $WMPORT; do
	if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
		echo "port $port is in use: stop what listens there first" >&2
		exit 1
	fi
done

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# The worker registers the search attributes.
temporal server start-dev --ip 127.0.0.1 --port $TPORT --headless --log-level error >"$OUT/temporal.log" 2>&1 &
pids+=($!)
# migrate holds the database's secret only (docs/secrets.md).
env -u KERNODECK_SECRET_KEYS -u KERNODECK_SUPPORT_TOKENS "$OUT/kernodeck" migrate
for _ in $(seq 1 60); do (exec 3<>/dev/tcp/127.0.0.1/$TPORT) 2>/dev/null && break; sleep 1; done

KERNODECK_METRICS_ADDR=127.0.0.1:$WMPORT "$OUT/kernodeck" worker >"$OUT/worker.log" 2>&1 &
WORKER=$!; pids+=($WORKER)
KERNODECK_METRICS_ADDR=127.0.0.1:$AMPORT "$OUT/kernodeck" api >"$OUT/api.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 60); do curl -sf http://127.0.0.1:$WMPORT/readyz >/dev/null && curl -sf http://127.0.0.1:$APORT/healthz >/dev/null && break; sleep 1; done
for p in "${pids[@]}"; do
	kill -0 "$p" 2>/dev/null || { echo "a service process exited: see $OUT/*.log" >&2; exit 1; }
done

echo "# $(date -u +%FT%TZ) $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
done_n=0
FLAGS=(-api "http://127.0.0.1:$APORT" -temporal "127.0.0.1:$TPORT" -db "$KERNODECK_DATABASE_URL")
for total in ${STEPS//,/ }; do
	[ "$total" -gt 0 ] || continue
	n=$((total - done_n))
	echo "## $total live rentals (+$n)"
	"$OUT/kdload" rentals "${FLAGS[@]}" -n "$n" -c 16 -worker-metrics "http://127.0.0.1:$WMPORT/metrics" -worker-pid "$WORKER"
	echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	done_n=$total
done
if [ "${KDLOAD_API:-1}" = 1 ]; then
	echo "## API at rising concurrency"
	"$OUT/kdload" api "${FLAGS[@]}" -c "$API_LEVELS" -d "${KDLOAD_API_DURATION:-10s}" -rate "${KDLOAD_API_RATE:-1000}"
	echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
