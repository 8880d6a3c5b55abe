// Package sshtest starts a real OpenSSH server on loopback as a stand-in GPU
// host for tests: its own host key, its own configuration, and an
// nvidia-smi script on its PATH printing output recorded on real machines.
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
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// GPU outputs of `nvidia-smi --query-gpu=name,memory.total,driver_version
// --format=csv,noheader` and of the plain `nvidia-smi` header.
type GPU struct {
	Query  string
	Header string
}

// RTXA5000 was recorded on an RTX A5000 node with driver 570.211.01:
// github.com/akash-network/provider-configs issue #82 (query line; that
// report also asked for pci.device_id, the fourth column is dropped here).
// The header line for the same driver ("CUDA Version: 12.8") is the one
// nvidia-smi 570.211.01 prints, as recorded in many public reports.
var RTXA5000 = GPU{
	Query: "NVIDIA RTX A5000, 24564 MiB, 570.211.01\n",
	Header: "+-----------------------------------------------------------------------------------------+\n" +
		"| NVIDIA-SMI 570.211.01             Driver Version: 570.211.01     CUDA Version: 12.8     |\n" +
		"|-----------------------------------------+------------------------+----------------------+\n",
}

// QuadroRTX4000x2 is a two-GPU Quadro RTX 4000 node with driver 535.129.03
// (CUDA 12.2): github.com/akash-network/provider-configs pull request #12,
// whose nvidia-smi table shows "Quadro RTX 4000", 8192MiB per card; the
// CSV lines are that table in the query's format.
var QuadroRTX4000x2 = GPU{
	Query: "Quadro RTX 4000, 8192 MiB, 535.129.03\nQuadro RTX 4000, 8192 MiB, 535.129.03\n",
	Header: "+---------------------------------------------------------------------------------------+\n" +
		"| NVIDIA-SMI 535.129.03             Driver Version: 535.129.03   CUDA Version: 12.2     |\n" +
		"|-----------------------------------------+----------------------+----------------------+\n",
}

// Host is a running stand-in host.
type Host struct {
	Addr        string
	Port        int
	Fingerprint string // of its host key, SHA256:...
	KeyType     string
	Admin       ssh.Signer // logs in as root
	Dir         string
	cmd         *exec.Cmd
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
	must(os.MkdirAll(filepath.Join(dir, "admin_keys"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "admin_keys", "root"), ssh.MarshalAuthorizedKey(admin.PublicKey()), 0o600))

	bin := filepath.Join(dir, "bin")
	must(os.MkdirAll(bin, 0o755))
	smi := "#!/bin/sh\n# Stand-in nvidia-smi: output recorded on real machines (see package sshtest).\n" +
		"case \"$*\" in\n" +
		"*--query-gpu=name,memory.total,driver_version*--format=csv,noheader*)\ncat <<'KD_EOF'\n" + gpu.Query + "KD_EOF\n;;\n" +
		"'')\ncat <<'KD_EOF'\n" + gpu.Header + "KD_EOF\n;;\n" +
		"*) echo \"stand-in nvidia-smi: unsupported arguments: $*\" >&2; exit 2 ;;\nesac\n"
	must(os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(smi), 0o755))

	port := freePort(t)
	cfg := strings.Join([]string{
		"HostKey " + filepath.Join(dir, "ssh_host_ed25519_key"),
		"PidFile " + filepath.Join(dir, "sshd.pid"),
		"AuthorizedKeysFile .ssh/authorized_keys " + filepath.Join(dir, "admin_keys", "%u"),
		// The admin key file sits under /tmp (world-writable): not a real host.
		"StrictModes no",
		"PermitRootLogin prohibit-password",
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"UsePAM no",
		"MaxStartups 50",
		"LogLevel ERROR",
		"SetEnv PATH=" + bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	}, "\n") + "\n"
	cfgPath := filepath.Join(dir, "sshd_config")
	must(os.WriteFile(cfgPath, []byte(cfg), 0o600))

	cmd := exec.Command(sshd, "-D", "-e", "-p", strconv.Itoa(port), "-f", cfgPath, "-o", "ListenAddress=127.0.0.1")
	logf, err := os.Create(filepath.Join(dir, "sshd.log"))
	must(err)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(cmd.Start())
	h := &Host{Addr: "127.0.0.1", Port: port, Fingerprint: ssh.FingerprintSHA256(hostKey.PublicKey()),
		KeyType: hostKey.PublicKey().Type(), Admin: admin, Dir: dir, cmd: cmd}
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

// Stop stops the server.
func (h *Host) Stop() {
	if h.cmd != nil && h.cmd.Process != nil {
		_ = h.cmd.Process.Kill()
		_ = h.cmd.Wait()
		h.cmd = nil
	}
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

// PasswdLines returns the /etc/passwd lines of accounts whose name starts
// with prefix.
func PasswdLines(t testing.TB, prefix string) []string {
	t.Helper()
	f, err := os.Open("/etc/passwd")
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

// RemoveAccounts deletes every account whose name starts with prefix, with
// its home and processes: the tests leave this machine as they found it.
func RemoveAccounts(t testing.TB, prefix string) {
	t.Helper()
	if len(prefix) < 3 {
		t.Fatalf("refusing to remove accounts with the short prefix %q", prefix)
	}
	for _, line := range PasswdLines(t, prefix) {
		name, _, _ := strings.Cut(line, ":")
		_ = exec.Command("pkill", "-KILL", "-u", name).Run()
		if out, err := exec.Command("userdel", "--remove", name).CombinedOutput(); err != nil {
			t.Logf("userdel %s: %v %s", name, err, out)
		}
		_ = os.RemoveAll(filepath.Join("/home", name))
	}
}

// ProcessCount counts the processes of user (0 if the account is gone).
func ProcessCount(user string) int {
	out, err := exec.Command("pgrep", "-c", "-u", user).Output()
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

// String describes the host for logs.
func (h *Host) String() string { return fmt.Sprintf("%s:%d (%s)", h.Addr, h.Port, h.Fingerprint) }
