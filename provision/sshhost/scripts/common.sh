# common.sh: helpers sent ahead of every host script (prepare, teardown,
# setkey). Root state lives where customers cannot write: /run/kernodeck
# (root-only, the per-account lock) and /var/lib/kernodeck/state (root-only,
# kept across reboots: the uid counter, the ids each account had and the
# world-writable directories of the host).
#
# Protocol: only root prints on standard output, and only lines it builds
# itself. Everything run as the customer (as_user) gets /dev/null as input
# and never the script's standard output or error: nothing a customer's
# program prints, or writes into a descriptor it finds in /proc, reaches
# the driver. Verdicts carry KD_TAG, a value the driver draws for each run
# and sends unexported (no customer helper ever sees it).
step() { echo "KD_STEP $1"; }
fail() {
	echo "KD_FAIL $1" >&2
	exit 1
}
# The customer's uid cannot enter root's home: commands run as them (find)
# need a working directory they can read.
cd /
# Root's own temporary files (bash here-documents) never go to /tmp.
mkdir -p -m 700 /run/kernodeck
export TMPDIR=/run/kernodeck
KD_STATE=/var/lib/kernodeck/state
mkdir -p -m 755 /var/lib/kernodeck
mkdir -p -m 700 "$KD_STATE"
chmod 700 "$KD_STATE"

kd_lock() {
	exec 9>"/run/kernodeck/$KD_USER.lock"
	flock -w 120 9 || fail "another operation holds $KD_USER"
}

# kd_login_def NAME DEFAULT reads a number from /etc/login.defs.
kd_login_def() {
	local v
	v=$(awk -v k="$1" '$1 == k && $2 ~ /^[0-9]+$/ {v = $2} END {print v}' /etc/login.defs 2>/dev/null)
	echo "${v:-$2}"
}

# kd_account sets uid, gid and home from the account, if it exists.
kd_account() {
	uid="" gid="" home=""
	local line
	line=$(getent passwd "$KD_USER") || return 0
	uid=$(echo "$line" | cut -d: -f3)
	gid=$(echo "$line" | cut -d: -f4)
	home=$(echo "$line" | cut -d: -f6)
	# Only the home useradd gives: a directory of root-owned /home.
	[ "$home" = "/home/$KD_USER" ] || fail "unexpected home directory $home for $KD_USER"
}

# kd_subids prints the subordinate uid (subuid) or gid (subgid) ranges of
# the account, by name or by number, as "first count" lines.
kd_subids() {
	[ -r "/etc/$1" ] || return 0
	awk -F: -v n="$KD_USER" -v u="$uid" '($1 == n || $1 == u) && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ && $3 > 0 {print $2, $3}' "/etc/$1"
}

# kd_record_ids keeps, in root's state, the account's uid and gid and every
# subordinate range it has or had ("uid gid" then "first count" lines), so a
# teardown that runs after the account is gone, or after a reboot, still
# knows whose processes, IPC objects and files to look for. Ranges once
# recorded stay recorded until the release finds the host clean.
kd_record_ids() {
	local f="$KD_STATE/$KD_USER.ids" t
	t=$(mktemp "$KD_STATE/.ids.XXXXXX")
	{
		echo "$uid $gid"
		[ ! -r "$f" ] || tail -n +2 "$f"
		kd_subids subuid
		kd_subids subgid
	} | awk 'NR == 1 || !seen[$0]++' >"$t"
	mv -f -- "$t" "$f"
	echo "KD_IDS $uid $gid $(tail -n +2 "$f" | tr '\n' ' ')"
}

# as_user runs a command with the customer's uid and gid only: no
# supplementary groups (KD_AS_GROUPS=1: the account's own, for the preset's
# GPU check), no capabilities, no way to gain privileges. What it does
# through a symlink is what the customer could do anyway. It reads
# /dev/null and writes nowhere root reads; as_user_script reads the
# caller's here-document instead. The lock's descriptor is closed first: a
# process the customer keeps running (Jupyter) must never hold the
# account's lock, or teardown could not take it. AS_UID/AS_GID, when set,
# run it as another uid of the customer's (a subordinate one).
as_user() {
	as_user_script "$@" </dev/null
}
as_user_script() {
	local groups=--clear-groups
	[ -z "${KD_AS_GROUPS:-}" ] || groups=--init-groups
	TMPDIR=/tmp setpriv --reuid="${AS_UID:-$uid}" --regid="${AS_GID:-$gid}" "$groups" --inh-caps=-all --no-new-privs -- "$@" \
		>/dev/null 2>&1 9>&-
}
# as_user_out runs as_user_script, with the account's groups, its output
# (standard output and error) in the file $1, which root creates and reads
# afterwards (its first 64 KiB): a file, not a pipe, so a process the
# customer leaves behind holding it cannot make root wait.
as_user_out() {
	local out=$1
	shift
	rm -f -- "$out"
	TMPDIR=/tmp setpriv --reuid="$uid" --regid="$gid" --init-groups --inh-caps=-all --no-new-privs -- "$@" \
		>"$out" 2>&1 9>&-
}

