#!/usr/bin/env bash
# Restore drill (issue 38, item 5; docs/recovery.md): back up, lose
# everything, restore to a point in time, recover, check.
#
#   scripts/restore-drill.sh
#
# On a scratch PostgreSQL cluster of its own (initdb, WAL archiving on, run
# as the postgres OS user when started as root), it:
#   1. migrates a kernodeck database and stores orders in every phase
#      (awaiting payment with its request, provisioning, active, ended) and
#      a top-up awaiting payment, with the watch-only key recorded;
#   2. backs up: a base backup of the whole cluster (pg_basebackup: every
#      database of the cluster at one consistent point, Temporal's too when
#      they share it, as deploy/ lays them out) plus the archived WAL, and
#      the keyring and xpubs (the environment file holding
#      KERNODECK_SECRET_KEYS and KERNODECK_XPUB_*), checksummed;
#   3. writes on: a payment request handed out before the restore point
#      (pg_create_restore_point), then one after it, which a restore to that
#      point cannot know;
#   4. loses everything: the cluster is stopped and its data directory
#      removed; Temporal's state too (a new, empty dev server);
#   5. restores the base backup and replays the WAL to the restore point,
#      restores the keys from the backup, runs `kernodeck recover
#      --index-gap 100`, and checks: the request before the point is there
#      and the one after it is not; every live order and the top-up has its
#      workflow again and the ended order none; the address index moved past
#      every address handed out, gap included; a second recover starts
#      nothing; the restored xpub is the recorded one.
# It prints each step's duration and the total; exit 0 only if every check
# holds. KERNODECK_BIN: a built kernodeck (default: built from this tree);
# KERNODECK_TEMPORAL_CLI or `temporal` on PATH: the Temporal CLI.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
pgbin="${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
src_port="${DRILL_SRC_PORT:-55431}"
dst_port="${DRILL_DST_PORT:-55432}"
tport="${DRILL_TEMPORAL_PORT:-57233}"
work="$(mktemp -d /tmp/kd-restore-drill.XXXXXX)"
chmod 755 "$work"
t0=$(date +%s.%N)
step_start=$t0

