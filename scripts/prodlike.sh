#!/usr/bin/env bash
# A production-shaped Kernodeck on this one machine (issue 23), not part of
# scripts/test.sh:
#   - the Temporal server itself (go.temporal.io/server v1.29.1, all four
#     services in one process, built once and cached) on PostgreSQL
#     persistence, its schemas set up by its own SQL tool in databases of its
#     own, its frontend behind mutual TLS (a throwaway CA and certificates made
#     with openssl), configured by deploy/temporal/production.yaml, the file
#     the systemd recipe uses;
#   - its namespace and Kernodeck's search attributes registered;
#   - Litecoin Core in regtest with a funded wallet, its peer-to-peer port
#     open to the watchers (push);
#   - btcd in regtest (as `kernodeck dev`: segwit active, mined to the
#     development payer of devnodes.SendBitcoin, which has no wallet), its
#     peer-to-peer port open to the watchers (push);
#   - two `kernodeck api` (different ports), two `kernodeck worker` (local
#     provisioning driver; one with KD_PRODLIKE_WORKERS=1), two
#     `kernodeck chainwatch` watching both chains
#     (each network under its own lease: one process holds it, the other
#     waits to take over);
# then it waits until Ctrl-C (or SIGTERM), which stops everything it started
# and waits for it. Meanwhile a Kernodeck process that exits is started again
# a second later (as systemd's Restart=always would): a test may kill one
# (its PID: $KD_PRODLIKE_DIR/pids/NAME).
#
# Usage:
#   scripts/prodlike.sh                 start, print the endpoints, wait for Ctrl-C
#   scripts/prodlike.sh -- CMD [ARG...] start, run CMD with the deployment's
#                                       environment ($KD_PRODLIKE_ENV), stop,
#                                       exit with CMD's status
#   scripts/prodlike.sh build-tools     only build the cached Temporal binaries
#
# Environment (all optional):
#   KD_PRODLIKE_DIR        state directory (certificates, logs, chain, env files);
#                          default /tmp/kd-prodlike
#   KD_PRODLIKE_PORT_BASE  every port is this + a fixed offset; default 27000
#                          (at most 31800: Temporal stores membership ports as
#                          a PostgreSQL smallint, and ports below 32768 stay
#                          clear of the kernel's ephemeral range):
#                          Temporal frontend +233 (HTTP +243, history +234,
#                          matching +235, worker +239, membership +933..+939,
#                          metrics +900, pprof +901), api +80 and +81, metrics: api +91/+92,
#                          worker +93/+94, chainwatch +95/+96; Litecoin RPC +443,
#                          peer-to-peer +444; btcd RPC +332, peer-to-peer +333
#   KD_PRODLIKE_DB         Kernodeck's database; default kd_prodlike
#   KD_TEMPORAL_DB, KD_TEMPORAL_VISIBILITY_DB
#                          Temporal's; default kd_temporal, kd_temporal_visibility
#   KD_PRODLIKE_WORKERS    `kernodeck worker` processes: 2 (default) or 1
#                          (worker-1 alone, e.g. for one worker's memory under
#                          `kdload rentals`)
#   KD_PRODLIKE_KEEP=1     keep the databases and the chain of the last run
#                          (default: dropped and made again, so every run starts
#                          the same)
#   KD_TOOLS_DIR           where temporal-server and temporal-sql-tool are
#                          cached; default $GOBIN if set, else ~/.cache/kernodeck-tools
#   KD_PRODLIKE_PG         "own" (default): a PostgreSQL server of the run's own
#                          (initdb under the state directory, port +432,
#                          max_connections 300; durable settings), as the
#                          deployment holds ~150 connections (6 Kernodeck
#                          processes x 20, Temporal's pools) and would exhaust a
#                          shared server's default 100, failing everyone else's
#                          connections; "shared": the server at PGHOST/PGPORT
#                          (default 127.0.0.1:5432, user postgres, trust
#                          authentication), which must allow ~150 more connections
#   KD_PRODLIKE_NETNS=1    three machines (issue 38, item 1; docs/three-machines.md):
#                          as root, network namespaces NAME-data (192.0.2.10:
#                          PostgreSQL, the Temporal server), NAME-app
#                          (192.0.2.11: api, worker, mail), NAME-chain
#                          (192.0.2.12: chainwatch, Litecoin Core; no btcd)
#                          and NAME-ops (192.0.2.2: this script, its checks,
#                          the command after --, the SMTP provider, mailpit)
#                          on a bridge in NAME-hub; each process binds its
#                          machine's address, none loopback; PostgreSQL has
#                          docs/database.md's roles (an owner per database, a
#                          login per Kernodeck process kind), passwords
#                          (SCRAM) from 192.0.2.0/24; one api, one worker,
#                          one chainwatch and `kernodeck mail`. NAME
#                          is KD_PRODLIKE_NETNS_PREFIX (default kdPID, unique
#                          per run); every namespace is deleted at the end,
#                          also on failure
# Any KERNODECK_* variable exported by the caller reaches every Kernodeck
# process (e.g. KERNODECK_CONFIRMATIONS=litecoin=2).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
ARGS=("$@")

TEMPORAL_VERSION=v1.29.1
DIR="${KD_PRODLIKE_DIR:-/tmp/kd-prodlike}"
BASE="${KD_PRODLIKE_PORT_BASE:-27000}"
KD_DB="${KD_PRODLIKE_DB:-kd_prodlike}"
T_DB="${KD_TEMPORAL_DB:-kd_temporal}"
TV_DB="${KD_TEMPORAL_VISIBILITY_DB:-kd_temporal_visibility}"
PG_MODE="${KD_PRODLIKE_PG:-own}"
WORKERS="${KD_PRODLIKE_WORKERS:-2}"
case "$WORKERS" in 1 | 2) ;; *) echo "KD_PRODLIKE_WORKERS: 1 or 2" >&2; exit 2 ;; esac
case "$PG_MODE" in own | shared) ;; *) echo "KD_PRODLIKE_PG: own or shared" >&2; exit 2 ;; esac
PGHOST="${PGHOST:-127.0.0.1}"
PGPORT="${PGPORT:-5432}"
if [ "$PG_MODE" = own ]; then
	PGHOST=127.0.0.1
	PGPORT=$((BASE + 432))
