# common.sh: helpers sent ahead of every host script (prepare, teardown,
# setkey). Root state lives in /run/kernodeck (root-only): the per-account
# lock and the uid each account had, so a teardown that runs after the
# account is gone still knows whose processes and files to look for.
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

kd_lock() {
	exec 9>"/run/kernodeck/$KD_USER.lock"
	flock -w 120 9 || fail "another operation holds $KD_USER"
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

kd_record_uid() {
	echo "$uid $gid" >"/run/kernodeck/$KD_USER.uid"
}

# as_user runs a command with the customer's uid and gid only: no
# supplementary groups, no capabilities, no way to gain privileges. What it
# does through a symlink is what the customer could do anyway. The lock's
# descriptor is closed first: a process the customer keeps running (Jupyter)
# must never hold the account's lock, or teardown could not take it.
as_user() {
	TMPDIR=/tmp setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all --no-new-privs -- "$@" 9>&-
}

# kd_install_key makes KD_PUBKEY the only key in the customer's
# authorized_keys, written by the customer's uid: a ~/.ssh the customer
# replaced with a symlink or a file is replaced by a real directory (their
# own entry, removed as them), and the file is renamed into place, never
# written through a link. Needs uid, gid and home (kd_account).
kd_install_key() {
	HOME="$home" as_user bash -s <<'AS_USER'
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
