// Package sshtest starts a real OpenSSH server on loopback as a stand-in GPU
// host for tests: its own host key, its own configuration, and an
// nvidia-smi, amd-smi or rocm-smi script on its PATH printing output
// recorded on real machines (sources beside each GPU value below).
// Tests must run as root (the server creates real accounts); Start skips
// the test otherwise.
package sshtest

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// Host is a running stand-in host.
//
// Its sshd runs in private mount and IPC namespaces, so the host is a
// machine of its own as far as files and IPC go: /etc and /var are overlays
// on this machine's (writes land in the test's directory), /root, /home,
// /run (with a 1777 /run/lock), /tmp, /var/tmp and /dev/shm are fresh
// tmpfs, /var/crash is a 1777 directory (as on Ubuntu), /dev is a tmpfs
// holding this machine's null, zero, full, random, urandom, tty and pts, a
// POSIX message queue filesystem at /dev/mqueue (the host's own queues, as
// its SysV IPC objects are its own), and the GPU device nodes of
// Options.GPUNodes. The admin logs in with the key in the
// host's /root/.ssh/authorized_keys (its only authorized key), like on a
// real machine. A bug that deletes or hands over /root/.ssh or /etc on the
// host damages these copies, never this machine's files; read them from the
// outside with Path. Accounts the host creates get uids in a range of their
// own (UIDMin..UIDMax, from the port), so killing "every process of that
// uid" on one stand-in host cannot touch another's, nor this machine's;
// SubUIDMin..SubUIDMin+SubUIDCount-1 is a range of the same kind a test may
// grant an account as subordinate uids and gids (/etc/subuid, /etc/subgid).
type Host struct {
	Addr        string
	Port        int
	Fingerprint string // of its host key, SHA256:...
	KeyType     string
	Admin       ssh.Signer // logs in as root
	Dir         string     // this machine's path, also the same path on the host
	UIDMin      int
	UIDMax      int
	SubUIDMin   int
	SubUIDCount int
	cmd         *exec.Cmd
}

// Path is where this machine sees path p of the host (through the sshd's
// /proc/PID/root, which shows the host's mounts).
func (h *Host) Path(p string) string {
	return fmt.Sprintf("/proc/%d/root%s", h.cmd.Process.Pid, p)
}

// RequireRoot skips the test unless it runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the stand-in GPU host creates real Unix accounts (run the tests as root)")
	}
}

// Options tune a stand-in host.
type Options struct {
	// AdminKeyPEM is the admin login key (OpenSSH PEM); generated if nil, so
	// several hosts can share one by passing the same key.
	AdminKeyPEM []byte
	// Jupyter puts a stand-in `jupyter` on the host's PATH: `jupyter lab`
	// serves HTTP on the ServerApp ip and port of the customer's
	// ~/.jupyter/jupyter_server_config.json, as Jupyter Server would, and
	// answers 200 to the configured token only.
	Jupyter bool
	// Torch, if set, puts a stand-in `torch` module on the host's Python
	// path (PYTHONPATH of every session) that answers like PyTorch would.
	Torch *Torch
	// GPUNodes are made in the host's /dev as the GPU driver's device nodes
	// would be ("/dev/kfd", "/dev/dri/renderD128", "/dev/nvidia0"...):
	// regular files, not devices, that processes can hold open. AMD's
	// (/dev/kfd, /dev/dri/*) belong to group render, mode 0660, the
	// group made on the host if missing; the others are mode 0666.
	GPUNodes []string
}

// NewKeyPEM returns a new ed25519 private key in OpenSSH PEM form.
func NewKeyPEM(t testing.TB) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