fi
PGUSER="${PGUSER:-postgres}"
NETNS="${KD_PRODLIKE_NETNS:-0}"
case "$NETNS" in 0 | 1) ;; *) echo "KD_PRODLIKE_NETNS: 0 or 1" >&2; exit 2 ;; esac
# The machines' addresses and how a command runs on each: all this one
# (loopback) unless KD_PRODLIKE_NETNS=1, where this script runs on the
# operator's machine (NS_PREFIX-ops) and starts each process on its own.
H_DATA=127.0.0.1 H_APP=127.0.0.1 H_CHAIN=127.0.0.1 H_OPS=127.0.0.1
ON_DATA=() ON_APP=() ON_CHAIN=()
NS_PREFIX="${KD_PRODLIKE_NETNS_INNER:-}"
if [ "$NETNS" = 1 ]; then
	[ "$PG_MODE" = own ] || { echo "KD_PRODLIKE_NETNS=1 runs its own PostgreSQL (not KD_PRODLIKE_PG=shared)" >&2; exit 2; }
	H_DATA=192.0.2.10 H_APP=192.0.2.11 H_CHAIN=192.0.2.12 H_OPS=192.0.2.2
	WORKERS=1
	if [ -n "$NS_PREFIX" ]; then
		ON_DATA=(ip netns exec "$NS_PREFIX-data")
		ON_APP=(ip netns exec "$NS_PREFIX-app")
		ON_CHAIN=(ip netns exec "$NS_PREFIX-chain")
	fi
	PGHOST=$H_DATA
fi
export PGHOST PGPORT PGUSER
SERVER_NAME=temporal.kernodeck.internal
NAMESPACE=kernodeck
# workflows.SearchAttributeNames (deploy/deploy_test.go checks the two agree).
SEARCH_ATTRIBUTES="KdRef KdCustomer KdStatus KdGPU KdAsset KdNetwork KdKind"
# The shards of Temporal's history: fixed when its databases are set up.
SHARDS="${KD_TEMPORAL_HISTORY_SHARDS:-16}"

GOBIN_DIR="$(go env GOBIN)"
TOOLS="${KD_TOOLS_DIR:-${GOBIN_DIR:-$HOME/.cache/kernodeck-tools}}"
MODDIR="$(go env GOMODCACHE)/go.temporal.io/server@$TEMPORAL_VERSION"
[ -n "$GOBIN_DIR" ] || GOBIN_DIR="$(go env GOPATH)/bin"
export PATH="$TOOLS:$GOBIN_DIR:$PATH"

log() { printf '[prodlike %s] %s\n' "$(date -u +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --- tools ---------------------------------------------------------------

# build_tools builds the Temporal server and its SQL tool from the Go module
# once (several minutes on two cores) and keeps them under $TOOLS. The
# server is Kernodeck's (scripts/temporal-tools/kdtemporal: the stock main
# with its authorizer, docs/temporal-authorization.md), built again when its
# sources change ($TOOLS/temporal-server.src holds their digest).
build_tools() {
	mkdir -p "$TOOLS"
	local src
	src="$(cd "$ROOT/scripts/temporal-tools" && find go.mod go.sum kdtemporal -type f -name '*.go' ! -name '*_test.go' -o -type f -name 'go.*' |
		LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)"
	if [ -x "$TOOLS/temporal-server" ] && [ -x "$TOOLS/temporal-sql-tool" ] &&
		[ "$(cat "$TOOLS/temporal-server.src" 2>/dev/null)" = "$src" ] &&
		"$TOOLS/temporal-server" --version 2>/dev/null | grep -q "${TEMPORAL_VERSION#v}"; then
		return
	fi
	local tmp
	tmp="$(mktemp -d)"
	log "building go.temporal.io/server $TEMPORAL_VERSION (Kernodeck's server, with its authorizer, and the sql tool)"
	# From the Temporal CLI's own module graph (scripts/temporal-tools): the
	# server's packages are the CLI's, already compiled by ensure-tools.
	local pinned
	pinned="$(cd "$ROOT/scripts/temporal-tools" && go list -m -f '{{.Version}}' go.temporal.io/server)"
	[ "$pinned" = "$TEMPORAL_VERSION" ] || die "scripts/temporal-tools pins go.temporal.io/server $pinned, not $TEMPORAL_VERSION"
	(cd "$ROOT/scripts/temporal-tools" && export GOFLAGS=-buildvcs=false &&
		go build -o "$tmp/server" ./kdtemporal &&
		go build -o "$tmp/sql" go.temporal.io/server/cmd/tools/sql)
	mv "$tmp/server" "$TOOLS/temporal-server"
	mv "$tmp/sql" "$TOOLS/temporal-sql-tool"
	echo "$src" >"$TOOLS/temporal-server.src"
	rmdir "$tmp"
}

if [ "${1:-}" = build-tools ]; then
	build_tools
	exit 0
