# teardown.sh: close a customer's access and wipe what they left. Run as
# root by the SSH driver. Idempotent: a second run (retry after a crash)
# finds less to do and checks the same end state.
# Inputs: KD_USER KD_SCRATCH KD_MODE (revoke: account and processes;
#         release: also scratch space, then check the host is clean)
set -eu
step() { echo "KD_STEP $1"; }
fail() { echo "KD_FAIL $1" >&2; exit 1; }

mkdir -p /run/kernodeck
exec 9>"/run/kernodeck/$KD_USER.lock"
flock -w 120 9
step locked

uid=""
home="/home/$KD_USER"
if getent passwd "$KD_USER" >/dev/null; then
	uid=$(id -u "$KD_USER")
	home=$(getent passwd "$KD_USER" | cut -d: -f6)
	# First nobody can log in again, then the running processes go.
	rm -f "$home/.ssh/authorized_keys"
	usermod -L -e 1 "$KD_USER" >/dev/null 2>&1 || true
	step locked-out
	i=0
	while pgrep -U "$uid" >/dev/null; do
		pkill -KILL -U "$uid" || true
		i=$((i + 1))
		[ "$i" -lt 100 ] || fail "processes of $KD_USER survive SIGKILL"
		sleep 0.1
	done
	step processes
	crontab -r -u "$KD_USER" >/dev/null 2>&1 || true
	userdel --remove "$KD_USER" >/dev/null 2>&1 || userdel "$KD_USER" || true
fi
case "$home" in /home/?*) rm -rf -- "$home" ;; esac
rm -f "/var/mail/$KD_USER" "/var/spool/mail/$KD_USER"
step account-removed

if [ "$KD_MODE" = release ]; then
	rm -rf -- "$KD_SCRATCH/$KD_USER"
	# Files the customer left in shared temporary directories no longer
	# have an owner once the account is gone.
	find /tmp /var/tmp /dev/shm -xdev -mindepth 1 -maxdepth 1 -nouser -exec rm -rf -- {} + 2>/dev/null || true
	step scratch-wiped
	[ ! -e "$KD_SCRATCH/$KD_USER" ] || fail "scratch space still present"
fi
getent passwd "$KD_USER" >/dev/null && fail "account still present"
[ ! -e "$home" ] || fail "home directory still present"
if [ -n "$uid" ] && pgrep -U "$uid" >/dev/null; then fail "processes still running"; fi
echo KD_TEARDOWN_OK