// Start runs /usr/sbin/sshd on a free loopback port, stopped at the end of
// the test.
func Start(t testing.TB, gpu GPU, opts ...Options) *Host {
	t.Helper()
	RequireRoot(t)
	sshd := "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		t.Fatalf("%s missing (apt-get install -y openssh-server, or scripts/ensure-tools.sh)", sshd)
	}
	// sshd refuses to start without its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "kd-sshtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	hostKey := writeKey(t, filepath.Join(dir, "ssh_host_ed25519_key"), nil)
	var adminPEM []byte
	if len(opts) > 0 {
		adminPEM = opts[0].AdminKeyPEM
	}
	admin := writeKey(t, filepath.Join(dir, "admin_key"), adminPEM)

	bin := filepath.Join(dir, "bin")
	must(os.MkdirAll(bin, 0o755))
	smi := "#!/bin/sh\n# Stand-in nvidia-smi: output recorded on real machines (see package sshtest).\n" +
		"case \"$*\" in\n" +
		"*--query-gpu=name,memory.total,driver_version*--format=csv,noheader*)\ncat <<'KD_EOF'\n" + gpu.Query + "KD_EOF\n;;\n" +
		"'')\ncat <<'KD_EOF'\n" + gpu.Header + "KD_EOF\n;;\n" +
		"*) echo \"stand-in nvidia-smi: unsupported arguments: $*\" >&2; exit 2 ;;\nesac\n"
	if gpu.Query != "" {
		must(os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(smi), 0o755))
	}
	if gpu.AMDSMI != "" {
		amd := "#!/bin/sh\n# Stand-in amd-smi: output recorded on real machines (see package sshtest).\n" +
			"case \"$*\" in\n'static --asic --driver')\ncat <<'KD_EOF'\n" + gpu.AMDSMI + "KD_EOF\n;;\n" +
			"*) echo \"stand-in amd-smi: unsupported arguments: $*\" >&2; exit 2 ;;\nesac\n"
		must(os.WriteFile(filepath.Join(bin, "amd-smi"), []byte(amd), 0o755))
	}
	if gpu.ROCmSMIProduct != "" {
		rocm := "#!/bin/sh\n# Stand-in rocm-smi: output recorded on real machines (see package sshtest).\n" +
			"case \"$*\" in\n--showproductname)\ncat <<'KD_EOF'\n" + gpu.ROCmSMIProduct + "KD_EOF\n;;\n" +
			"--showdriverversion)\ncat <<'KD_EOF'\n" + gpu.ROCmSMIDriver + "KD_EOF\n;;\n" +
			"*) echo \"stand-in rocm-smi: unsupported arguments: $*\" >&2; exit 2 ;;\nesac\n"
		must(os.WriteFile(filepath.Join(bin, "rocm-smi"), []byte(rocm), 0o755))
	}
	must(os.WriteFile(filepath.Join(dir, "rocm-version"), []byte(gpu.ROCm), 0o644))
	if len(opts) > 0 && opts[0].Jupyter {
		must(os.WriteFile(filepath.Join(bin, "jupyter"), []byte(standInJupyter), 0o755))
	}
	pyPath := ""
	if len(opts) > 0 && opts[0].Torch != nil {
		pyPath = filepath.Join(dir, "py")
		must(os.MkdirAll(filepath.Join(pyPath, "torch"), 0o755))
		must(os.WriteFile(filepath.Join(pyPath, "torch", "__init__.py"), []byte(opts[0].Torch.module()), 0o644))
	}
	// Customers reach their scratch space under dir.
	must(os.Chmod(dir, 0o755))

	var nodes []string
	if len(opts) > 0 {
		nodes = opts[0].GPUNodes
	}
	must(os.WriteFile(filepath.Join(dir, "gpu-nodes"), []byte(strings.Join(nodes, "\n")+"\n"), 0o644))

	port := freePort(t)
	uidMin := 200000 + port*64
	subMin := 100000000 + port*1024
	cfg := strings.Join([]string{
		"HostKey " + filepath.Join(dir, "ssh_host_ed25519_key"),
		"PidFile " + filepath.Join(dir, "sshd.pid"),
		"AuthorizedKeysFile .ssh/authorized_keys",
		"StrictModes yes",
		"PermitRootLogin prohibit-password",
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"UsePAM no",
		"MaxStartups 50",
		"LogLevel ERROR",
		"SetEnv PATH=" + bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PYTHONPATH=" + pyPath,
	}, "\n") + "\n"
	cfgPath := filepath.Join(dir, "sshd_config")
	must(os.WriteFile(cfgPath, []byte(cfg), 0o600))

	// The namespace's mounts, then sshd in it (same process: unshare and
	// sh exec, so the pid is sshd's).
	setup := `set -eu
D=$1; PORT=$2; UMIN=$3; UMAX=$4; CFG=$5
# The overlays' layers: root's only, so customers (and the teardown's scan
# of world-writable directories) never reach a copy of the host's files.
mkdir -m 0700 "$D/ov"
for p in etc var opt; do
	mkdir -p "$D/ov/$p/upper" "$D/ov/$p/work"
	mount -t overlay "kd-$p" -o "lowerdir=/$p,upperdir=$D/ov/$p/upper,workdir=$D/ov/$p/work" "/$p"
done
mount -t tmpfs -o mode=0755 kd-run /run
mkdir -m 0755 /run/sshd
mkdir -m 1777 /run/lock
# /dev: a tmpfs with this machine's harmless nodes bound in, and the host's
# own message queues and GPU nodes.
mkdir -m 0700 /run/kd-olddev
mount --rbind /dev /run/kd-olddev
mount -t tmpfs -o mode=0755 kd-dev /dev
for n in null zero full random urandom tty; do
	touch "/dev/$n"
	mount --bind "/run/kd-olddev/$n" "/dev/$n"
done
mkdir /dev/pts /dev/shm /dev/mqueue
mount --bind /run/kd-olddev/pts /dev/pts
ln -s pts/ptmx /dev/ptmx
ln -s /proc/self/fd /dev/fd
ln -s /proc/self/fd/0 /dev/stdin
ln -s /proc/self/fd/1 /dev/stdout
ln -s /proc/self/fd/2 /dev/stderr
umount -R -l /run/kd-olddev
rmdir /run/kd-olddev
mount -t mqueue kd-mqueue /dev/mqueue
mkdir -p -m 1777 /var/crash
chmod 1777 /var/crash
# /tmp is private too, with this test's directory bound back at its path.
mkdir -m 0700 /run/kd-dir
mount --bind "$D" /run/kd-dir
for p in /tmp /var/tmp /dev/shm; do mount -t tmpfs -o mode=1777 kd-tmp "$p"; done
mkdir -p -m 0755 "$D"
mount --bind /run/kd-dir "$D"
umount /run/kd-dir
rmdir /run/kd-dir
if [ -s "$D/rocm-version" ]; then
	mkdir -p /opt/rocm/.info
	cp "$D/rocm-version" /opt/rocm/.info/version
fi
mount -t tmpfs -o mode=0755 kd-home /home
mount -t tmpfs -o mode=0700 kd-root /root
mkdir -m 0700 /root/.ssh
cp "$D/admin.pub" /root/.ssh/authorized_keys
chmod 0600 /root/.ssh/authorized_keys
while read -r n; do
	[ -n "$n" ] || continue
	mkdir -p "$(dirname "$n")"
	: >"$n"
	case "$n" in
	/dev/kfd | /dev/dri/*)
		getent group render >/dev/null || groupadd -r render
		chgrp render "$n"
		chmod 0660 "$n"
		;;
	*) chmod 0666 "$n" ;;
	esac
done <"$D/gpu-nodes"
sed -i -e '/^[[:space:]]*[UG]ID_M\(IN\|AX\)[[:space:]]/d' /etc/login.defs
printf 'UID_MIN %s\nUID_MAX %s\nGID_MIN %s\nGID_MAX %s\n' "$UMIN" "$UMAX" "$UMIN" "$UMAX" >>/etc/login.defs
exec /usr/sbin/sshd -D -e -p "$PORT" -f "$CFG" -o ListenAddress=127.0.0.1
`
	must(os.WriteFile(filepath.Join(dir, "admin.pub"), ssh.MarshalAuthorizedKey(admin.PublicKey()), 0o644))
	cmd := exec.Command("unshare", "--mount", "--ipc", "--propagation", "private", "--", "/bin/sh", "-c", setup, "sh",
		dir, strconv.Itoa(port), strconv.Itoa(uidMin), strconv.Itoa(uidMin+63), cfgPath)
	logf, err := os.Create(filepath.Join(dir, "sshd.log"))
	must(err)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(cmd.Start())
	h := &Host{Addr: "127.0.0.1", Port: port, Fingerprint: ssh.FingerprintSHA256(hostKey.PublicKey()),
		KeyType: hostKey.PublicKey().Type(), Admin: admin, Dir: dir, UIDMin: uidMin, UIDMax: uidMin + 63,
		SubUIDMin: subMin, SubUIDCount: 1024, cmd: cmd}
	t.Cleanup(h.Stop)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			raw, _ := os.ReadFile(filepath.Join(dir, "sshd.log"))
			t.Fatalf("sshd did not start: %v\n%s", err, raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return h
}

