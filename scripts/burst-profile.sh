#!/usr/bin/env bash
# Where a busy block's time goes (issue 23): run through scripts/prodlike.sh,
#   scripts/prodlike.sh -- scripts/burst-profile.sh [kdload burst flags]
# it runs `kdload burst` with the flags given and, from the paying block
# on, takes CPU profiles (KD_PROFILE_SECONDS, default 30) of every Kernodeck
# process (/debug/pprof/profile on its operators' listener) and of the
# Temporal server (its pprof port), and PostgreSQL's pg_stat_statements top
# statements over the burst (reset at the block). Everything goes to
# KD_PROFILE_OUT (default $KD_PRODLIKE_DIR/profile): burst.txt, NAME.pprof,
# NAME.top.txt (go tool pprof -top), pg_stat_statements.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KD_PRODLIKE_DIR:?run it through scripts/prodlike.sh -- $0}"
OUT="${KD_PROFILE_OUT:-$KD_PRODLIKE_DIR/profile}"
SECS="${KD_PROFILE_SECONDS:-30}"
PGURL="${KERNODECK_DATABASE_URL%/*}/postgres?sslmode=disable"
mkdir -p "$OUT"
go build -o "$OUT/kdload" ./cmd/kdload
: >"$OUT/burst.txt"
"$OUT/kdload" burst "$@" > >(tee "$OUT/burst.txt") &
pid=$!
until grep -q '^block ' "$OUT/burst.txt"; do
	if ! kill -0 "$pid" 2>/dev/null; then
		wait "$pid"
		exit
	fi
	sleep 0.2
done
psql -qAt "$PGURL" -c 'SELECT pg_stat_statements_reset()' >/dev/null
targets="$KD_PRODLIKE_METRICS temporal-server=$KD_PRODLIKE_TEMPORAL_PPROF"
for kv in $targets; do
	curl -sf -o "$OUT/${kv%%=*}.pprof" "http://${kv#*=}/debug/pprof/profile?seconds=$SECS" &
done
wait_profiles() { for job in $(jobs -p); do [ "$job" = "$pid" ] || wait "$job" || true; done; }
wait_profiles
for kv in $targets; do
	name="${kv%%=*}"
	[ -s "$OUT/$name.pprof" ] && go tool pprof -top -nodecount=30 "$OUT/$name.pprof" >"$OUT/$name.top.txt" 2>/dev/null || true
done
status=0
wait "$pid" || status=$?
psql "$PGURL" >"$OUT/pg_stat_statements.txt" <<'SQL'
SELECT d.datname AS db, s.calls, round(s.total_exec_time) AS total_ms,
	round(s.mean_exec_time::numeric, 2) AS mean_ms, s.rows,
	left(regexp_replace(s.query, '\s+', ' ', 'g'), 110) AS query
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
ORDER BY s.total_exec_time DESC LIMIT 20;
SELECT d.datname AS db, sum(s.calls) AS calls, round(sum(s.total_exec_time)) AS total_ms
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid GROUP BY 1 ORDER BY 3 DESC;
SQL
echo "profiles and pg_stat_statements in $OUT" >&2
exit "$status"
