# prepare.sh: create the customer's account on a GPU host, install their SSH
# public key and lay out the preparation preset. Run as root by the SSH
# driver (bash -s, variables exported above this text, common.sh before this
# text). Every step is idempotent and the whole run holds a per-account lock,
# so a run cut short at any line (worker killed, connection lost) is
# completed by the next one, never doubled.
#
# Isolation: once the account exists its home belongs to the customer, who
# may have replaced any entry in it with a symlink (to /root/.ssh, /etc...)
# since the last run. Root touches only entries of root-owned directories
# (/home/USER, SCRATCH/USER themselves); everything inside them is written by
# the customer's own uid (as_user), so a symlink gets the customer nothing
# they could not already write.
#
# Accounts: a uid (and a group of the same number) never given before on
# this host, taken from a counter in root's state that only goes up (and
# never below KD_UID_FLOOR, the driver's record of uids this host gave), so
# nothing the last customer left can belong to the next one; no subordinate
# uid or gid range (useradd's SUB_UID_COUNT/SUB_GID_COUNT set to 0), and a
# range that exists anyway is recorded for the teardown, then removed.
# Inputs: KD_USER KD_ORDER KD_PUBKEY KD_PRESET KD_SCRATCH KD_JUPYTER_TOKEN
#         KD_JUPYTER_PORT KD_HOST KD_UID_FLOOR KD_GPU_VENDOR (nvidia|amd)
set -eu
umask 077
kd_lock
step locked

# A host where a customer could write to a remote filesystem is refused
# before anything is made for them: nothing scans such a mount, so what
# they left there would outlive the teardown (and may reach other
# machines). kd_unfit_mounts says which mounts are accepted.
unfit=$(kd_unfit_mounts /proc/self/mountinfo | head -n 10)
if [ -n "$unfit" ]; then
	printf '%s\n' "$unfit" | while IFS= read -r m; do echo "KD_UNFIT_MOUNT $m"; done
	echo "KD_PREPARE_UNFIT $KD_TAG"
	exit 0
fi
step mounts

# kd_new_uid prints the next uid: above the counter, the driver's floor and
# every account or group already in the range, free as a uid and as a gid.
# The counter moves before the account exists, so a failed run skips a
# number rather than reuse one.
kd_new_uid() {
	local lo hi next used counter="$KD_STATE/next-uid" t
	lo=$(kd_login_def UID_MIN 1000)
	hi=$(kd_login_def UID_MAX 60000)
	next=$lo
	used=0
	[ ! -r "$counter" ] || read -r used <"$counter" || true
	case "$used" in '' | *[!0-9]*) fail "uid counter $counter is damaged: fix it by hand (never lower it)" ;; esac
	[ "$used" -le "$next" ] || next=$used
	case "${KD_UID_FLOOR:-0}" in '' | *[!0-9]*) fail "KD_UID_FLOOR is not a number" ;; esac
	[ "${KD_UID_FLOOR:-0}" -le "$next" ] || next=$KD_UID_FLOOR
	used=$({ getent passwd; getent group; } | awk -F: -v lo="$lo" -v hi="$hi" '$3 >= lo && $3 <= hi && $3 + 0 > m {m = $3 + 0} END {print m + 0}')
	[ "$used" -lt "$next" ] || next=$((used + 1))
	while getent passwd "$next" >/dev/null || getent group "$next" >/dev/null; do next=$((next + 1)); done
	[ "$next" -le "$hi" ] || fail "no uid left between $lo and $hi (UID_MIN/UID_MAX of /etc/login.defs)"
	t=$(mktemp "$KD_STATE/.next-uid.XXXXXX")
	echo $((next + 1)) >"$t"
	mv -f -- "$t" "$counter"
	echo "$next"
}

if ! getent passwd "$KD_USER" >/dev/null; then
	new=$(kd_new_uid)
	getent group "$KD_USER" >/dev/null || groupadd -g "$new" "$KD_USER"
	useradd --create-home --shell /bin/bash --comment "kernodeck $KD_ORDER" -u "$new" -g "$KD_USER" \
		-K SUB_UID_COUNT=0 -K SUB_GID_COUNT=0 "$KD_USER"
fi
# '*': no password login, but not a locked account (sshd refuses locked ones).
usermod -p '*' "$KD_USER"
kd_account
# Subordinate ranges (another tool or an older useradd gave some): recorded
# first, so the teardown searches them whatever happens, then removed, so
# newuidmap/newgidmap grant the customer nothing.
kd_record_ids
for f in subuid subgid; do
	kd_subids "$f" | while read -r first count; do
		opt=--del-subuids
		[ "$f" = subuid ] || opt=--del-subgids
		usermod "$opt" "$first-$((first + count - 1))" "$KD_USER" 2>/dev/null || true
	done
	if [ -n "$(kd_subids "$f")" ]; then
		# By number, or an entry usermod does not remove: dropped from the file.
		t=$(mktemp "$KD_STATE/.$f.XXXXXX")
		awk -F: -v n="$KD_USER" -v u="$uid" '$1 != n && $1 != u' "/etc/$f" >"$t"
		chmod 644 "$t"
		cat "$t" >"/etc/$f"
		rm -f -- "$t"
	fi
