# teardown.sh: close a customer's access and wipe what they left. Run as
# root by the SSH driver, after common.sh. Idempotent: a second run (retry
# after a crash, or `kernodeck hosts repair`) finds less to do and checks the
# same end state.
# Inputs: KD_USER KD_SCRATCH KD_MODE (revoke: close access and wipe;
#         release: the same, then check the host is clean), KD_TAG
#         (unexported), KD_IDS (the driver's record of the account's ids:
#         "uid:gid first:count ..."), KD_GPU_VENDOR (nvidia|amd)
#
# Whose: the account's uid and every subordinate range it has or had
# (recorded by prepare in root's state, read from /etc/subuid and
# /etc/subgid now, and the driver's record). Processes, SysV IPC objects,
# POSIX message queues, kernel keys and files of any of them are the
# customer's.
#
# Isolation: root never deletes, changes or follows anything the customer
# could write. It locks the account, removes cron and at jobs through their
# own tools, kills by uid, and lets each owning uid (as_user) delete its own
# files; root only removes entries it created in root-owned directories and
# entries of flat kernel filesystems (IPC objects, message queues). The end
# check only reads (find -P never follows symlinks). What cannot be cleaned
# is reported as "KD_DIRTY reason" lines, what the customer did to make the
# host dirty as "KD_CUSTOMER reason" lines: the driver then takes the host
# out of rotation with those reasons.
set -eu
kd_lock
step locked

kd_account
home="/home/$KD_USER"
ids_file="$KD_STATE/$KD_USER.ids"
if [ -n "$uid" ]; then
	# Ranges granted since prepare are recorded too (and told the driver).
	kd_record_ids
elif [ -r "$ids_file" ]; then
	read -r uid gid <"$ids_file"
elif [ -r "/run/kernodeck/$KD_USER.uid" ]; then
	# Recorded by an older prepare.
	read -r uid gid <"/run/kernodeck/$KD_USER.uid"
