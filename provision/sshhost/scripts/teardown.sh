# teardown.sh: close a customer's access and wipe what they left. Run as
# root by the SSH driver, after common.sh. Idempotent: a second run (retry
# after a crash) finds less to do and checks the same end state.
# Inputs: KD_USER KD_SCRATCH KD_MODE (revoke: close access and wipe;
#         release: the same, then check the host is clean)
#
# Isolation: root never deletes, changes or follows anything the customer
# could write. It locks the account, removes cron and at jobs through their
# own tools, kills by uid, and lets the customer's uid (as_user) delete the
# customer's files; root only removes the then-empty entries it created in
# root-owned directories. The end check only reads (find -P never follows
# symlinks). What cannot be cleaned is reported as "KD_DIRTY reason" lines:
# the driver then takes the host out of rotation with those reasons.
set -eu
kd_lock
step locked

kd_account
home="/home/$KD_USER"
if [ -n "$uid" ]; then
	kd_record_uid
elif [ -r "/run/kernodeck/$KD_USER.uid" ]; then
	read -r uid gid <"/run/kernodeck/$KD_USER.uid"
	# The uid may have gone to a new account since: not ours to act on.
	if getent passwd "$uid" >/dev/null; then uid="" gid=""; fi
fi
dirty=""
dirty() {
	# Names come from the customer: printable characters only, one line.
	echo "KD_DIRTY $(printf '%s' "$1" | tr -d '\000-\037\177' | cut -c1-400)"
	dirty=1
}
# live_pids lists the processes whose real or effective uid is uid (zombies
# are already dead: their parent reaps them).
live_pids() {
	ps -e -o pid=,ruid=,euid=,stat= | awk -v u="$uid" '($2 == u || $3 == u) && $4 !~ /^Z/ {printf "%s ", $1}'
}

# 1. Nobody logs in again, and cron, at and systemd start nothing more.
if getent passwd "$KD_USER" >/dev/null; then
	usermod -L -e 1 "$KD_USER" >/dev/null || fail "cannot lock $KD_USER"
	crontab -r -u "$KD_USER" >/dev/null 2>&1 || true
	if command -v atq >/dev/null; then
		atq | awk -v u="$KD_USER" '$NF == u {print $1}' | xargs -r atrm 2>/dev/null || true
	fi
	if [ -d /run/systemd/system ] && command -v loginctl >/dev/null; then
		loginctl disable-linger "$KD_USER" 2>/dev/null || true
		loginctl terminate-user "$KD_USER" 2>/dev/null || true
	fi
fi
if [ -n "$uid" ] && [ -d /var/spool/cron/atjobs ]; then
	# Jobs left by an account already deleted: at's spool is root's.
	find -P /var/spool/cron/atjobs -maxdepth 1 -type f -user "$uid" -delete 2>/dev/null || true
fi
step locked-out

# 2. Every process of the uid, however it forked or detached. kill(-1) from
# the customer's own uid signals all of them in one pass, and the kernel
# aborts a fork racing with it; pkill catches set-uid programs they started.
if [ -n "$uid" ]; then
	i=0
	while [ -n "$(live_pids)" ] && [ "$i" -lt 100 ]; do
		as_user kill -s KILL -- -1 2>/dev/null || true
		pkill -KILL -U "$uid" 2>/dev/null || true
		pkill -KILL -u "$uid" 2>/dev/null || true
		i=$((i + 1))
		sleep 0.1
	done
	left=$(live_pids)
	[ -z "$left" ] || dirty "processus de l'uid $uid encore vivants après SIGKILL : $left"
fi
step processes

# 3. The customer's files, deleted by the customer's uid. Home and scratch
# are theirs entirely; in shared temporary directories only what they own.
wipe_tree() {
	[ -d "$1" ] && [ ! -L "$1" ] || return 0
	as_user chmod -R u+rwX -- "$1" 2>/dev/null || true
	as_user find -P "$1" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} + 2>/dev/null || true
	rmdir -- "$1" 2>/dev/null || true
}
if [ -n "$uid" ]; then
	wipe_tree "$home"
	wipe_tree "$KD_SCRATCH/$KD_USER"
	for d in /tmp /var/tmp /dev/shm; do
		[ -d "$d" ] || continue
		as_user find -P "$d" -xdev -mindepth 1 -user "$uid" -type d -exec chmod u+rwx -- {} \; 2>/dev/null || true
		as_user find -P "$d" -xdev -mindepth 1 -depth -user "$uid" -delete 2>/dev/null || true
	done
fi
# Entries of root-owned directories: rm never follows the last component.
rm -f -- "/var/mail/$KD_USER" "/var/spool/mail/$KD_USER"
step files-wiped

# 4. The account itself, last: until here a retry still finds its uid.
if getent passwd "$KD_USER" >/dev/null; then
	# Refused while a process survives: reported, the access stays locked.
	userdel "$KD_USER" >/dev/null 2>&1 || dirty "userdel $KD_USER refusé"
fi
step account-removed

# 5. Release: the host goes back to customers only if nothing is left.
if [ "$KD_MODE" = release ]; then
	! getent passwd "$KD_USER" >/dev/null || dirty "compte $KD_USER toujours présent"
	for p in "$home" "$KD_SCRATCH/$KD_USER" "/var/spool/cron/crontabs/$KD_USER"; do
		if [ -e "$p" ] || [ -L "$p" ]; then dirty "$p toujours présent"; fi
	done
	if [ -n "$uid" ]; then
		left=$(live_pids)
		[ -z "$left" ] || dirty "processus de l'uid $uid : $left"
		files=""
		for d in /tmp /var/tmp /dev/shm /var/spool/cron /var/mail "$KD_SCRATCH"; do
			[ -d "$d" ] || continue
			files="$files$(find -P "$d" -xdev -user "$uid" -print0 2>/dev/null | head -z -n 5 | tr '\0' ' ')"
		done
		[ -z "$files" ] || dirty "fichiers de l'uid $uid restants : $files"
	fi
	if [ -n "$dirty" ]; then
		echo KD_TEARDOWN_DIRTY
		exit 0
	fi
	rm -f -- "/run/kernodeck/$KD_USER.uid"
fi
echo KD_TEARDOWN_OK