fi
CMD=()
if [ "${1:-}" = -- ]; then
	shift
	[ $# -gt 0 ] || die "nothing to run after --"
	CMD=("$@")
elif [ $# -gt 0 ]; then
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2
fi

command -v openssl >/dev/null || die "openssl is needed (apt-get install -y openssl)"
command -v psql >/dev/null || die "psql is needed (the PostgreSQL client)"
command -v curl >/dev/null || die "curl is needed"
command -v jq >/dev/null || die "jq is needed"
command -v temporal >/dev/null || die "the Temporal CLI is needed (scripts/ensure-tools.sh installs it)"
LITECOIND=/usr/lib/litecoin/litecoind
[ -x "$LITECOIND" ] || die "Litecoin Core is needed (apt-get install -y litecoind; scripts/ensure-tools.sh)"
command -v btcd >/dev/null || die "btcd is needed (scripts/ensure-tools.sh installs it)"
[ -d "$MODDIR/schema/postgresql/v12" ] || (cd "$(mktemp -d)" && go mod download "go.temporal.io/server@$TEMPORAL_VERSION")
build_tools

# --- three machines: network namespaces (KD_PRODLIKE_NETNS=1) ----------------

# netns_run makes the machines (/work/shared/LOCAL-NODES.md: a bridge in a
# namespace of its own, a veth per machine), runs this script again on the
# operator's machine (NS-ops), which starts every process on its own machine,
# and deletes the namespaces when it ends, however it ends.
netns_run() {
	[ "$(id -u)" = 0 ] || die "KD_PRODLIKE_NETNS=1 needs root (ip netns)"
	command -v ip >/dev/null || die "ip (iproute2) is needed"
	local ns="${KD_PRODLIKE_NETNS_PREFIX:-kd$$}" id=$$ host addr
	[[ "$ns" =~ ^[a-zA-Z0-9_-]{1,40}$ ]] || die "KD_PRODLIKE_NETNS_PREFIX: letters, digits, - and _"
	if ip netns list | grep -q "^$ns-"; then
		die "namespaces $ns-* exist (another run?): set KD_PRODLIKE_NETNS_PREFIX"
	fi
	NS_MADE=()
	netns_teardown() {
		local n pids
		for n in "${NS_MADE[@]}"; do
			# Whatever the run left (it stops its processes itself).
			pids="$(ip netns pids "$n" 2>/dev/null || true)"
			# shellcheck disable=SC2086
			[ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
		done
		for n in "${NS_MADE[@]}"; do ip netns del "$n" 2>/dev/null || true; done
		[ ${#NS_MADE[@]} = 0 ] || log "namespaces ${NS_MADE[*]} deleted"
		NS_MADE=()
	}
	netns_forward() { [ -z "${INNER:-}" ] || kill -"$1" "$INNER" 2>/dev/null || true; }
	trap netns_teardown EXIT
	trap 'netns_forward INT' INT
	trap 'netns_forward TERM' TERM
	ip netns add "$ns-hub"
	NS_MADE+=("$ns-hub")
	ip -n "$ns-hub" link add br0 type bridge
	ip -n "$ns-hub" link set br0 up
	for host in ops=$H_OPS data=$H_DATA app=$H_APP chain=$H_CHAIN; do
		addr=${host#*=}
		host=${host%%=*}
		ip netns add "$ns-$host"
		NS_MADE+=("$ns-$host")
		ip link add "kv$id${host:0:1}" type veth peer name eth0 netns "$ns-$host"
		ip link set "kv$id${host:0:1}" netns "$ns-hub"
		ip -n "$ns-hub" link set "kv$id${host:0:1}" master br0 up
		ip -n "$ns-$host" addr add "$addr/24" dev eth0
		ip -n "$ns-$host" link set eth0 up
		ip -n "$ns-$host" link set lo up
	done
	log "machines: $ns-data $H_DATA (PostgreSQL, Temporal), $ns-app $H_APP (api, worker, mail)," \
		"$ns-chain $H_CHAIN (chainwatch, litecoind), $ns-ops $H_OPS (operator, SMTP provider)"
	ip netns exec "$ns-ops" env KD_PRODLIKE_NETNS_INNER="$ns" "$ROOT/scripts/prodlike.sh" "${ARGS[@]}" &
	INNER=$!
	local status
	while :; do
		status=0
		wait "$INNER" || status=$?
		kill -0 "$INNER" 2>/dev/null || break
	done
	exit "$status"
}
if [ "$NETNS" = 1 ] && [ -z "$NS_PREFIX" ]; then
	netns_run
fi

# --- ports ---------------------------------------------------------------

[ "$BASE" -ge 1024 ] && [ "$BASE" -le 31800 ] || die "KD_PRODLIKE_PORT_BASE must be 1024..31800"
P_FRONTEND=$((BASE + 233))
P_HTTP=$((BASE + 243))
P_HISTORY=$((BASE + 234))
P_MATCHING=$((BASE + 235))
P_TWORKER=$((BASE + 239))
P_TMETRICS=$((BASE + 900))
P_TPPROF=$((BASE + 901))
P_API1=$((BASE + 80))
P_API2=$((BASE + 81))
P_LTC_RPC=$((BASE + 443))
P_LTC_P2P=$((BASE + 444))
P_BTC_RPC=$((BASE + 332))
P_BTC_P2P=$((BASE + 333))
ALL_PORTS="$P_FRONTEND $P_HTTP $P_HISTORY $P_MATCHING $P_TWORKER $((BASE + 933)) $((BASE + 934)) $((BASE + 935)) $((BASE + 939)) $P_TMETRICS $P_TPPROF $P_API1 $P_API2 $(seq $((BASE + 91)) $((BASE + 96))) $P_LTC_RPC $P_LTC_P2P $P_BTC_RPC $P_BTC_P2P"
[ "$PG_MODE" = shared ] || ALL_PORTS="$ALL_PORTS $PGPORT"
[ "$NETNS" = 1 ] || for port in $ALL_PORTS; do
	if (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
		die "port $port is in use (another deployment?): stop it, or set KD_PRODLIKE_PORT_BASE"
	fi
done

# --- processes and shutdown ------------------------------------------------

PIDS=()
NAMES=()
STOPPING=0
# stop ends every child, Kernodeck's processes first, then the Temporal
# server and the nodes, and waits for them (SIGKILL after 20 s).
stop() {
	[ "$STOPPING" = 0 ] || return 0
	STOPPING=1
	log "stopping"
	local i
	# The command and its children (go run's program) first.
	[ -z "${CMDPID:-}" ] || { kill -TERM -- -"$CMDPID" 2>/dev/null || true; wait_pid "$CMDPID" 20; }
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		kill -TERM "${PIDS[$i]}" 2>/dev/null || true
		# Kernodeck's processes together, then the nodes, then the server.
		case "${NAMES[$i]}" in temporal-server | litecoind | btcd | postgres) wait_pid "${PIDS[$i]}" 20 ;; esac
	done
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do wait_pid "${PIDS[$i]}" 20; done
	log "stopped; logs in $DIR/logs"
}
wait_pid() {
	local pid=$1 secs=$2 n=0
	while kill -0 "$pid" 2>/dev/null; do
		if [ $n -ge $((secs * 10)) ]; then
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.1
		n=$((n + 1))
	done
	wait "$pid" 2>/dev/null || true
}
trap 'stop' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# spawn NAME CMD...: starts a child with its output in $DIR/logs/NAME.log.
# Its PID is in $DIR/pids/NAME (kept current across restarts).
CMDS=()
spawn() {
	local name=$1
	shift
	"$@" >>"$DIR/logs/$name.log" 2>&1 &
	PIDS+=($!)
	NAMES+=("$name")
	CMDS+=("$(printf '%q ' "$@")")
	echo $! >"$DIR/pids/$name"
	log "started $name (pid $!)"
}
# supervise: like systemd's Restart=always, a Kernodeck process that exited
# (killed by a test, or crashed) starts again after a second; the server or
# the node exiting stops everything.
supervise() {
	local i st
	for i in "${!PIDS[@]}"; do
		kill -0 "${PIDS[$i]}" 2>/dev/null && continue
		case "${NAMES[$i]}" in
		temporal-server | litecoind | btcd | postgres) die "${NAMES[$i]} exited: see $DIR/logs/${NAMES[$i]}.log" ;;
		esac
		st=0
		wait "${PIDS[$i]}" 2>/dev/null || st=$?
		sleep 1
		eval "${CMDS[$i]}" '>>"$DIR/logs/${NAMES[$i]}.log" 2>&1 &'
		PIDS[$i]=$!
		echo $! >"$DIR/pids/${NAMES[$i]}"
		log "restarted ${NAMES[$i]} (pid $!) after it exited with status $st"
	done
}
# wait_until WHAT SECONDS CMD...: retries CMD every half second.
wait_until() {
	local what=$1 secs=$2 n=0
	shift 2
	until "$@" >/dev/null 2>&1; do
		local i
		for i in "${!PIDS[@]}"; do
			kill -0 "${PIDS[$i]}" 2>/dev/null || die "${NAMES[$i]} exited while waiting for $what: see $DIR/logs/${NAMES[$i]}.log"
		done
		[ $n -lt $((secs * 2)) ] || die "$what not ready after ${secs}s"
		sleep 0.5
		n=$((n + 1))
	done
}

# --- state directory -------------------------------------------------------

if [ "${KD_PRODLIKE_KEEP:-0}" != 1 ]; then
	rm -rf "$DIR"
fi
mkdir -p "$DIR/logs" "$DIR/tls" "$DIR/bin" "$DIR/pids"
chmod 700 "$DIR/tls"

# --- certificates (throwaway CA, frontend, system worker, clients) ---------

TLS="$DIR/tls"
if [ ! -f "$TLS/api.pem" ]; then
	log "certificates: a throwaway CA, the frontend's, the system worker's, one per client role"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
		-subj "/CN=Kernodeck prodlike Temporal CA" -keyout "$TLS/ca.key" -out "$TLS/ca.pem" 2>/dev/null
	# cert NAME CN EXT: a certificate signed by the CA.
	cert() {
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
			-keyout "$TLS/$1.key" -out "$TLS/$1.csr" 2>/dev/null
		printf '%s\n' "$3" >"$TLS/$1.ext"
		openssl x509 -req -in "$TLS/$1.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" -CAcreateserial \
			-days 30 -extfile "$TLS/$1.ext" -out "$TLS/$1.pem" 2>/dev/null
		rm -f "$TLS/$1.csr" "$TLS/$1.ext"
	}
	# The data machine's address too (clients that dial it by address).
	cert frontend "$SERVER_NAME" "subjectAltName=DNS:$SERVER_NAME,DNS:localhost,IP:127.0.0.1$([ "$H_DATA" = 127.0.0.1 ] || echo ",IP:$H_DATA")
extendedKeyUsage=serverAuth
keyUsage=digitalSignature"
	cert system-worker temporal-system-worker "extendedKeyUsage=clientAuth
keyUsage=digitalSignature"
	# One per role: the Temporal server lets each common name make only
	# its role's calls (docs/temporal-authorization.md).
	for role in api worker chainwatch recover operator; do
		cert "$role" "kernodeck-$role" "extendedKeyUsage=clientAuth
keyUsage=digitalSignature"
	done
	chmod 600 "$TLS"/*.key
fi
# A certificate of another CA, for checking that the frontend refuses it.
if [ ! -f "$TLS/stranger.pem" ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
		-subj "/CN=stranger" -keyout "$TLS/stranger.key" -out "$TLS/stranger.pem" 2>/dev/null
fi

# --- PostgreSQL: databases and Temporal's schemas ---------------------------

if [ "$PG_MODE" = own ]; then
	PGBIN="$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -1)")"
	[ -x "$PGBIN/postgres" ] || die "PostgreSQL's server binaries are needed (Debian's postgresql package), or KD_PRODLIKE_PG=shared"
	# PostgreSQL refuses to run as root: as the postgres user then.
	AS_PG=()
	[ "$(id -u)" != 0 ] || AS_PG=(setpriv --reuid=postgres --regid=postgres --init-groups)
	mkdir -p "$DIR/pg"
	[ "$(id -u)" != 0 ] || chown postgres: "$DIR/pg"
	if [ ! -d "$DIR/pg/data" ]; then
		"${AS_PG[@]}" "$PGBIN/initdb" -D "$DIR/pg/data" -U postgres --auth=trust -E UTF8 >"$DIR/logs/initdb.log" 2>&1 ||
			die "initdb: see $DIR/logs/initdb.log"
	fi
	if [ "$NETNS" = 1 ]; then
		# The data machine: other machines' connections by password
		# (SCRAM); the superuser's from the operator's machine only.
		PG_SUPER_PW="$(openssl rand -hex 16)"
		grep -q '^# kernodeck netns' "$DIR/pg/data/pg_hba.conf" || cat >>"$DIR/pg/data/pg_hba.conf" <<EOF
# kernodeck netns
host all postgres $H_OPS/32 scram-sha-256
host all postgres 0.0.0.0/0 reject
host all all 192.0.2.0/24 scram-sha-256
EOF
		umask 077
		echo "$H_DATA:$PGPORT:*:postgres:$PG_SUPER_PW" >"$DIR/pg/ops.pgpass"
		umask 022
		export PGPASSFILE="$DIR/pg/ops.pgpass"
	fi
	spawn postgres "${ON_DATA[@]}" "${AS_PG[@]}" "$PGBIN/postgres" -D "$DIR/pg/data" -p "$PGPORT" -k "$DIR/pg" \
		-c listen_addresses="$H_DATA" -c password_encryption=scram-sha-256 -c max_connections=300 -c shared_buffers=256MB \
		-c shared_preload_libraries=pg_stat_statements
	if [ "$NETNS" = 1 ]; then
		# As the database's administrator on its machine (the socket).
		wait_until "PostgreSQL's socket" 60 "${ON_DATA[@]}" "${AS_PG[@]}" psql -h "$DIR/pg" -p "$PGPORT" -qAt -d postgres -c 'SELECT 1'
		"${ON_DATA[@]}" "${AS_PG[@]}" psql -h "$DIR/pg" -p "$PGPORT" -q -d postgres -v pw="$PG_SUPER_PW" >/dev/null <<<"ALTER ROLE postgres PASSWORD :'pw';"
	fi
	wait_until "PostgreSQL on $PGHOST:$PGPORT" 60 psql -qAt -d postgres -c 'SELECT 1'
	# Where the time goes: SELECT * FROM pg_stat_statements (any database).
	psql -q -d postgres -c 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements' >/dev/null
	log "PostgreSQL of its own on $PGHOST:$PGPORT ($DIR/pg/data, pg_stat_statements on)"
fi
psql -qAt -d postgres -c 'SELECT 1' >/dev/null || die "PostgreSQL at $PGHOST:$PGPORT does not answer"
db_exists() { [ "$(psql -qAt -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$1'")" = 1 ]; }
if [ "${KD_PRODLIKE_KEEP:-0}" != 1 ]; then
	for db in "$KD_DB" "$T_DB" "$TV_DB"; do
		psql -q -d postgres -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)"
	done
fi
SQLTOOL=(temporal-sql-tool --plugin postgres12 --ep "$PGHOST" -p "$PGPORT" -u "$PGUSER")
T_USER=$PGUSER
KD_OWNER=$PGUSER
if [ "$NETNS" = 1 ]; then
	# Database roles, docs/database.md's SQL: each database is owned by the
	# role that changes its schema (kernodeck: `kernodeck migrate`;
	# temporal: the SQL tool and the server), the Kernodeck processes log
	# in as a role per kind (kernodeck_api, _worker, _chainwatch, _mail),
	# members of kernodeck_app (rows, no DDL). Passwords by role, never on
	# a command line (psql variables from its standard input's script; the
	# SQL tool reads SQL_PASSWORD).
	[ "${KD_PRODLIKE_KEEP:-0}" != 1 ] || die "KD_PRODLIKE_NETNS=1 starts afresh: no KD_PRODLIKE_KEEP=1"
	T_USER=temporal KD_OWNER=kernodeck
	KD_KINDS="api worker chainwatch mail"
	umask 077
	{
		for r in temporal kernodeck $KD_KINDS; do echo "PW_$r=$(openssl rand -hex 16)"; done
	} >"$DIR/pg/roles.env"
	umask 022
	# shellcheck disable=SC1091
	. "$DIR/pg/roles.env"
	psql -q -d postgres -v ON_ERROR_STOP=1 -v kd_db="$KD_DB" -v t_db="$T_DB" -v tv_db="$TV_DB" >/dev/null <<'EOF' || die "database roles"
CREATE ROLE kernodeck LOGIN;
CREATE ROLE kernodeck_app NOLOGIN;
CREATE ROLE kernodeck_api LOGIN IN ROLE kernodeck_app;
CREATE ROLE kernodeck_worker LOGIN IN ROLE kernodeck_app;
CREATE ROLE kernodeck_chainwatch LOGIN IN ROLE kernodeck_app;
CREATE ROLE kernodeck_mail LOGIN IN ROLE kernodeck_app;
CREATE DATABASE :"kd_db" OWNER kernodeck;
REVOKE ALL ON DATABASE :"kd_db" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"kd_db" TO kernodeck_app;
\connect :"kd_db"
ALTER SCHEMA public OWNER TO kernodeck;
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO kernodeck_app;
ALTER DEFAULT PRIVILEGES FOR ROLE kernodeck IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO kernodeck_app;
ALTER DEFAULT PRIVILEGES FOR ROLE kernodeck IN SCHEMA public
    GRANT USAGE ON SEQUENCES TO kernodeck_app;
CREATE ROLE temporal LOGIN;
CREATE DATABASE :"t_db" OWNER temporal;
CREATE DATABASE :"tv_db" OWNER temporal;
REVOKE ALL ON DATABASE :"t_db" FROM PUBLIC;
REVOKE ALL ON DATABASE :"tv_db" FROM PUBLIC;
\connect :"t_db"
ALTER SCHEMA public OWNER TO temporal;
REVOKE ALL ON SCHEMA public FROM PUBLIC;
\connect :"tv_db"
ALTER SCHEMA public OWNER TO temporal;
REVOKE ALL ON SCHEMA public FROM PUBLIC;
EOF
	for r in temporal kernodeck $KD_KINDS; do
		pw="PW_$r"
		[ "$r" = temporal ] || [ "$r" = kernodeck ] || r=kernodeck_$r
		psql -q -d postgres -v ON_ERROR_STOP=1 -v role="$r" -v pw="${!pw}" >/dev/null <<<"ALTER ROLE :\"role\" PASSWORD :'pw';" ||
			die "password of $r"
	done
	PW_TEMPORAL=$PW_temporal
	log "database roles (docs/database.md): kernodeck owns $KD_DB (migrate), kernodeck_api, _worker, _chainwatch, _mail" \
		"(members of kernodeck_app: rows only) log in per kind; temporal owns $T_DB, $TV_DB"
	SQLTOOL=(env SQL_PASSWORD="$PW_TEMPORAL" temporal-sql-tool --plugin postgres12 --ep "$PGHOST" -p "$PGPORT" -u temporal)
fi
schema() { # DB KIND(temporal|visibility)
	if [ "$NETNS" = 1 ] || ! db_exists "$1"; then
		log "Temporal database $1: create (owner $T_USER), setup-schema -v 0.0, update-schema"
		# The superuser creates it (a role without CREATEDB cannot), owned
		# by the role that sets up its schema.
		db_exists "$1" || psql -q -d postgres -c "CREATE DATABASE \"$1\" OWNER \"$T_USER\""
		"${SQLTOOL[@]}" --db "$1" setup-schema -v 0.0 >>"$DIR/logs/sql-tool.log" 2>&1
	fi
	# Idempotent: applies only the versions the database lacks (an upgrade
	# of the server runs exactly this before its new binary starts).
	"${SQLTOOL[@]}" --db "$1" update-schema -d "$MODDIR/schema/postgresql/v12/$2/versioned" >>"$DIR/logs/sql-tool.log" 2>&1 ||
		die "update-schema $1: see $DIR/logs/sql-tool.log"
}
schema "$T_DB" temporal
schema "$TV_DB" visibility
db_exists "$KD_DB" || psql -q -d postgres -c "CREATE DATABASE \"$KD_DB\" OWNER \"$KD_OWNER\""

# --- Temporal server ---------------------------------------------------------

cat >"$DIR/temporal.env" <<EOF
KD_TEMPORAL_LOG_LEVEL=warn
KD_TEMPORAL_HISTORY_SHARDS=$SHARDS
KD_TEMPORAL_DB=$T_DB
KD_TEMPORAL_VISIBILITY_DB=$TV_DB
KD_TEMPORAL_DB_ADDR=$PGHOST:$PGPORT
KD_TEMPORAL_DB_USER=$T_USER
$([ "$NETNS" = 0 ] || echo "KD_TEMPORAL_DB_PASSWORD=$PW_TEMPORAL")
KD_TEMPORAL_DB_MAX_CONNS=10
KD_TEMPORAL_VISIBILITY_DB_MAX_CONNS=4
KD_TEMPORAL_BIND_IP=$H_DATA
KD_TEMPORAL_FRONTEND_PORT=$P_FRONTEND
KD_TEMPORAL_HTTP_PORT=$P_HTTP
KD_TEMPORAL_HISTORY_PORT=$P_HISTORY
KD_TEMPORAL_MATCHING_PORT=$P_MATCHING
KD_TEMPORAL_WORKER_PORT=$P_TWORKER
KD_TEMPORAL_FRONTEND_MEMBERSHIP_PORT=$((BASE + 933))
KD_TEMPORAL_HISTORY_MEMBERSHIP_PORT=$((BASE + 934))
KD_TEMPORAL_MATCHING_MEMBERSHIP_PORT=$((BASE + 935))
KD_TEMPORAL_WORKER_MEMBERSHIP_PORT=$((BASE + 939))
KD_TEMPORAL_METRICS_ADDR=$H_DATA:$P_TMETRICS
KD_TEMPORAL_PPROF_PORT=$([ "$NETNS" = 0 ] && echo "$P_TPPROF" || echo 0)
KD_TEMPORAL_FRONTEND_CERT=$TLS/frontend.pem
KD_TEMPORAL_FRONTEND_KEY=$TLS/frontend.key
KD_TEMPORAL_CLIENT_CA=$TLS/ca.pem
KD_TEMPORAL_SYSTEM_WORKER_CERT=$TLS/system-worker.pem
KD_TEMPORAL_SYSTEM_WORKER_KEY=$TLS/system-worker.key
KD_TEMPORAL_SERVER_NAME=$SERVER_NAME
KD_TEMPORAL_SERVER_CA=$TLS/ca.pem
KD_TEMPORAL_DYNAMIC_CONFIG=$ROOT/deploy/temporal/dynamicconfig.yaml
EOF
# The same file, in systemd's EnvironmentFile format, is what
# deploy/systemd/temporal-server.service reads from /etc/kernodeck/temporal.env.
chmod 600 "$DIR/temporal.env"
mapfile -t TENV < <(grep -v '^#' "$DIR/temporal.env" | grep .)
spawn temporal-server "${ON_DATA[@]}" env -u PGPASSFILE "${TENV[@]}" "$(command -v temporal-server)" --root / --config "$ROOT/deploy/temporal" --env production start

# The operators' CLI, with the operator's certificate.
TBASE=(temporal --disable-config-file --disable-config-env --address "$H_DATA:$P_FRONTEND"
	--tls-ca-path "$TLS/ca.pem" --tls-server-name "$SERVER_NAME")
TCLI=("${TBASE[@]}" --tls-cert-path "$TLS/operator.pem" --tls-key-path "$TLS/operator.key")
wait_until "the Temporal frontend (mTLS)" 120 "${TCLI[@]}" operator cluster health
if "${TBASE[@]}" --tls-cert-path "$TLS/stranger.pem" --tls-key-path "$TLS/stranger.key" \
	--command-timeout 5s operator cluster health >/dev/null 2>&1; then
	die "the frontend accepted a client certificate of another CA"
fi
if "${TBASE[@]}" --tls --command-timeout 5s operator cluster health >/dev/null 2>&1; then
	die "the frontend accepted a client without a certificate"
fi
log "Temporal frontend on $H_DATA:$P_FRONTEND: mutual TLS (no certificate, or another CA's: refused)"

if ! "${TCLI[@]}" operator namespace describe -n "$NAMESPACE" >/dev/null 2>&1; then
	"${TCLI[@]}" operator namespace create -n "$NAMESPACE" --retention 72h >>"$DIR/logs/temporal-cli.log" 2>&1
fi
wait_until "namespace $NAMESPACE" 60 "${TCLI[@]}" operator namespace describe -n "$NAMESPACE"
# A new namespace reaches the server's namespace cache within seconds:
# retried until then.
register_search_attributes() {
	local have sa
	have="$("${TCLI[@]}" operator search-attribute list -n "$NAMESPACE")" || return 1
	for sa in $SEARCH_ATTRIBUTES; do
		grep -qw "$sa" <<<"$have" ||
			"${TCLI[@]}" operator search-attribute create -n "$NAMESPACE" --name "$sa" --type Keyword >>"$DIR/logs/temporal-cli.log" 2>&1 ||
			return 1
	done
}
wait_until "search attributes" 60 register_search_attributes
log "namespace $NAMESPACE and search attributes $SEARCH_ATTRIBUTES registered"

# --- Litecoin Core (regtest, push) --------------------------------------------

LTC_URL="http://kernodeck:prodlike@$H_CHAIN:$P_LTC_RPC"
# Its RPC: the chain machine's watchers, and the operator's (the payer of
# the tests) when on machines of their own.
LTC_ALLOW=(-rpcallowip=127.0.0.1)
[ "$NETNS" = 0 ] || LTC_ALLOW=(-rpcallowip="$H_CHAIN" -rpcallowip="$H_OPS")
# Its Tor listener binds 127.0.0.1 (the default port + 1) whatever
# -listenonion says: on the chain machine's address with the others.
LTC_ONION=()
[ "$NETNS" = 0 ] || LTC_ONION=(-bind="$H_CHAIN:$((P_LTC_P2P + 1))=onion")
mkdir -p "$DIR/litecoin"
spawn litecoind "${ON_CHAIN[@]}" "$LITECOIND" -regtest -datadir="$DIR/litecoin" -server -listen=1 -bind="$H_CHAIN:$P_LTC_P2P" \
	"${LTC_ONION[@]}" -port="$P_LTC_P2P" -discover=0 -dnsseed=0 -whitelist=noban@"$H_CHAIN" -mempoolreplacement=1 \
	-rpcbind="$H_CHAIN" "${LTC_ALLOW[@]}" -rpcport="$P_LTC_RPC" -rpcuser=kernodeck -rpcpassword=prodlike \
	-txindex=1 -fallbackfee=0.0001 -rpcworkqueue=64 -printtoconsole=0
# rpc URL METHOD [JSON params]: one JSON-RPC call to a node.
rpc() {
	curl -sf --data-binary "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"$2\",\"params\":${3:-[]}}" \
		-H 'content-type: text/plain' "$1"
}
ltc() { rpc "$LTC_URL/${WALLET_PATH:-}" "$@"; }
wait_until "Litecoin Core RPC" 60 ltc getblockchaininfo
ltc createwallet '["dev"]' >/dev/null || ltc loadwallet '["dev"]' >/dev/null || true
WALLET_PATH=wallet/dev
height="$(ltc getblockcount | jq -r .result)"
if [ "$height" -lt 101 ]; then
	addr="$(ltc getnewaddress | jq -r .result)"
	ltc generatetoaddress "[$((101 - height)), \"$addr\"]" >/dev/null
fi
log "Litecoin Core regtest: RPC $H_CHAIN:$P_LTC_RPC (wallet dev), peer-to-peer $H_CHAIN:$P_LTC_P2P"

# --- btcd (regtest, push) -------------------------------------------------------

# btcd has no wallet: it mines to the development payer (devnodes.
# BitcoinPayerAddress; deploy/deploy_test.go checks the two agree), whose
# coins devnodes.SendBitcoin spends.
# Not on the three machines: btcd refuses an RPC listener off loopback
# without TLS, which Kernodeck's Bitcoin client does not speak (a
# production node is Bitcoin Core, docs/three-machines.md).
BTC_PAYER=bcrt1qwj5fhfedjl2jukc6zzc86utfwutdxtt34jh9nm
BTC_URL="http://kernodeck:prodlike@$H_CHAIN:$P_BTC_RPC"
btc() { rpc "$BTC_URL" "$@"; }
if [ "$NETNS" = 0 ]; then
	mkdir -p "$DIR/btcd"
	spawn btcd "${ON_CHAIN[@]}" "$(command -v btcd)" --regtest --configfile= --datadir="$DIR/btcd/data" --logdir="$DIR/btcd/logs" \
		--listen="$H_CHAIN:$P_BTC_P2P" --trickleinterval=50ms --rpclisten="$H_CHAIN:$P_BTC_RPC" --notls \
		--rpcuser=kernodeck --rpcpass=prodlike --rpcmaxclients=64 --miningaddr="$BTC_PAYER" --txindex
	wait_until "btcd RPC" 60 btc getblockcount
	# btcd's regtest activates segwit through BIP9 (three 144-block windows)
	# before it accepts a witness spend: 440 blocks, as devnodes.StartBitcoin.
	height="$(btc getblockcount | jq -r .result)"
	[ "$height" -ge 440 ] || btc generate "[$((440 - height))]" >/dev/null || die "btcd: generate failed"
	log "btcd regtest: RPC $H_CHAIN:$P_BTC_RPC (mined to $BTC_PAYER), peer-to-peer $H_CHAIN:$P_BTC_P2P"
fi

# --- Kernodeck -----------------------------------------------------------------

go build -o "$DIR/bin/kernodeck" ./cmd/kernodeck
# kd_url ROLE: Kernodeck's database as ROLE (the superuser on one machine).
kd_url() {
	local pw="PW_$1" user=kernodeck_$1
	[ "$1" != kernodeck ] || user=kernodeck
	if [ "$NETNS" = 1 ]; then
		echo "postgres://$user:${!pw}@$PGHOST:$PGPORT/$KD_DB?sslmode=disable"
	else
		echo "postgres://$PGUSER@$PGHOST:$PGPORT/$KD_DB?sslmode=disable"
	fi
}
KD="$DIR/bin/kernodeck"
if [ ! -f "$DIR/secrets.env" ]; then
	umask 077
	{
		echo "KERNODECK_SECRET_KEYS=$("$KD" keygen prodlike1)"
		echo "KERNODECK_SUPPORT_TOKENS=prodlike-agent:prodlike-$(openssl rand -hex 16)"
	} >"$DIR/secrets.env"
	umask 022
fi
# What every Kernodeck process shares (systemd: /etc/kernodeck/kernodeck.env,
# see deploy/systemd/kernodeck.env.example); each adds its own addresses.
cat >"$DIR/kernodeck.env" <<EOF
KERNODECK_DATABASE_URL=$(kd_url kernodeck)
TEMPORAL_ADDRESS=$H_DATA:$P_FRONTEND
TEMPORAL_NAMESPACE=$NAMESPACE
TEMPORAL_TLS=true
TEMPORAL_TLS_SERVER_CA_CERT_PATH=$TLS/ca.pem
TEMPORAL_TLS_SERVER_NAME=$SERVER_NAME
TEMPORAL_CONFIG_FILE=$DIR/no-temporal-profile.toml
KERNODECK_PROVISIONER=localpg
KERNODECK_RATES=static
KERNODECK_STATIC_RATES=${KERNODECK_STATIC_RATES:-BTC=65000,ETH=3000,USDT=1,USDC=1,TRX=0.25,SOL=150,LTC=90}
KERNODECK_LITECOIN_NODE_URL=$LTC_URL
KERNODECK_LITECOIN_P2P=$H_CHAIN:$P_LTC_P2P
KERNODECK_XPUB_LITECOIN=tpubDC8msFGeGuwnKG9Upg7DM2b4DaRqg3CUZa5g8v2SRQ6K4NSkxUgd7HsL2XVWbVm39yBA4LAxysQAm397zwQSQoQgewGiYZqrA9DsP4zbQ1M
KERNODECK_LITECOIN_KEY_NETWORK=litecoin-regtest
$([ "$NETNS" = 1 ] || cat <<EOB
KERNODECK_BITCOIN_NODE_URL=$BTC_URL
KERNODECK_BITCOIN_P2P=$H_CHAIN:$P_BTC_P2P
KERNODECK_XPUB_BITCOIN=tpubDC8msFGeGuwnKG9Upg7DM2b4DaRqg3CUZa5g8v2SRQ6K4NSkxUgd7HsL2XVWbVm39yBA4LAxysQAm397zwQSQoQgewGiYZqrA9DsP4zbQ1M
KERNODECK_BITCOIN_KEY_NETWORK=bitcoin-regtest
EOB
)
KERNODECK_COOKIE_SECURE=false
KERNODECK_TRUSTED_PROXIES=127.0.0.1
KERNODECK_PUBLIC_URL=http://$H_APP:$P_API1
KERNODECK_LOG_LEVEL=${KERNODECK_LOG_LEVEL:-warn}
EOF
cat "$DIR/secrets.env" >>"$DIR/kernodeck.env"
# The caller's KERNODECK_* settings win (exported last).
CALLER_KD="$(env | grep '^KERNODECK_' || true)"
set -a
# shellcheck disable=SC1091
. "$DIR/kernodeck.env"
set +a
while IFS= read -r kv; do [ -n "$kv" ] && export "${kv?}"; done <<<"$CALLER_KD"

# Each process kind gets its own secrets only, as the units' credentials
# (docs/secrets.md): kernodeck refuses to start holding another kind's.
not_mine() { # ROLE: env's -u arguments for the secrets ROLE must not hold
	case $1 in
	migrate) echo -u KERNODECK_SECRET_KEYS -u KERNODECK_SUPPORT_TOKENS -u KERNODECK_LITECOIN_NODE_URL -u KERNODECK_BITCOIN_NODE_URL ;;
	api | worker) echo -u KERNODECK_LITECOIN_NODE_URL -u KERNODECK_BITCOIN_NODE_URL ;;
	mail) echo -u KERNODECK_SUPPORT_TOKENS -u KERNODECK_LITECOIN_NODE_URL -u KERNODECK_BITCOIN_NODE_URL ;;
	chainwatch) echo -u KERNODECK_SUPPORT_TOKENS ;;
	esac
}
# shellcheck disable=SC2046
# As the schema's owner, on the application machine (kernodeck-migrate.service).
"${ON_APP[@]}" env $(not_mine migrate) -u PGPASSFILE KERNODECK_DATABASE_URL="$(kd_url kernodeck)" "$KD" migrate >>"$DIR/logs/migrate.log" 2>&1 ||
	die "kernodeck migrate: see $DIR/logs/migrate.log"
log "kernodeck migrate: $KD_DB up to date"

kd() { # NAME METRICS_PORT|off [VAR=VALUE...] -- SUBCOMMAND
	local name=$1 maddr=$2 on=("${ON_APP[@]}") host=$H_APP
	shift 2
	local vars=()
	while [ "$1" != -- ]; do
		vars+=("$1")
		shift
	done
	shift
	# Its role's Temporal client certificate ($1: api, worker, chainwatch).
	# Its kind's database role (docs/database.md).
	[ "$NETNS" = 0 ] || vars+=("KERNODECK_DATABASE_URL=$(kd_url "$1")")
	[ "$1" = mail ] || vars+=("TEMPORAL_TLS_CLIENT_CERT_PATH=$TLS/$1.pem" "TEMPORAL_TLS_CLIENT_KEY_PATH=$TLS/$1.key")
	[ "$1" != chainwatch ] || { on=("${ON_CHAIN[@]}"); host=$H_CHAIN; }
	[ "$maddr" = off ] || maddr="$host:$maddr"
	# shellcheck disable=SC2046
	spawn "$name" "${on[@]}" env $(not_mine "$1") -u PGPASSFILE KERNODECK_METRICS_ADDR="$maddr" "${vars[@]}" "$KD" "$@"
}
# Watchers first (deploy chainwatch before the workers on an upgrade), then
# the workers, then the API replicas.
# Three machines: one of each, and the mail dispatcher (its SMTP provider,
# mailpit, on the operator's machine, as outside).
REPLICAS=2
[ "$NETNS" = 0 ] || REPLICAS=1
kd chainwatch-1 $((BASE + 95)) -- chainwatch
[ "$REPLICAS" = 1 ] || kd chainwatch-2 $((BASE + 96)) -- chainwatch
kd worker-1 $((BASE + 93)) -- worker
[ "$WORKERS" = 1 ] || kd worker-2 $((BASE + 94)) -- worker
kd api-1 $((BASE + 91)) KERNODECK_HTTP_ADDR="$H_APP:$P_API1" -- api
[ "$REPLICAS" = 1 ] || kd api-2 $((BASE + 92)) KERNODECK_HTTP_ADDR="$H_APP:$P_API2" -- api
if [ "$NETNS" = 1 ]; then
	spawn mailpit "$(command -v mailpit)" --smtp "$H_OPS:$((BASE + 25))" --listen "$H_OPS:$((BASE + 26))" --database "$DIR/mailpit.db"
	kd mail off KERNODECK_SMTP_HOST="$H_OPS" KERNODECK_SMTP_PORT=$((BASE + 25)) KERNODECK_SMTP_TLS=none -- mail
fi
# The operations listeners of the processes started (name=address).
METRICS="api-1=$H_APP:$((BASE + 91))"
[ "$REPLICAS" = 1 ] || METRICS="$METRICS api-2=$H_APP:$((BASE + 92))"
METRICS="$METRICS worker-1=$H_APP:$((BASE + 93))"
[ "$WORKERS" = 1 ] || METRICS="$METRICS worker-2=$H_APP:$((BASE + 94))"
METRICS="$METRICS chainwatch-1=$H_CHAIN:$((BASE + 95))"
[ "$REPLICAS" = 1 ] || METRICS="$METRICS chainwatch-2=$H_CHAIN:$((BASE + 96))"
for addr in $(sed 's/[^ ]*=//g' <<<"$METRICS"); do
	wait_until "readiness on $addr" 120 curl -sf "http://$addr/readyz"
done
wait_until "api-1" 60 curl -sf "http://$H_APP:$P_API1/healthz"
[ "$REPLICAS" = 1 ] || wait_until "api-2" 60 curl -sf "http://$H_APP:$P_API2/healthz"
# One watcher holds each network's lease; the other waits for it to lapse.
test_lease() { [ -n "$(lease_holder "$1" 2>/dev/null)" ]; }
lease_holder() { psql -qAt -d "$KD_DB" -c "SELECT holder FROM watcher_leases WHERE network = '$1' AND expires_at > now()"; }
wait_until "the Litecoin watcher's lease" 60 test_lease litecoin
[ "$NETNS" = 1 ] || wait_until "the Bitcoin watcher's lease" 60 test_lease bitcoin
# Push: the active watchers are peers of the nodes.
peered() { [ "$("$1" getconnectioncount | jq -r .result)" -gt 0 ]; }
wait_until "a watcher peered with Litecoin Core" 60 peered ltc
[ "$NETNS" = 1 ] || wait_until "a watcher peered with btcd" 60 peered btc


# Environment for clients and commands run against this deployment.
cat >"$DIR/env.sh" <<EOF
# source $DIR/env.sh
set -a
. "$DIR/kernodeck.env"
# Commands run against the deployment (kdload, kernodeck versions, the
# temporal CLI) are the operator's.
TEMPORAL_TLS_CLIENT_CERT_PATH=$TLS/operator.pem
TEMPORAL_TLS_CLIENT_KEY_PATH=$TLS/operator.key
KD_PRODLIKE_DIR=$DIR
KD_PRODLIKE_API1=http://$H_APP:$P_API1
$([ "$REPLICAS" = 1 ] || echo "KD_PRODLIKE_API2=http://$H_APP:$P_API2")
KD_PRODLIKE_LTC_URL=$LTC_URL/wallet/dev
$([ "$NETNS" = 1 ] || echo "KD_PRODLIKE_BTC_URL=$BTC_URL")
KD_PRODLIKE_METRICS="$METRICS"
KD_PRODLIKE_TEMPORAL_DBS="$T_DB $TV_DB"
KD_PRODLIKE_TEMPORAL_METRICS=http://$H_DATA:$P_TMETRICS/metrics
KD_PRODLIKE_TEMPORAL_PPROF=$H_DATA:$P_TPPROF
KD_PRODLIKE_NETNS=$NETNS
KD_PRODLIKE_NETNS_PREFIX=$NS_PREFIX
KD_PRODLIKE_MACHINES="data=$H_DATA app=$H_APP chain=$H_CHAIN"
set +a
EOF
export KD_PRODLIKE_ENV="$DIR/env.sh"
# shellcheck disable=SC1091
. "$DIR/env.sh"
while IFS= read -r kv; do [ -n "$kv" ] && export "${kv?}"; done <<<"$CALLER_KD"

cat >&2 <<EOF

Kernodeck, production-shaped, ready ($(date -u +%T) UTC):
  API               http://$H_APP:$P_API1$([ "$REPLICAS" = 1 ] || echo "  http://$H_APP:$P_API2")  (web site)
  support token     $(sed -n 's/^KERNODECK_SUPPORT_TOKENS=[^:]*:\(.*\)/\1/p' "$DIR/secrets.env") (agent prodlike-agent)
  Temporal          $H_DATA:$P_FRONTEND, mutual TLS, namespace $NAMESPACE, PostgreSQL $T_DB + $TV_DB
                    CLI: temporal --address $H_DATA:$P_FRONTEND --namespace $NAMESPACE --tls-cert-path $TLS/operator.pem \\
                         --tls-key-path $TLS/operator.key --tls-ca-path $TLS/ca.pem --tls-server-name $SERVER_NAME workflow list
  metrics/readyz    $METRICS  temporal $H_DATA:$P_TMETRICS
  Litecoin regtest  $LTC_URL (wallet dev), peer-to-peer $H_CHAIN:$P_LTC_P2P
$([ "$NETNS" = 1 ] || echo "  Bitcoin regtest   $BTC_URL (btcd, no wallet: devnodes.SendBitcoin pays), peer-to-peer $H_CHAIN:$P_BTC_P2P")
  leases            litecoin held by $(lease_holder litecoin)$([ "$NETNS" = 1 ] || echo ", bitcoin by $(lease_holder bitcoin)")
  push              peers of Litecoin Core: $(ltc getconnectioncount | jq -r .result)$([ "$NETNS" = 1 ] || echo ", of btcd: $(btc getconnectioncount | jq -r .result)")
  environment       source $DIR/env.sh     logs: $DIR/logs/
EOF

if [ ${#CMD[@]} -gt 0 ]; then
	# The command runs beside the supervision (it may kill processes), in a
	# process group of its own that Ctrl-C's stop ends whole.
	setsid "${CMD[@]}" &
	CMDPID=$!
	while kill -0 "$CMDPID" 2>/dev/null; do
		supervise
		sleep 1 &
		wait $! || true
	done
	status=0
	wait "$CMDPID" || status=$?
	CMDPID=
	log "command exited with status $status"
	exit "$status"
fi
log "Ctrl-C stops everything"
while :; do
	supervise
	sleep 1 &
	wait $! || true
done