elif [ -n "${KD_IDS:-}" ]; then
	uid=${KD_IDS%% *}
	gid=${uid#*:}
	uid=${uid%%:*}
fi
# The uid may belong to another account now (never given twice by prepare,
# but an operator may have): not ours to act on.
if [ -n "$uid" ] && ! getent passwd "$KD_USER" >/dev/null && getent passwd "$uid" >/dev/null; then uid="" gid=""; fi
# ranges: "first count" lines, the account's own uid first (count 1).
ranges=""
if [ -n "$uid" ]; then
	ranges="$uid 1"
	[ ! -r "$ids_file" ] || ranges="$ranges
$(tail -n +2 "$ids_file")"
	# KD_IDS: "uid:gid" then the ranges, "first:count" each.
	set -f
	# shellcheck disable=SC2086 # split on spaces, no globbing
	set -- ${KD_IDS:-}
	set +f
	[ $# -eq 0 ] || shift
	for r in "$@"; do
		case "$r" in *:*) ranges="$ranges
${r%%:*} ${r#*:}" ;; esac
	done
	ranges=$(printf '%s\n' "$ranges" | awk 'NF == 2 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && !seen[$0]++')
fi
# awk_mine: an awk function telling whether a uid is one of the account's.
awk_mine="function mine(u,  i) { for (i = 1; i <= nr; i++) if (u + 0 >= lo[i] && u + 0 < lo[i] + n[i]) return 1; return 0 }
BEGIN { nr = split(R, rr, \",\"); for (i = 1; i <= nr; i++) { split(rr[i], p, \":\"); lo[i] = p[1]; n[i] = p[2] } }"
R=$(printf '%s\n' "$ranges" | awk 'NF == 2 {printf "%s%s:%s", sep, $1, $2; sep = ","}')
# owned: find's test for "owned by one of the account's uids".
owned=()
if [ -n "$uid" ]; then
	owned=('(' -uid "$uid")
	while read -r first count; do
		[ "$first" != "$uid" ] || continue
		owned+=(-o '(' -uid "+$((first - 1))" -uid "-$((first + count))" ')')
	done <<<"$ranges"
	owned+=(')')
fi

dirty=""
ndirty=0
clean() { tr -d '\000-\037\177' | cut -c1-400; }
dirty() {
	# Names come from the customer: printable characters only, one line.
	echo "KD_DIRTY $(printf '%s' "$1" | clean)"
	dirty=1
	ndirty=$((ndirty + 1))
}
customer() {
	echo "KD_CUSTOMER $(printf '%s' "$1" | clean)"
}
# live_pids lists the processes whose real, effective, saved or filesystem
# uid is one of the account's (zombies are already dead: their parent
# reaps them).
live_pids() {
	ps -e -o pid=,ruid=,euid=,suid=,fsuid=,stat= |
		awk -v R="$R" "$awk_mine"'
		(mine($2) || mine($3) || mine($4) || mine($5)) && $6 !~ /^Z/ {printf "%s ", $1}'
}
# ipc_objects lists "flag id" for ipcrm of the SysV IPC objects created by
# or owned by one of the account's uids.
ipc_objects() {
	local kind flag
	for kind in shm:m msg:q sem:s; do
		flag=${kind#*:}
		kind=${kind%:*}
		[ -r "/proc/sysvipc/$kind" ] || continue
		awk -v R="$R" -v flag="$flag" "$awk_mine"'
		NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
		mine($col["uid"]) || mine($col["cuid"]) { print "-" flag, $2 }' "/proc/sysvipc/$kind"
	done
}
# The POSIX message queues of this IPC namespace: /dev/mqueue, or a mount
# of root's own when the host has none there.
mq=/dev/mqueue
if ! mountpoint -q "$mq" 2>/dev/null; then
	mq=/run/kernodeck/mqueue
	mkdir -p "$mq"
	mountpoint -q "$mq" || mount -t mqueue kd-mqueue "$mq" 2>/dev/null || mq=""
fi
mq_of() {
	[ -n "$mq" ] && [ ${#owned[@]} -gt 0 ] || return 0
	find -P "$mq" -mindepth 1 -maxdepth 1 "${owned[@]}" -printf '%f\n' 2>/dev/null
}
# Where customers can write: the usual places, the world-writable
# directories prepare found on every local filesystem, and (step 4) those
# made since.
places=()
declare -A listed=()
add_place() {
	[ -z "${listed[$1]:-}" ] || return 0
	places+=("$1")
	listed[$1]=1
}
for d in /tmp /var/tmp /dev/shm /run/lock /var/lock /var/crash; do add_place "$d"; done
if [ -r "$KD_STATE/writable-dirs" ]; then
	while IFS= read -r -d '' d; do add_place "$d"; done <"$KD_STATE/writable-dirs"
fi
as_owner() { # as_owner UID command...: as_user with that uid
	local g=65534
	[ "$1" != "$uid" ] || g=$gid
	AS_UID=$1 AS_GID=$g as_user "${@:2}"
}
# key_uids lists the account's uids that own keys in the kernel.
key_uids() {
	[ -r /proc/key-users ] || return 0
	awk -v R="$R" "$awk_mine"'{ u = $1; sub(/:$/, "", u); if (u ~ /^[0-9]+$/ && mine(u)) print u }' /proc/key-users
}
# charged_key_uids lists those owning keys charged to them (/proc/key-users'
# qnkeys or qnbytes): every key the customer made. What is left once they
# are cleared is the kernel's own keyring of the uid (its persistent
# keyring: not charged, emptied and invalidated), which the kernel may
# collect only later on a loaded host; it holds nothing of the customer.
charged_key_uids() {
	[ -r /proc/key-users ] || return 0
	awk -v R="$R" "$awk_mine"'{ u = $1; sub(/:$/, "", u); split($4, k, "/"); split($5, b, "/")
		if (u ~ /^[0-9]+$/ && mine(u) && (k[1] > 0 || b[1] > 0)) print u }' /proc/key-users
}
# kd_keys_py, run by a uid, clears and invalidates its kernel keys. The
# user and user-session keyrings of a uid, and its persistent keyring, are
# kept by the kernel until reboot whether or not the uid has processes, and
# keep every key linked in them; the key-users line of the uid goes once
# the last of its keys is collected. Keys it can see (/proc/keys) first,
# possessed through the session keyring it was started with; then, in a
# session keyring of its own, those three keyrings (linked in it, so what
# they hold is possessed too) are cleared and invalidated. No keyctl
# binary: keyutils is seldom installed; the keyctl system call is 250 on
# x86_64 and 219 on arm64.
kd_keys_py='
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
def keyctl(*a):
    return libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])
GET_KEYRING_ID, JOIN_SESSION, LINK, CLEAR, INVALIDATE, GET_PERSISTENT = 0, 1, 8, 7, 21, 22
SESSION, USER, USER_SESSION = -3, -4, -5
uid = str(os.getuid())
def visible():
    ids = []
    for line in open("/proc/keys"):
        f = line.split()
        if len(f) > 6 and f[5] == uid:
            ids.append(int(f[0], 16))
    return ids
for k in visible():
    keyctl(INVALIDATE, k)
keyctl(JOIN_SESSION, 0)
rings = [keyctl(GET_KEYRING_ID, USER, 1), keyctl(GET_KEYRING_ID, USER_SESSION, 1), keyctl(GET_PERSISTENT, -1, SESSION)]
rings = [r for r in rings if r > 0]
for r in rings:
    keyctl(LINK, r, SESSION)
keys = visible()
for r in rings:
    keyctl(CLEAR, r)
for k in keys + rings:
    keyctl(INVALIDATE, k)
'

# 1. Nobody logs in again, and cron, at and systemd start nothing more.
if getent passwd "$KD_USER" >/dev/null; then
	usermod -L -e 1 "$KD_USER" >/dev/null || fail "cannot lock $KD_USER"
	crontab -r -u "$KD_USER" >/dev/null 2>&1 || true
	if command -v atq >/dev/null; then
		atq | awk -v u="$KD_USER" '$NF == u {print $1}' | xargs -r atrm 2>/dev/null || true
	fi
	if [ -d /run/systemd/system ] && command -v loginctl >/dev/null; then
		loginctl disable-linger "$KD_USER" >/dev/null 2>&1 || true
		loginctl terminate-user "$KD_USER" >/dev/null 2>&1 || true
	fi
fi
# Lingering user units start again at boot while this file exists.
rm -f -- "/var/lib/systemd/linger/$KD_USER"
if [ -n "$uid" ] && [ -d /var/spool/cron/atjobs ]; then
	# Jobs left by an account already deleted: at's spool is root's.
	find -P /var/spool/cron/atjobs -maxdepth 1 -type f "${owned[@]}" -delete 2>/dev/null || true
fi
step locked-out

# 2. Every process of the uid and its ranges, however it forked or
# detached. kill(-1) from the customer's own uid signals all of them in one
# pass, and the kernel aborts a fork racing with it; pkill and kill by pid
# catch set-uid programs they started and processes of the ranges.
if [ -n "$uid" ]; then
	i=0
	while [ -n "$(live_pids)" ] && [ "$i" -lt 100 ]; do
		as_user kill -s KILL -- -1 || true
		pkill -KILL -U "$uid" 2>/dev/null || true
		pkill -KILL -u "$uid" 2>/dev/null || true
		# shellcheck disable=SC2046 # one pid per word
		kill -s KILL $(live_pids) 2>/dev/null || true
		i=$((i + 1))
		sleep 0.1
	done
	left=$(live_pids)
	if [ -n "$left" ]; then
		dirty "processus de l'uid $uid ou de ses plages encore vivants après SIGKILL : $left"
		# Uninterruptible (D): only a reboot ends them.
		# shellcheck disable=SC2086
		if ps -o stat= -p "$(echo $left | tr ' ' ,)" 2>/dev/null | grep -q '^D'; then
			echo "KD_REBOOT processus bloqués dans le noyau (état D) : redémarrage nécessaire"
		fi
	fi
fi
step processes

# 3. IPC objects: SysV shared memory, semaphores and message queues, POSIX
# message queues (entries of a flat kernel filesystem: no link to follow).
if [ -n "$uid" ]; then
	ipc_objects | while read -r flag id; do
		ipcrm "$flag" "$id" 2>/dev/null || true
	done
	for kind in shm msg sem; do
		[ -r "/proc/sysvipc/$kind" ] || continue
		# Given to another uid by its creator (IPC_SET): the customer's doing.
		awk -v R="$R" "$awk_mine"'
		NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
		mine($col["cuid"]) && !mine($col["uid"]) { print $col["uid"] }' "/proc/sysvipc/$kind" | sort -u | while read -r o; do
			customer "objet IPC ($kind) créé par le client et donné à l'uid $o"
		done
	done
	mq_of | while IFS= read -r q; do rm -f -- "$mq/$q"; done
	# Kernel keys, by each uid that has some (the helper's own session
	# keyring goes with it): the kernel collects them within moments.
	if command -v python3 >/dev/null; then
		for u in $(key_uids); do as_owner "$u" python3 -I -c "$kd_keys_py" || true; done
	fi
	i=0
	while [ -n "$(charged_key_uids)" ] && [ "$i" -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
fi
step ipc

# 4. The customer's files, each deleted by the uid that owns it. Home and
# scratch are theirs entirely; in the places where anyone can write, only
# what they own. Their own directories are first opened to every one of
# their uids (a directory of one range uid may hold files of another).
owners_in() { # owners_in DIR MINDEPTH: the account's uids owning something there
	find -P "$1" -xdev -mindepth "$2" "${owned[@]}" -printf '%U\n' 2>/dev/null | sort -un
}
wipe_owned() { # wipe_owned DIR MINDEPTH
	[ -d "$1" ] && [ ! -L "$1" ] || return 0
	local u pass
	for pass in 1 2 3; do
		[ -n "$(owners_in "$1" "$2")" ] || return 0
		for u in $(owners_in "$1" "$2"); do
			as_owner "$u" find -P "$1" -xdev -mindepth "$2" -user "$u" -type d -exec chmod 0777 -- {} + || true
		done
		for u in $(owners_in "$1" "$2"); do
			as_owner "$u" find -P "$1" -xdev -mindepth 1 -depth -user "$u" -delete || true
		done
	done
}
if [ -n "$uid" ]; then
	for d in "$home" "$KD_SCRATCH/$KD_USER"; do
		[ -e "$d" ] || continue
		# Anything in them not owned by the account's own uid was given away
		# by the customer (chown within a subordinate range).
		o=$(find -P "$d" -xdev ! -uid "$uid" -printf '%u ' 2>/dev/null | tr ' ' '\n' | sort -u | head -n 5 | tr '\n' ' ')
		[ -z "$o" ] || customer "$d : le client en a donné des fichiers à d'autres uids ($o)"
		wipe_owned "$d" 0
		# Root-owned /home and SCRATCH: rmdir removes the entry, never
		# follows it.
		rmdir -- "$d" 2>/dev/null || true
	done
	# World-writable directories made since prepare (by a daemon, on a
	# filesystem mounted since): what the customer left there is found too,
	# and the end check searches them.
	while IFS= read -r -d '' d; do add_place "$d"; done < <(kd_writable_dirs)
	step writable-dirs
	for d in "${places[@]}"; do wipe_owned "$d" 1; done
	# The login session's runtime directory (logind mounts one per user).
	if [ -e "/run/user/$uid" ]; then
		if mountpoint -q "/run/user/$uid"; then umount -l "/run/user/$uid" 2>/dev/null || true; fi
		wipe_owned "/run/user/$uid" 0
		rmdir -- "/run/user/$uid" 2>/dev/null || true
	fi
fi
# Entries of root-owned directories: rm never follows the last component.
rm -f -- "/var/mail/$KD_USER" "/var/spool/mail/$KD_USER"
step files-wiped

# 5. The account itself, last: until here a retry still finds its uid.
if getent passwd "$KD_USER" >/dev/null; then
	# Refused while a process survives: reported, the access stays locked.
	userdel "$KD_USER" >/dev/null 2>&1 || dirty "userdel $KD_USER refusé"
fi
if getent group "$KD_USER" >/dev/null && ! getent passwd "$KD_USER" >/dev/null; then
	groupdel "$KD_USER" >/dev/null 2>&1 || true
fi
step account-removed

# 6. Release: the host goes back to customers only if nothing is left.
if [ "$KD_MODE" = release ]; then
	! getent passwd "$KD_USER" >/dev/null || dirty "compte $KD_USER toujours présent"
	for p in "$home" "$KD_SCRATCH/$KD_USER" "/var/spool/cron/crontabs/$KD_USER" "/var/lib/systemd/linger/$KD_USER"; do
		if [ -e "$p" ] || [ -L "$p" ]; then dirty "$p toujours présent"; fi
	done
	if [ -n "$uid" ]; then
		[ ! -e "/run/user/$uid" ] || dirty "/run/user/$uid toujours présent"
		left=$(live_pids)
		[ -z "$left" ] || dirty "processus de l'uid $uid ou de ses plages : $left"
		objs=$(ipc_objects | tr '\n' ' ')
		[ -z "$objs" ] || dirty "objets IPC System V de l'uid $uid ou de ses plages : $objs"
		qs=$(mq_of | head -n 5 | tr '\n' ' ')
		[ -z "$qs" ] || dirty "files de messages POSIX de l'uid $uid ou de ses plages : $qs"
		ks=$(charged_key_uids | tr '\n' ' ')
		if [ -n "$ks" ]; then
			dirty "clés du noyau (keyrings) des uids $ks(/proc/key-users)"
			# Out of reach of root (a keyring whose rights its owner took
			# away): only a reboot drops them.
			echo "KD_REBOOT clés du noyau que seul un redémarrage retire"
		fi
		files=""
		for d in "${places[@]}" /var/spool/cron /var/spool/at /var/mail "$KD_SCRATCH" /home; do
			[ -d "$d" ] || continue
			files="$files$(find -P "$d" -xdev "${owned[@]}" -print0 2>/dev/null | head -z -n 5 | tr '\0' ' ')"
		done
		[ -z "$files" ] || dirty "fichiers de l'uid $uid ou de ses plages restants : $files"
	fi
	# The GPUs: nobody but the host's own services may hold their device
	# nodes; then a reset, where the driver offers one.
	# A file held open counts when it is one of this host's GPU nodes: the
	# same device (major:minor) for a device node, the same file otherwise.
	# /proc shows every process of the kernel, and a process of another
	# mount namespace may hold a node of the same name that is not ours.
	gpu_id() {
		{ stat -L -c '%F|%t:%T|%d:%i' -- "$1" 2>/dev/null || true; } |
			awk -F'|' '{ print ($1 == "character special file") ? "c" $2 : "f" $3 }'
	}
	gpus=" "
	for n in /dev/nvidia* /dev/kfd /dev/dri/*; do
		[ -e "$n" ] && gpus="$gpus$(gpu_id "$n") "
	done
	uid_min=$(kd_login_def UID_MIN 1000)
	holders="" seen=" "
	for f in $(find -P /proc/[0-9]*/fd -mindepth 1 -maxdepth 1 \( -lname '/dev/nvidia*' -o -lname /dev/kfd -o -lname '/dev/dri/*' \) \
		-print 2>/dev/null); do
		id=$(gpu_id "$f") && [ -n "$id" ] || continue
		case "$gpus" in *" $id "*) ;; *) continue ;; esac
		p=${f%/fd/*}
		o=$(stat -c %u "$p" 2>/dev/null) || continue
		case "$seen" in *" $p "*) continue ;; esac
		seen="$seen$p "
		if [ "$o" -ge "$uid_min" ]; then holders="$holders${p#/proc/} (uid $o) "; fi
	done
	[ -z "$holders" ] || dirty "GPU encore ouverts par : $holders"
	if [ -z "$dirty" ]; then
		case "${KD_GPU_VENDOR:-}" in
		nvidia) reset=(nvidia-smi --gpu-reset) ;;
		amd) reset=(amd-smi reset -g all -G) ;;
		*) reset=() ;;
		esac
		if [ ${#reset[@]} -eq 0 ] || ! command -v "${reset[0]}" >/dev/null; then
			echo "KD_GPU_RESET none aucune remise à zéro proposée sur cette machine"
		elif out=$("${reset[@]}" </dev/null 2>&1); then
			echo "KD_GPU_RESET ok ${reset[*]} : $(printf '%s' "$out" | tail -n 1 | clean)"
		else
			echo "KD_GPU_RESET fail ${reset[*]} (code $?) : $(printf '%s' "$out" | tail -n 1 | clean)"
		fi
	fi
	if [ -n "$dirty" ]; then
		echo "KD_TEARDOWN_DIRTY $KD_TAG $ndirty"
		exit 0
	fi
	rm -f -- "$ids_file" "/run/kernodeck/$KD_USER.uid"
fi
echo "KD_TEARDOWN_OK $KD_TAG"
