package sshhost_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/provision/sshhost"
	"github.com/kernodeck/kernodeck/provision/sshhost/sshtest"
)

// keyUsers reads /proc/key-users: the uids that own keys in the kernel, each
// with its line. The stand-in hosts share this machine's kernel (and user
// namespace), so their customers' keys show here.
// charged reports whether a /proc/key-users line ("uid: usage n/ni
// qnkeys/maxkeys qnbytes/maxbytes") has keys or bytes charged to its uid.
func charged(line string) bool {
	f := strings.Fields(line)
	if len(f) < 5 {
		return true
	}
	keys, _, _ := strings.Cut(f[3], "/")
	bytes, _, _ := strings.Cut(f[4], "/")
	return keys != "0" || bytes != "0"
}

func keyUsers(t *testing.T) map[int]string {
	t.Helper()
	raw, err := os.ReadFile("/proc/key-users")
	if err != nil {
		t.Fatal(err)
	}
	users := map[int]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		u, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		if n, err := strconv.Atoi(u); ok && err == nil {
			users[n] = strings.TrimSpace(line)
		}
	}
	return users
}

// customerKeys is run by the customer (python3, no keyutils here): a key in
// their user keyring, one there only its possessor may see or touch, and
// one in their persistent keyring, all left behind. The system calls are
// x86_64's (add_key 248, keyctl 250).
const customerKeys = `python3 - <<'PY'
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *a):
    r = libc.syscall(ctypes.c_long(nr), *a)
    assert r >= 0, ctypes.get_errno()
    return r
def add(desc, ring):
    data = b"left for the next customer"
    return sc(248, b"user", desc, data, ctypes.c_size_t(len(data)), ctypes.c_long(ring))
USER = -4
add(b"kd-secret", USER)
hidden = add(b"kd-hidden", USER)
sc(250, ctypes.c_long(5), ctypes.c_long(hidden), ctypes.c_long(0x3f000000))  # KEYCTL_SETPERM: possessor only
persistent = sc(250, ctypes.c_long(22), ctypes.c_long(-1), ctypes.c_long(USER))  # KEYCTL_GET_PERSISTENT
add(b"kd-persistent", persistent)
print("keys-added")
PY`

// dropKeys clears what a failed test left in the kernel for uid (its user,
// user-session and persistent keyrings, cleared then invalidated), so no
// later test finds keys of a uid it gives again.
func dropKeys(uid int) {
	py := `import ctypes
libc = ctypes.CDLL(None, use_errno=True)
k = lambda *a: libc.syscall(ctypes.c_long(250), *[ctypes.c_long(x) for x in a])
k(1, 0)
rings = [r for r in (k(0, -4, 1), k(0, -5, 1), k(22, -1, -3)) if r > 0]
for r in rings:
    k(7, r)
    k(21, r)
`
	_ = exec.Command("setpriv", "--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(uid), "--clear-groups",
		"/usr/bin/python3", "-I", "-c", py).Run()
}

// Kernel keys outlive the customer's processes: the user keyring of a uid,
// its persistent keyring and what is linked in them stay in the kernel
// until reboot. The customer adds keys (one they hid from themselves as a
// non-possessor, one in their persistent keyring); after the release
// /proc/key-users has no line for their uid, and the host is back in
// service.
func TestReleaseClearsTheCustomersKernelKeys(t *testing.T) {
	sshtest.RequireRoot(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("the customer's helper calls add_key and keyctl by their x86_64 numbers")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 missing: the customer's helper and the teardown's call keyctl through it")
	}
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000)
	f.addHost("gpu-keys", h, h.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, h, t)
	signer, ref, user := f.rental(d, "rtx-a5000", 1, "python")
	uid := h.UID(t, user)
	t.Cleanup(func() { dropKeys(uid) })
	if out, err := h.Run(user, signer, customerKeys); err != nil || !strings.Contains(out, "keys-added") {
		t.Fatalf("the customer's keys: %v %s", err, out)
	}
	before, ok := keyUsers(t)[uid]
	if !ok {
		t.Fatalf("no key of uid %d in /proc/key-users", uid)
	}
	t.Logf("before the release: %s", before)

	if err := d.RevokeAccess(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, ref); err != nil {
		t.Fatal(err)
	}
	// The teardown waits for the kernel to collect them; a little more here.
	// None of the customer's keys may stay (nothing charged to the uid);
	// the uid's own persistent keyring, emptied and invalidated, may wait
	// for the kernel's collector on a loaded machine.
	deadline := time.Now().Add(3 * time.Second)
	left, ok := keyUsers(t)[uid]
	for ok && charged(left) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		left, ok = keyUsers(t)[uid]
	}
	if ok && charged(left) {
		t.Errorf("keys of uid %d left in the kernel: %s", uid, left)
	}
	var state, note string
	_ = f.db.QueryRow(`SELECT state, note FROM gpu_hosts WHERE name = 'gpu-keys'`).Scan(&state, &note)
	if state != sshhost.StateAvailable {
		t.Errorf("host %s after the release: %s", state, note)
	}
}