# kd_install_key makes KD_PUBKEY the only key in the customer's
# authorized_keys, written by the customer's uid: a ~/.ssh the customer
# replaced with a symlink or a file is replaced by a real directory (their
# own entry, removed as them), and the file is renamed into place, never
# written through a link. Needs uid, gid and home (kd_account).
kd_install_key() {
	HOME="$home" as_user_script bash -s <<'AS_USER'
set -eu
umask 077
cd "$HOME"
if [ -L .ssh ] || { [ -e .ssh ] && [ ! -d .ssh ]; }; then rm -f -- .ssh; fi
mkdir -p -m 700 .ssh
chmod 700 .ssh
tmp=$(mktemp .ssh/.authorized_keys.XXXXXX)
printf '%s\n' "$KD_PUBKEY" >"$tmp"
chmod 600 "$tmp"
mv -f -T -- "$tmp" .ssh/authorized_keys
AS_USER
}

# kd_remote_fs FSTYPE: whether a filesystem of that type keeps its files
# beyond this host's own disks (network, cluster and hypervisor shares, and
# FUSE, whose daemon may keep them anywhere). None is ever scanned (slow,
# and root may not read it: NFS root_squash, FUSE without allow_other), so
# prepare refuses a host where a customer could write to one
# (kd_unfit_mounts). lxcfs (LXD's views of /proc and /sys) stores nothing.
kd_remote_fs() {
	case "$1" in
	fuse.lxcfs) return 1 ;;
	nfs | nfs4 | cifs | smb3 | smbfs | 9p | virtiofs | ceph | glusterfs | lustre | gpfs | beegfs | wekafs | afs | \
		orangefs | pvfs2 | ocfs2 | gfs2 | davfs | ncpfs | coda | fuse | fuse.*)
		return 0
		;;
	esac
	return 1
}

kd_reachable() { # kd_reachable PATH: every directory above PATH lets others through
	local p=$1
	while [ "$p" != / ] && [ -n "$p" ]; do
		p=$(dirname -- "$p")
		[ -n "$(find -P "$p" -maxdepth 0 -perm -0001 2>/dev/null)" ] || return 1
	done
}

# kd_writable_dirs prints (NUL-separated) every world-writable directory of
# the host's local filesystems, where a customer can leave files. A
# directory others cannot traverse is not searched further (the customer
# cannot reach what is inside), nor a mount point below one (containers'
# root filesystems under /var/lib/docker...). Prepare keeps the list in
# root's state; teardown scans again, for directories made since.
kd_writable_dirs() {
	awk '{print $2, $3}' /proc/self/mounts | while read -r mp fstype; do
		case "$fstype" in
		proc | sysfs | cgroup | cgroup2 | devpts | securityfs | debugfs | tracefs | bpf | configfs | pstore | \
			autofs | binfmt_misc | fusectl | efivarfs | rpc_pipefs | nsfs | squashfs | iso9660 | fuse.lxcfs)
			continue
			;;
		esac
		! kd_remote_fs "$fstype" || continue
		mp=$(printf '%b' "$mp")
		kd_reachable "$mp" || continue
		timeout 600 find -P "$mp" -xdev \( -type d ! -perm -0001 -prune \) -o \( -type d -perm -0002 -print0 -prune \) 2>/dev/null || true
	done
}

# kd_unfit_mounts MOUNTINFO prints, one a line as "MOUNT_POINT (FSTYPE
# SOURCE)" (escaped as in the table), the mounts of a mount table
# (/proc/self/mountinfo) where a customer could write what no teardown
# searches: a remote filesystem (kd_remote_fs) mounted writable (neither
# the mount nor its filesystem read-only) that a customer can reach. Not
# reachable: a directory above the mount point closes it to others
# (customers have no group of the host's but render and video), or a FUSE
# mount without allow_other (only the uid that mounted it may enter, and a
# customer's uid is new). Accepted as the customer's own: a nosuid mount
# under their home or scratch space (KD_USER, KD_SCRATCH), which the
# teardown must see unmounted before it removes them.
kd_unfit_mounts() {
	local mp opts fstype src sopts
	# Fields: ID PARENT DEV ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS
	awk '{ for (i = 7; i <= NF && $i != "-"; i++) {}; if (i + 3 <= NF) print $5, $6, $(i + 1), $(i + 2), $(i + 3) }' "$1" |
		while read -r mp opts fstype src sopts; do
			kd_remote_fs "$fstype" || continue
			case ",$opts,$sopts," in *,ro,*) continue ;; esac
			case "$fstype" in
			fuse | fuse.*) case ",$sopts," in *,allow_other,*) ;; *) continue ;; esac ;;
			esac
			kd_reachable "$(printf '%b' "$mp")" || continue
			case "$(printf '%b' "$mp")/" in
			"/home/$KD_USER/"* | "$KD_SCRATCH/$KD_USER/"*)
				case ",$opts," in *,nosuid,*) continue ;; esac
				;;
			esac
			printf '%s (%s %s)\n' "$mp" "$fstype" "$src" | tr -d '\000-\011\013-\037\177' | cut -c1-300
		done
}
