# prepare.sh: create the customer's account on a GPU host, install their SSH
# public key and lay out the preparation preset. Run as root by the SSH
# driver (bash -s, variables exported above this text). Every step is
# idempotent and the whole run holds a per-account lock, so a run cut short
# at any line (worker killed, connection lost) is completed by the next one,
# never doubled.
# Inputs: KD_USER KD_ORDER KD_PUBKEY KD_PRESET KD_SCRATCH KD_JUPYTER_TOKEN
#         KD_JUPYTER_PORT KD_HOST
set -eu
umask 077
step() { echo "KD_STEP $1"; }

mkdir -p /run/kernodeck
exec 9>"/run/kernodeck/$KD_USER.lock"
flock -w 120 9
step locked

if ! getent passwd "$KD_USER" >/dev/null; then
	useradd --create-home --shell /bin/bash --comment "kernodeck $KD_ORDER" "$KD_USER"
fi
# '*': no password login, but not a locked account (sshd refuses locked ones).
usermod -p '*' "$KD_USER"
step account

home=$(getent passwd "$KD_USER" | cut -d: -f6)
group=$(id -gn "$KD_USER")
install -d -m 700 -o "$KD_USER" -g "$group" "$home" "$home/.ssh"
tmp=$(mktemp "$home/.ssh/.authorized_keys.XXXXXX")
printf '%s\n' "$KD_PUBKEY" >"$tmp"
chown "$KD_USER:$group" "$tmp"
chmod 600 "$tmp"
mv -f "$tmp" "$home/.ssh/authorized_keys"
step key

install -d -m 755 "$KD_SCRATCH"
install -d -m 700 -o "$KD_USER" -g "$group" "$KD_SCRATCH/$KD_USER"
install -d -m 755 -o "$KD_USER" -g "$group" "$home/kernodeck" "$home/work"
ln -sfn "$KD_SCRATCH/$KD_USER" "$home/scratch"

cat >"$home/kernodeck/LISEZMOI.txt" <<TXT
Commande $KD_ORDER - préparation « $KD_PRESET ».
La préparation décrit un point de départ ; elle ne certifie aucune version.
- ~/work : votre espace de travail ; ~/scratch : espace temporaire, effacé à la fin.
- ~/kernodeck/check_gpu.sh : contrôle minimal du GPU (nvidia-smi).
Exportez vos résultats et checkpoints avant la fin de la location, puis
vérifiez votre copie : la machine est effacée à l'échéance.
TXT
cat >"$home/kernodeck/check_gpu.sh" <<'TXT'
#!/bin/sh
# Minimal GPU check: what the driver sees, then the CUDA toolchain if any.
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
command -v nvcc >/dev/null && nvcc --version | tail -n 2
exit 0
TXT
chmod 755 "$home/kernodeck/check_gpu.sh"
echo "$KD_PRESET" >"$home/kernodeck/preset"

case "$KD_PRESET" in
python)
	if command -v python3 >/dev/null && [ ! -d "$home/venv" ]; then
		runuser -u "$KD_USER" -- python3 -m venv --without-pip "$home/venv" 2>/dev/null || true
	fi
	;;
pytorch | inference)
	cat >"$home/kernodeck/check_torch.py" <<'TXT'
# Run with the interpreter of your project: fails loudly instead of
# silently falling back to the CPU.
import torch
assert torch.cuda.is_available(), "no GPU visible to PyTorch"
print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))
TXT
	[ "$KD_PRESET" = inference ] && install -d -m 755 -o "$KD_USER" -g "$group" "$home/models"
	;;
notebook)
	install -d -m 755 -o "$KD_USER" -g "$group" "$home/notebooks" "$home/.jupyter"
	# The token lives in a file only the customer can read, never on a
	# command line (visible in ps).
	cat >"$home/.jupyter/jupyter_server_config.json" <<TXT
{"ServerApp": {"token": "$KD_JUPYTER_TOKEN", "ip": "0.0.0.0", "port": $KD_JUPYTER_PORT, "open_browser": false, "root_dir": "$home/notebooks"}}
TXT
	chmod 600 "$home/.jupyter/jupyter_server_config.json"
	printf 'http://%s:%s/lab\n' "$KD_HOST" "$KD_JUPYTER_PORT" >"$home/kernodeck/jupyter_url"
	if command -v jupyter >/dev/null; then
		if ! pgrep -u "$KD_USER" -f jupyter >/dev/null; then
			runuser -u "$KD_USER" -- sh -c 'cd && nohup jupyter lab >"$HOME/kernodeck/jupyter.log" 2>&1 &'
		fi
		echo "KD_JUPYTER started"
	else
		# Stand-in hosts have no Jupyter: the URL and token are written,
		# nothing listens.
		echo "KD_JUPYTER not-installed"
	fi
	;;
esac
chown -R "$KD_USER:$group" "$home/kernodeck" "$home/.jupyter" 2>/dev/null || chown -R "$KD_USER:$group" "$home/kernodeck"
step preset
echo KD_PREPARE_OK