// A world-writable directory made after prepare (a daemon's cache on a
// filesystem of the host, a filesystem mounted since with a world-writable
// root) is found by the teardown's own scan: the customer's setuid binary
// and file there are removed, the host's directories stay, and the next
// customer finds nothing. A file of the customer's there that only root
// could remove (in a root-owned directory) is found by the end check: the
// host is set aside with its path.
func TestReleaseFindsWorldWritableDirectoriesMadeAfterPrepare(t *testing.T) {
	sshtest.RequireRoot(t)
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000)
	f.addHost("gpu-late-dirs", h, h.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, h, t)
	signer, ref, user := f.rental(d, "rtx-a5000", 1, "python")
	uid := h.UID(t, user)
	// /opt and /var are the stand-in's own (overlays): nothing lands on
	// this machine's filesystems.
	const cache, mounted = "/opt/kd-cache", "/var/kd-scratch-fs"
	if _, err := h.AdminRun(fmt.Sprintf("install -d -m 1777 %s && mkdir %s && mount -t tmpfs -o mode=1777 kd-late %s",
		cache, mounted, mounted)); err != nil {
		t.Fatal(err)
	}
	if out, err := h.Run(user, signer, fmt.Sprintf("set -e; cp /bin/true %[1]s/tool; chmod 4755 %[1]s/tool; echo x >%[2]s/data; "+
		"mkdir %[2]s/sub; echo x >%[2]s/sub/more; echo ready", cache, mounted)); err != nil || !strings.Contains(out, "ready") {
		t.Fatalf("the customer's files: %v %s", err, out)
	}
	if st, err := os.Stat(h.Path(cache + "/tool")); err != nil || st.Mode()&os.ModeSetuid == 0 {
		t.Fatalf("the customer's setuid binary: %v", err)
	}
	if err := d.RevokeAccess(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, ref); err != nil {
		t.Fatal(err)
	}
	t.Run("the customer's files removed", func(t *testing.T) {
		for _, dir := range []string{cache, mounted} {
			if left := filesOf(t, uid, h.Path(dir)); len(left) != 0 {
				t.Errorf("files of uid %d left: %v", uid, left)
			}
			if st, err := os.Stat(h.Path(dir)); err != nil || st.Mode()&os.ModePerm != 0o777 || st.Mode()&os.ModeSticky == 0 {
				t.Errorf("the host's own %s: %v %v", dir, st, err)
			}
		}
		if st := f.hostState("gpu-late-dirs"); st != sshhost.StateAvailable {
			t.Errorf("host %s after the release", st)
		}
	})
	if f.hostState("gpu-late-dirs") != sshhost.StateAvailable {
		return // no next customer on this host
	}

	signer2, ref2, user2 := f.rental(d, "rtx-a5000", 1, "python")
	t.Run("next customer finds nothing", func(t *testing.T) {
		out, err := h.Run(user2, signer2, "ls -A "+cache+" "+mounted)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"tool", "data", "sub"} {
			if strings.Contains(out, name) {
				t.Errorf("the next customer sees %s:\n%s", name, out)
			}
		}
	})
	t.Run("what only root could remove keeps the host out", func(t *testing.T) {
		// Made after prepare: a world-writable directory, where a daemon
		// writes a file for the customer in a directory of its own.
		const late = "/opt/kd-late"
		if _, err := h.AdminRun(fmt.Sprintf("install -d -m 1777 %[1]s && install -d -m 755 %[1]s/daemon && "+
			"touch %[1]s/daemon/core && chown %[2]s %[1]s/daemon/core", late, user2)); err != nil {
			t.Fatal(err)
		}
		if err := d.RevokeAccess(ctx, ref2); err != nil {
			t.Fatal(err)
		}
		if err := d.Release(ctx, ref2); err != nil {
			t.Fatal(err)
		}
		var state, note string
		_ = f.db.QueryRow(`SELECT state, note FROM gpu_hosts WHERE name = 'gpu-late-dirs'`).Scan(&state, &note)
		if state != sshhost.StateBroken || !strings.Contains(note, late+"/daemon/core") {
			t.Errorf("host %s, note %q: want broken, naming %s/daemon/core", state, note, late)
		}
	})
}