// Stop kills every process of the host's uid ranges (what a failed test
// may leave), then the server; the namespace and its files go with them.
func (h *Host) Stop() {
	if h.cmd == nil || h.cmd.Process == nil {
		return
	}
	for i := 0; i < 100; i++ {
		pids := h.rangePIDs()
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = h.cmd.Process.Kill()
	_ = h.cmd.Wait()
	h.cmd = nil
}

// mine says whether uid is one of the host's (accounts or subordinate range).
func (h *Host) mine(uid int) bool {
	return (uid >= h.UIDMin && uid <= h.UIDMax) || (uid >= h.SubUIDMin && uid < h.SubUIDMin+h.SubUIDCount)
}

// rangePIDs lists the live processes whose real or effective uid is one of
// the host's.
func (h *Host) rangePIDs() []int {
	out, _ := exec.Command("ps", "-e", "-o", "pid=,ruid=,euid=,stat=").Output()
	var pids []int
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || strings.HasPrefix(f[3], "Z") {
			continue
		}
		pid, _ := strconv.Atoi(f[0])
		r, _ := strconv.Atoi(f[1])
		e, _ := strconv.Atoi(f[2])
		if h.mine(r) || h.mine(e) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// AdminRun runs cmd on the host as root, logging in with the admin key as
// the driver does; the error says when that login is refused.
func (h *Host) AdminRun(cmd string) (string, error) {
	return h.Run("root", h.Admin, cmd)
}

// Run logs in as user with signer and runs cmd, returning its combined output.
func (h *Host) Run(user string, signer ssh.Signer, cmd string) (string, error) {
	c, err := ssh.Dial("tcp", net.JoinHostPort(h.Addr, strconv.Itoa(h.Port)), &ssh.ClientConfig{
		User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			if ssh.FingerprintSHA256(key) != h.Fingerprint {
				return fmt.Errorf("host key mismatch")
			}
			return nil
		},
		Timeout: 5 * time.Second,
	})
	if err != nil {
		return "", fmt.Errorf("login as %s: %w", user, err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	if err != nil {
		return string(out), fmt.Errorf("%s as %s: %w: %s", cmd, user, err, out)
	}
	return string(out), nil
}

func writeKey(t testing.TB, path string, pemKey []byte) ssh.Signer {
	t.Helper()
	if pemKey == nil {
		pemKey = NewKeyPEM(t)
	}
	if err := os.WriteFile(path, pemKey, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := ssh.ParsePrivateKey(pemKey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// PasswdLines returns the host's /etc/passwd lines of accounts whose name
// starts with prefix.
func (h *Host) PasswdLines(t testing.TB, prefix string) []string {
	t.Helper()
	f, err := os.Open(h.Path("/etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// UID returns the uid of the host's account user.
func (h *Host) UID(t testing.TB, user string) int {
	t.Helper()
	lines := h.PasswdLines(t, user+":")
	if len(lines) != 1 {
		t.Fatalf("account %s on the host: %v", user, lines)
	}
	uid, err := strconv.Atoi(strings.Split(lines[0], ":")[2])
	if err != nil {
		t.Fatal(err)
	}
	return uid
}

// Processes lists the live processes (not zombies: dead, waiting for their
// parent to reap them) whose real or effective uid is uid, as "pid state
// command" lines.
func Processes(uid int) []string {
	out, _ := exec.Command("ps", "-e", "-o", "pid=,ruid=,euid=,stat=,args=").Output()
	var procs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || (f[1] != strconv.Itoa(uid) && f[2] != strconv.Itoa(uid)) || strings.HasPrefix(f[3], "Z") {
			continue
		}
		procs = append(procs, f[0]+" "+f[3]+" "+strings.Join(f[4:], " "))
	}
	return procs
}

// ProcessCount counts Processes(uid).
func ProcessCount(uid int) int { return len(Processes(uid)) }

// String describes the host for logs.
func (h *Host) String() string { return fmt.Sprintf("%s:%d (%s)", h.Addr, h.Port, h.Fingerprint) }