log() { printf '[drill %6.1fs] %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$*"; }
first_step=1
step() {
	local now
	now=$(date +%s.%N)
	[ -n "$first_step" ] || printf '[drill] step done in %.1fs\n' "$(echo "$now - $step_start" | bc)"
	first_step=""
	step_start=$now
	log "$*"
}
fail() { log "FAILED: $*"; exit 1; }

as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

temporal_pid=""
cleanup() {
	[ -n "$temporal_pid" ] && kill "$temporal_pid" 2>/dev/null && wait "$temporal_pid" 2>/dev/null
	for d in "$work/src" "$work/dst"; do
		[ -f "$d/postmaster.pid" ] && as_pg "$pgbin/pg_ctl" -D "$d" -m immediate stop >/dev/null 2>&1
	done
	if [ -z "${DRILL_KEEP:-}" ]; then rm -rf "$work"; else log "kept $work"; fi
}
trap cleanup EXIT

psql_src() { psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$src_port" -U postgres "$@"; }
psql_dst() { psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$dst_port" -U postgres "$@"; }

kd="${KERNODECK_BIN:-}"
if [ -z "$kd" ]; then
	log "building kernodeck"
	kd="$work/kernodeck"
	(cd "$here" && go build -o "$kd" ./cmd/kernodeck)
fi
tcli="${KERNODECK_TEMPORAL_CLI:-$(command -v temporal || echo "${GOBIN:-$HOME/go/bin}/temporal")}"
[ -x "$tcli" ] || fail "no Temporal CLI (scripts/ensure-tools.sh installs it)"

step "1. a scratch cluster with WAL archiving, a migrated database, orders in every phase"
mkdir -p "$work/wal" "$work/backup" "$work/sock" "$work/src"
chmod 700 "$work/src"
[ "$(id -u)" = 0 ] && chown postgres "$work/wal" "$work/backup" "$work/sock" "$work/src"
as_pg "$pgbin/initdb" -D "$work/src" --auth=trust -U postgres >/dev/null
cat >>"$work/src/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $src_port
unix_socket_directories = '$work/sock'
wal_level = replica
archive_mode = on
archive_command = 'test ! -f $work/wal/%f && cp %p $work/wal/%f'
archive_timeout = 60
EOF
as_pg "$pgbin/pg_ctl" -D "$work/src" -l "$work/sock/src.log" -w start >/dev/null
for db in kernodeck temporal temporal_visibility; do psql_src -c "CREATE DATABASE $db"; done

# The keyring and the watch-only key, as an operator's environment file.
cat >"$work/kernodeck.env" <<EOF
KERNODECK_SECRET_KEYS=$("$kd" keygen | tail -1)
KERNODECK_XPUB_BITCOIN=tpubDC8msFGeGuwnKG9Upg7DM2b4DaRqg3CUZa5g8v2SRQ6K4NSkxUgd7HsL2XVWbVm39yBA4LAxysQAm397zwQSQoQgewGiYZqrA9DsP4zbQ1M
KERNODECK_BITCOIN_KEY_NETWORK=bitcoin-regtest
EOF
chmod 600 "$work/kernodeck.env"
export KERNODECK_DATABASE_URL="postgres://postgres@127.0.0.1:$src_port/kernodeck?sslmode=disable"
"$kd" migrate >/dev/null
set -a; . "$work/kernodeck.env"; set +a
"$kd" xpub confirm bitcoin --by drill >/dev/null

psql_src -d kernodeck <<'SQL'
INSERT INTO accounts (id, first_name, last_name, email, password_hash) VALUES (1, 'Dri', 'Ll', 'drill@example.com', 'x');
INSERT INTO orders (ref, account_id, gpu_model, lots, gpus_per_lot, total_gpus, duration_days, preset, lot_cents, total_cents,
	status, payment_method, paid_cents, paid_at, period_start, period_end, ended_at, workflow_id, workflow_started_at, created_at) VALUES
 ('KD-AWAIT', 1, 'rtx-a5000', 1, 1, 1, 3, 'python', 2357, 2357, 'awaiting_payment', NULL, 0, NULL, NULL, NULL, NULL,
	'rental-KD-AWAIT', now(), now()),
 ('KD-PROV', 1, 'rtx-a5000', 1, 1, 1, 3, 'python', 2357, 2357, 'provisioning', 'crypto', 2357, now(), NULL, NULL, NULL,
	'rental-KD-PROV', now(), now()),
 ('KD-ACTIVE', 1, 'rtx-a5000', 1, 1, 1, 7, 'python', 5500, 5500, 'active', 'crypto', 5500, now() - interval '1 day',
	now() - interval '1 day', now() + interval '6 days', NULL, 'rental-KD-ACTIVE', now() - interval '1 day', now() - interval '1 day'),
 ('KD-ENDED', 1, 'rtx-a5000', 1, 1, 1, 3, 'python', 2357, 2357, 'ended', 'crypto', 2357, now() - interval '4 days',
	now() - interval '4 days', now() - interval '1 day', now() - interval '1 day', 'rental-KD-ENDED', now() - interval '4 days', now() - interval '4 days');
INSERT INTO topups (ref, account_id, amount_cents, status, workflow_id, workflow_started_at)
	VALUES ('KT-AWAIT', 1, 10000, 'awaiting_payment', 'topup-KT-AWAIT', now());
INSERT INTO timeline_events (ref, idem_key, kind, message) VALUES
 ('KD-PROV', 'prov:1:reserve:started', 'provisioning_step', 'réservation'),
 ('KD-ACTIVE', 'access', 'access_available', 'accès'),
 ('KD-ACTIVE', 'reminder:' || extract(epoch from date_trunc('second', now() + interval '6 days'))::bigint || ':48h0m0s', 'reminder_sent', 'rappel');
INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals, amount_base, usd_cents, rate,
	rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until, request_key) VALUES
 ('PI-AWAIT', 'order', 'KD-AWAIT', 1, 'BTC', 'bitcoin', 8, 47140, 2357, 50000, 'drill', now(), 'bcrt1qdrill0', 0,
	'bitcoin:bcrt1qdrill0', now() + interval '1 hour', now() + interval '25 hours', 'intent:1'),
 ('PI-TOPUP', 'topup', 'KT-AWAIT', 1, 'BTC', 'bitcoin', 8, 200000, 10000, 50000, 'drill', now(), 'bcrt1qdrill1', 1,
	'bitcoin:bcrt1qdrill1', now() + interval '1 hour', now() + interval '25 hours', 'intent:1');
UPDATE hd_indexes SET next_index = 2 WHERE network = 'bitcoin';
SQL

step "2. backup: base backup of the whole cluster (+ WAL archive), keyring and xpubs"
as_pg pg_basebackup -h 127.0.0.1 -p "$src_port" -U postgres -D "$work/backup/base" -Ft -z -X stream --checkpoint=fast
cp "$work/kernodeck.env" "$work/backup/kernodeck.env"
(cd "$work/backup" && sha256sum kernodeck.env >SHA256SUMS && find base -type f -exec sha256sum {} + >>SHA256SUMS)
log "backup: $(du -sh "$work/backup" | cut -f1)"

step "3. writes after the backup: a request before the restore point, one after it"
psql_src -d kernodeck <<'SQL'
INSERT INTO orders (ref, account_id, gpu_model, lots, gpus_per_lot, total_gpus, duration_days, preset, lot_cents, total_cents,
	status, workflow_id, workflow_started_at) VALUES
 ('KD-BEFORE', 1, 'rtx-a5000', 1, 1, 1, 3, 'python', 2357, 2357, 'awaiting_payment', 'rental-KD-BEFORE', now());
INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals, amount_base, usd_cents, rate,
	rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until, request_key) VALUES
 ('PI-BEFORE', 'order', 'KD-BEFORE', 1, 'BTC', 'bitcoin', 8, 47141, 2357, 50000, 'drill', now(), 'bcrt1qdrill2', 2,
	'bitcoin:bcrt1qdrill2', now() + interval '1 hour', now() + interval '25 hours', 'intent:1');
UPDATE hd_indexes SET next_index = 3 WHERE network = 'bitcoin';
SELECT pg_create_restore_point('drill') \g /dev/null
INSERT INTO orders (ref, account_id, gpu_model, lots, gpus_per_lot, total_gpus, duration_days, preset, lot_cents, total_cents,
	status, workflow_id, workflow_started_at) VALUES
 ('KD-AFTER', 1, 'rtx-a5000', 1, 1, 1, 3, 'python', 2357, 2357, 'awaiting_payment', 'rental-KD-AFTER', now());
INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals, amount_base, usd_cents, rate,
	rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until, request_key) VALUES
 ('PI-AFTER', 'order', 'KD-AFTER', 1, 'BTC', 'bitcoin', 8, 47142, 2357, 50000, 'drill', now(), 'bcrt1qdrill3', 3,
	'bitcoin:bcrt1qdrill3', now() + interval '1 hour', now() + interval '25 hours', 'intent:1');