done
[ -z "$(kd_subids subuid)$(kd_subids subgid)" ] || fail "cannot remove the subordinate ids of $KD_USER"
# The GPUs' device groups: AMD's /dev/kfd and /dev/dri/renderD* usually
# need render (and video on older releases); NVIDIA's nodes need none.
if [ "${KD_GPU_VENDOR:-}" = amd ]; then
	for g in render video; do
		if getent group "$g" >/dev/null && ! id -nG "$KD_USER" | tr ' ' '\n' | grep -qx "$g"; then
			usermod -a -G "$g" "$KD_USER"
		fi
	done
fi
echo "KD_GROUPS $(id -nG "$KD_USER")"
step account

# Every world-writable directory of the host's local filesystems
# (kd_writable_dirs), kept in root's state for the teardown. On a host whose
# filesystems are too large to scan in 10 minutes, what the scan found is
# added to the last complete list.
t=$(mktemp "$KD_STATE/.writable-dirs.XXXXXX")
started=$(date +%s)
kd_writable_dirs | sort -z -u >"$t"
if [ $(($(date +%s) - started)) -ge 600 ] && [ -r "$KD_STATE/writable-dirs" ]; then
	echo "KD_WARN world-writable directories: scan cut short, merged with the last list" >&2
	sort -z -u "$t" "$KD_STATE/writable-dirs" >"$t.all"
	mv -f -- "$t.all" "$t"
fi
mv -f -- "$t" "$KD_STATE/writable-dirs"
step writable-dirs

# The home and scratch directories are entries of root-owned directories:
# the customer cannot swap them for symlinks, only what is inside them.
[ -d "$home" ] && [ ! -L "$home" ] || fail "home directory $home missing or not a directory"
chown "$uid:$gid" "$home"
chmod 700 "$home"
install -d -m 755 "$KD_SCRATCH"
if [ ! -d "$KD_SCRATCH/$KD_USER" ] || [ -L "$KD_SCRATCH/$KD_USER" ]; then
	rm -f -- "$KD_SCRATCH/$KD_USER"
	mkdir -m 700 "$KD_SCRATCH/$KD_USER"
fi
chown "$uid:$gid" "$KD_SCRATCH/$KD_USER"
chmod 700 "$KD_SCRATCH/$KD_USER"

kd_install_key
step key

# Everything below runs as the customer. Secrets travel in the environment
# (readable by the customer and root only), never on a command line.
export HOME="$home" USER="$KD_USER" LOGNAME="$KD_USER" KD_SCRATCH_DIR="$KD_SCRATCH/$KD_USER"
# Its output goes to a file root reads afterwards, never to the driver: the
# preset check's result is taken from it and printed by root, one line,
# control characters removed.
preset_out="/run/kernodeck/$KD_USER.preset"
status=0
as_user_out "$preset_out" bash -s <<'AS_USER' || status=$?
set -eu
umask 077
cd "$HOME"
# Our directories: a symlink or file the customer put in their place is
# replaced by a real directory (the customer's own entry, removed as them).
own_dir() {
	if [ -L "$1" ] || { [ -e "$1" ] && [ ! -d "$1" ]; }; then rm -f -- "$1"; fi
	mkdir -p -m "$2" -- "$1"
	chmod "$2" -- "$1"
}
own_dir kernodeck 755
own_dir work 755
if [ -L scratch ] || [ ! -e scratch ]; then ln -sfn -- "$KD_SCRATCH_DIR" scratch; fi

# Files of ours are written to a new name, then renamed over the old one:
# rename replaces a symlink, it never writes through it.
put() { # put MODE PATH < content
	t=$(mktemp "$2.XXXXXX")
	cat >"$t"
	chmod "$1" "$t"
	mv -f -T -- "$t" "$2"
}
put 644 kernodeck/LISEZMOI.txt <<TXT
Commande $KD_ORDER - préparation « $KD_PRESET ».
La préparation décrit un point de départ ; elle ne certifie aucune version.
- ~/work : votre espace de travail ; ~/scratch : espace temporaire, effacé à la fin.
- ~/kernodeck/check_gpu.sh : contrôle minimal du GPU (nvidia-smi ou amd-smi).
Exportez vos résultats et checkpoints avant la fin de la location, puis
vérifiez votre copie : la machine est effacée à l'échéance.
TXT
put 755 kernodeck/check_gpu.sh <<'TXT'
#!/bin/sh
# Minimal GPU check: what the driver sees, then the toolchain if any
# (CUDA on NVIDIA GPUs, ROCm on AMD ones).
if command -v nvidia-smi >/dev/null; then
	nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
	command -v nvcc >/dev/null && nvcc --version | tail -n 2
