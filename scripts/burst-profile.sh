#!/usr/bin/env bash
# Where a busy block's time goes (issue 23): run through scripts/prodlike.sh,
#   scripts/prodlike.sh -- scripts/burst-profile.sh [kdload burst flags]
# it runs `kdload burst` with the flags given and, from the paying block
# on, takes CPU profiles (KD_PROFILE_SECONDS, default 30) of every Kernodeck
# process (/debug/pprof/profile on its operators' listener) and of the
# Temporal server (its pprof port), and PostgreSQL's pg_stat_statements top
# statements over the burst (reset at the block), and the CPU time each
# process kind used from the block until every order was active (cpu.txt:
# PostgreSQL's backends by database). Everything goes to KD_PROFILE_OUT
# (default $KD_PRODLIKE_DIR/profile): burst.txt, NAME.pprof, NAME.top.txt
# (go tool pprof -top), pg_stat_statements.txt, cpu.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KD_PRODLIKE_DIR:?run it through scripts/prodlike.sh -- $0}"
OUT="${KD_PROFILE_OUT:-$KD_PRODLIKE_DIR/profile}"
SECS="${KD_PROFILE_SECONDS:-30}"
PGURL="${KERNODECK_DATABASE_URL%/*}/postgres?sslmode=disable"
mkdir -p "$OUT"
# cpu_snapshot prints "ticks kind" per process: a PostgreSQL backend's kind
# is its database (from its title), any other's its command and first word.
cpu_snapshot() {
	local stat f
	for d in /proc/[0-9]*; do
		stat=$(cat "$d/stat" 2>/dev/null) || continue
		f=(${stat##*) }) # from the state on: utime and stime are f[11], f[12]
		mapfile -d '' -t argv <"$d/cmdline" 2>/dev/null || continue
		[ ${#argv[@]} -gt 0 ] || continue
		# The command's name and its first argument (a subcommand, a flag).
		kind="${argv[0]##*/} ${argv[1]:-}"
		# "postgres: [cluster: ]user database client state", or a helper's name.
		case "${argv[0]}" in postgres:*) kind="postgres $(awk '{ i = $2 ~ /:$/ ? 3 : 2; print ($(i + 1) != "" ? $(i + 1) : $i) }' <<<"${argv[0]}")" ;; esac
		echo "${d#/proc/} $((f[11] + f[12])) $kind"
	done
}
# cpu_diff BEFORE AFTER: CPU seconds per kind between the two snapshots
# (a process started in between counts from zero).
cpu_diff() {
	awk -v hz="$(getconf CLK_TCK)" 'NR == FNR { before[$1] = $2; next }
		{ k = $3 " " $4; used[k] += ($2 - before[$1]) / hz; total += ($2 - before[$1]) / hz }
		END { for (k in used) if (used[k] >= 0.5) printf "%8.1f s  %s\n", used[k], k
			printf "%8.1f s  all\n", total }' "$1" "$2" | sort -rn
}
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
cpu_snapshot >"$OUT/cpu-block.txt"
head -1 /proc/stat >"$OUT/stat-block.txt"
(
	until grep -q '^load average after' "$OUT/burst.txt"; do
		kill -0 "$pid" 2>/dev/null || exit 0
		sleep 0.5
	done
	cpu_snapshot >"$OUT/cpu-active.txt"
	head -1 /proc/stat >"$OUT/stat-active.txt"
	{
		echo "# CPU from the block until every order was active ($(getconf CLK_TCK) ticks/s)"
		cpu_diff "$OUT/cpu-block.txt" "$OUT/cpu-active.txt"
		# The whole machine (/proc/stat), kernel threads and exited
		# processes included: how busy its cores were.
		cat "$OUT/stat-block.txt" "$OUT/stat-active.txt" | awk -v hz="$(getconf CLK_TCK)" '
			{ for (i = 2; i <= 9; i++) v[NR, i] = $i }
			END { d = 0; for (i = 2; i <= 9; i++) { x[i] = (v[2, i] - v[1, i]) / hz; d += x[i] }
				printf "machine: %.1f s of core time, busy %.1f s (user %.1f, system %.1f, softirq %.1f), idle %.1f s, iowait %.1f s, steal %.1f s\n",
					d, d - x[5] - x[6], x[2] + x[3], x[4], x[8], x[5], x[6], x[9] }'
	} >"$OUT/cpu.txt"
) &
cpujob=$!
targets="$KD_PRODLIKE_METRICS temporal-server=$KD_PRODLIKE_TEMPORAL_PPROF"
for kv in $targets; do
	curl -sf -o "$OUT/${kv%%=*}.pprof" "http://${kv#*=}/debug/pprof/profile?seconds=$SECS" &
done
wait_profiles() { for job in $(jobs -p); do [ "$job" = "$pid" ] || [ "$job" = "$cpujob" ] || wait "$job" || true; done; }
wait_profiles
for kv in $targets; do
	name="${kv%%=*}"
	[ -s "$OUT/$name.pprof" ] && go tool pprof -top -nodecount=30 "$OUT/$name.pprof" >"$OUT/$name.top.txt" 2>/dev/null || true
done
status=0
wait "$pid" || status=$?
wait "$cpujob" || true
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