UPDATE hd_indexes SET next_index = 4 WHERE network = 'bitcoin';
SQL
# The segment holding the restore point is archived before the loss.
seg=$(psql_src -Atc "SELECT pg_walfile_name(pg_switch_wal())")
for _ in $(seq 1 300); do
	[ -f "$work/wal/$seg" ] && break
	sleep 0.1
done
[ -f "$work/wal/$seg" ] || fail "WAL segment $seg was not archived"

step "4. loss: the cluster stopped and its data removed, Temporal's state gone"
as_pg "$pgbin/pg_ctl" -D "$work/src" -m immediate stop >/dev/null
rm -rf "$work/src"
# The keys come back from the backup only.
unset KERNODECK_SECRET_KEYS KERNODECK_XPUB_BITCOIN KERNODECK_BITCOIN_KEY_NETWORK

step "5. restore: base backup + WAL to the restore point"
(cd "$work/backup" && sha256sum --quiet -c SHA256SUMS) || fail "backup checksums"
mkdir -p "$work/dst" && chmod 700 "$work/dst"
[ "$(id -u)" = 0 ] && chown postgres "$work/dst"
as_pg tar -xzf "$work/backup/base/base.tar.gz" -C "$work/dst"
as_pg mkdir -p "$work/dst/pg_wal"
as_pg tar -xzf "$work/backup/base/pg_wal.tar.gz" -C "$work/dst/pg_wal"
cat >>"$work/dst/postgresql.conf" <<EOF
port = $dst_port
archive_mode = off
restore_command = 'cp $work/wal/%f %p'
recovery_target_name = 'drill'
recovery_target_action = 'promote'
EOF
as_pg touch "$work/dst/recovery.signal"
as_pg "$pgbin/pg_ctl" -D "$work/dst" -l "$work/sock/dst.log" -w -t 120 start >/dev/null
for _ in $(seq 1 600); do
	[ "$(psql_dst -Atc 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ] && break
	sleep 0.1
done
[ "$(psql_dst -Atc 'SELECT pg_is_in_recovery()')" = f ] || fail "the restored cluster did not finish its recovery"
q() { psql_dst -d kernodeck -Atc "$1"; }
[ "$(q "SELECT count(*) FROM payment_intents WHERE id = 'PI-BEFORE'")" = 1 ] || fail "the request before the restore point is missing"
[ "$(q "SELECT count(*) FROM payment_intents WHERE id = 'PI-AFTER'")" = 0 ] || fail "the request after the restore point is there"
[ "$(q "SELECT next_index FROM hd_indexes WHERE network = 'bitcoin'")" = 3 ] || fail "next_index is not the restore point's"

step "6. recover: keys from the backup, a new Temporal, kernodeck recover"
set -a; . "$work/backup/kernodeck.env"; set +a
export KERNODECK_DATABASE_URL="postgres://postgres@127.0.0.1:$dst_port/kernodeck?sslmode=disable"
export TEMPORAL_ADDRESS="127.0.0.1:$tport"
"$tcli" server start-dev --headless --ip 127.0.0.1 --port "$tport" --log-level error >"$work/temporal.log" 2>&1 &
temporal_pid=$!
for _ in $(seq 1 300); do
	"$tcli" operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1 && break
	sleep 0.2
done
"$kd" xpub status | tee "$work/xpub.txt"
grep -q "recorded" "$work/xpub.txt" || fail "the restored xpub is not the recorded one"
"$kd" recover --index-gap 100 | tee "$work/recover1.txt"
grep -q "^recovered 5 workflows; 0 exist already" "$work/recover1.txt" || fail "recover did not start the 5 live workflows"
for ref in KD-AWAIT:payment KD-PROV:provision KD-ACTIVE:period KD-BEFORE:payment KT-AWAIT:payment; do
	grep -q "^started ${ref%%:*} at ${ref#*:}$" "$work/recover1.txt" || fail "${ref%%:*} not started at ${ref#*:}"
done
grep -q "KD-ENDED" "$work/recover1.txt" && fail "the ended order was started"
grep -q "^address index bitcoin: 3 -> 103$" "$work/recover1.txt" || fail "the address index did not move past the gap"
for id in rental-KD-AWAIT rental-KD-PROV rental-KD-ACTIVE topup-KT-AWAIT; do
	"$tcli" workflow describe --address "$TEMPORAL_ADDRESS" -w "$id" >/dev/null || fail "no workflow $id"
done
"$tcli" workflow describe --address "$TEMPORAL_ADDRESS" -w rental-KD-ENDED >/dev/null 2>&1 && fail "the ended order has a workflow"
"$kd" recover | tee "$work/recover2.txt"
grep -q "^recovered 0 workflows; 5 exist already" "$work/recover2.txt" || fail "a second recover started something"

step "done"
printf '[drill] restore drill passed in %.1fs\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