elif command -v amd-smi >/dev/null; then
	amd-smi static --asic --driver | grep -E 'GPU:|MARKET_NAME|VERSION'
	cat /opt/rocm/.info/version 2>/dev/null
fi
exit 0
TXT
printf '%s\n' "$KD_PRESET" | put 644 kernodeck/preset

case "$KD_PRESET" in
python)
	if command -v python3 >/dev/null && [ ! -d venv ]; then
		python3 -m venv --without-pip venv 2>/dev/null || true
	fi
	;;
pytorch | inference)
	put 644 kernodeck/check_torch.py <<'TXT'
# The FAQ's minimal backend check. Run it with the interpreter of your
# project: it names that interpreter, the backend PyTorch was built for
# (CUDA, or ROCm, which also answers through torch.cuda) and the device it
# sees, and fails loudly instead of silently falling back to the CPU.
import sys
import torch
backend = "ROCm " + torch.version.hip if getattr(torch.version, "hip", None) else "CUDA " + str(torch.version.cuda)
if not torch.cuda.is_available():
    sys.exit("python=%s torch=%s backend=%s: no GPU visible to PyTorch (it would run on the CPU)" % (sys.executable, torch.__version__, backend))
print("python=%s torch=%s backend=%s device=%s" % (sys.executable, torch.__version__, backend, torch.cuda.get_device_name(0)))
TXT
	[ "$KD_PRESET" != inference ] || own_dir models 755
	# Run the check once now, when the image has PyTorch, for the order.
	if python3 -c 'import torch' >/dev/null 2>&1; then
		if out=$(python3 kernodeck/check_torch.py 2>&1); then
			echo "PRESET_CHECK ok $(printf '%s' "$out" | tail -n 1)"
		else
			echo "PRESET_CHECK fail $(printf '%s' "$out" | tail -n 1)"
		fi
	else
		echo "PRESET_CHECK absent"
	fi
	;;
notebook)
	own_dir notebooks 755
	own_dir .jupyter 700
	# Jupyter listens on the loopback only: the customer reaches it through
	# an SSH tunnel (the command is on the order), never plain HTTP on a
	# public interface. The token lives in a file only the customer can
	# read, never on a command line (visible in ps).
	put 600 .jupyter/jupyter_server_config.json <<TXT
{"ServerApp": {"token": "$KD_JUPYTER_TOKEN", "ip": "127.0.0.1", "port": $KD_JUPYTER_PORT, "open_browser": false, "root_dir": "$HOME/notebooks"}}
TXT
	printf 'http://127.0.0.1:%s/lab\n' "$KD_JUPYTER_PORT" | put 644 kernodeck/jupyter_url
	if j=$(command -v jupyter); then
		# The customer's Jupyter service: a small supervisor, detached from
		# any session (setsid), keeps it running across disconnects and
		# starts it again within seconds if it stops. The script starts the
		# supervisor unless it runs (kill it to stop Jupyter for good).
		put 755 kernodeck/jupyter.sh <<TXT
#!/bin/sh
# Keeps Jupyter Lab (127.0.0.1:$KD_JUPYTER_PORT) running for you.
pgrep -u "\$(id -u)" -f kernodeck-jupyter-service >/dev/null && exit 0
cd "\$HOME" && setsid nohup sh -c 'while :; do "\$0" lab >>"\$HOME/kernodeck/jupyter.log" 2>&1; sleep 2; done' "$j" kernodeck-jupyter-service </dev/null >/dev/null 2>&1 &
TXT
		sh kernodeck/jupyter.sh
		echo "JUPYTER started"
	else
		# Stand-in hosts without Jupyter: the URL and token are written,
		# nothing listens.
		echo "JUPYTER not-installed"
	fi
	;;
esac
AS_USER
clean() { head -c 65536 | tr -d '\000-\037\177' | cut -c1-400; }
if [ "$status" -ne 0 ]; then
	fail "preset $KD_PRESET failed ($status): $(tail -n 1 "$preset_out" | clean)"
fi
line=$(head -c 65536 "$preset_out" | grep -a '^PRESET_CHECK ' | tail -n 1 | clean) || true
[ -z "$line" ] || echo "KD_$line"
line=$(head -c 65536 "$preset_out" | grep -a '^JUPYTER ' | tail -n 1 | clean) || true
[ -z "$line" ] || echo "KD_$line"
rm -f -- "$preset_out"
step preset
echo "KD_PREPARE_OK $KD_TAG"
