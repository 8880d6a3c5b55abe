package sshhost_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kernodeck/kernodeck/provision/sshhost"
	"github.com/kernodeck/kernodeck/provision/sshhost/sshtest"
)

// ipcOf lists the host's SysV IPC objects (read from its own IPC namespace
// through the admin login) whose owner or creator uid is in [lo, hi], as
// "kind id uid cuid".
func ipcOf(t *testing.T, h *sshtest.Host, lo, hi int) []string {
	t.Helper()
	out, err := h.AdminRun(`for k in shm msg sem; do awk -v k=$k 'NR == 1 {for (i = 1; i <= NF; i++) c[$i] = i; next} {print k, $2, $c["uid"], $c["cuid"]}' /proc/sysvipc/$k; done`)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		u, _ := strconv.Atoi(f[2])
		c, _ := strconv.Atoi(f[3])
		if (u >= lo && u <= hi) || (c >= lo && c <= hi) {
			found = append(found, line)
		}
	}
	return found
}

// rangeProcesses lists the live processes of uids lo..hi.
func rangeProcesses(lo, hi int) []string {
	var procs []string
	for u := lo; u <= hi; u++ {
		procs = append(procs, sshtest.Processes(u)...)
	}
	return procs
}

// hostFilesOf lists the files of uid or of the range [lo, lo+n) in the
// places of the host a customer can write.
func hostFilesOf(t *testing.T, h *sshtest.Host, uid, lo, n int) []string {
	t.Helper()
	var found []string
	for _, dir := range []string{"/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run", "/var/crash", "/home",
		"/var/lib/kernodeck", "/var/spool/cron", "/var/mail"} {
		for _, u := range []int{uid, lo, lo + 999, lo + n - 1} {
			found = append(found, filesOf(t, u, h.Path(dir))...)
		}
	}
	return found
}

// A customer with a shell leaves something of theirs everywhere they can
// write: processes of their uid and, where newuidmap lets them, of a
// subordinate uid (one holding a GPU device node); files in /tmp (with a
// 1777 directory of their own), /var/tmp, /dev/shm, /run/lock, /var/crash;
// a POSIX message queue; SysV shared memory, a semaphore set and a message
// queue; a lingering-user record; and their home given to a subordinate
// uid. The account itself is made without subordinate ids (the range here
// is granted afterwards, as another tool could, and used). After the
// release nothing of the uid or the range is left, the host is back in
// service with the home's chown recorded as the customer's doing and the
// GPU reset's outcome recorded, and the next customer gets a new uid and
// finds nothing of the previous one.
func TestReleaseLeavesNothingOfTheCustomer(t *testing.T) {
	sshtest.RequireRoot(t)
	if _, err := os.Stat("/usr/bin/newuidmap"); err != nil {
		t.Skip("newuidmap missing (apt-get install -y uidmap, or scripts/ensure-tools.sh)")
	}
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000, sshtest.Options{GPUNodes: []string{"/dev/nvidia0", "/dev/nvidiactl"}})
	f.addHost("gpu-leftovers", h, h.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, h, t)
	signer, pub := customerKey(t)
	ref := f.order("rtx-a5000", 1, "python", pub)
	user, _ := d.UnixUser(ref)
	f.provision(d, ref, "rtx-a5000", 1, "python")
	uid := h.UID(t, user)
	sub := h.SubUIDMin

	// The account has no subordinate ids: newuidmap maps nothing for it.
	for _, file := range []string{"/etc/subuid", "/etc/subgid"} {
		raw, err := os.ReadFile(h.Path(file))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), user+":") || strings.Contains(string(raw), strconv.Itoa(uid)+":") {
			t.Fatalf("%s gives %s a range:\n%s", file, user, raw)
		}
	}
	if out, err := h.Run(user, signer, "unshare --map-auto --map-root-user true"); err == nil {
		t.Fatalf("the customer maps subordinate ids without a range: %q", out)
	}

	// A range granted anyway (another tool, an older useradd), then used.
	if _, err := h.AdminRun(fmt.Sprintf("echo %s:%d:%d >>/etc/subuid && echo %s:%d:%d >>/etc/subgid",
		user, sub, h.SubUIDCount, user, sub, h.SubUIDCount)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.AdminRun("mkdir -p /var/lib/systemd/linger && touch /var/lib/systemd/linger/" + user); err != nil {
		t.Fatal(err)
	}
	hostile := `set -e
cd
echo x >/tmp/kd-a && echo x >/var/tmp/kd-a && echo x >/dev/shm/kd-a && echo x >/var/crash/kd-a
umask 077 && echo secret >/run/lock/kd-a && umask 022
mkdir -m 1777 /tmp/ray && echo x >/tmp/ray/session
python3 -c 'import ctypes; l = ctypes.CDLL("libc.so.6", use_errno=True); l.mq_open.restype = ctypes.c_int
fd = l.mq_open(b"/kd-queue", 0o100 | 0o2, 0o600, None)
assert fd >= 0, ctypes.get_errno()'
ipcmk -M 4096 >/dev/null && ipcmk -S 1 >/dev/null && ipcmk -Q >/dev/null
setsid sh -c 'trap "" HUP TERM; exec sleep 3600' </dev/null >/dev/null 2>&1 &
# In a user namespace: inner uid 1 is the range's first uid, 1000 is sub+999.
unshare --map-auto --map-root-user sh -c '
	setpriv --reuid=1000 --regid=1000 --clear-groups sh -c "echo x >/tmp/kd-sub && echo x >/dev/shm/kd-sub && mkdir -m 1777 /tmp/kd-subdir"
	setpriv --reuid=1000 --regid=1000 --clear-groups setsid sh -c "exec sleep 3600" </dev/nvidia0 >/dev/null 2>&1 &
	chown 1:1 "$HOME"
' </dev/null >/dev/null 2>&1
echo hostile-ready
`
	if out, err := h.Run(user, signer, hostile); err != nil || !strings.Contains(out, "hostile-ready") {
		t.Fatalf("hostile session: %v %s", err, out)
	}
	waitFor(t, "processes of the customer and of the range", func() bool {
		return sshtest.ProcessCount(uid) > 0 && sshtest.ProcessCount(sub+999) > 0
	})
	for _, p := range []string{"/tmp/kd-a", "/tmp/ray/session", "/var/tmp/kd-a", "/dev/shm/kd-a", "/run/lock/kd-a",
		"/var/crash/kd-a", "/dev/mqueue/kd-queue", "/tmp/kd-sub", "/dev/shm/kd-sub", "/tmp/kd-subdir"} {
		if _, err := os.Lstat(h.Path(p)); err != nil {
			t.Fatalf("the customer's %s: %v", p, err)
		}
	}
	if st, err := os.Stat(h.Path("/home/" + user)); err != nil || st.Sys().(*syscall.Stat_t).Uid != uint32(sub) {
		t.Fatalf("home not given to the range: %v", err)
	}
	if objs := ipcOf(t, h, uid, uid); len(objs) != 3 {
		t.Fatalf("the customer's SysV IPC objects: %v", objs)
	}

	if err := d.RevokeAccess(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, ref); err != nil {
		t.Fatal(err)
	}

	if p := append(sshtest.Processes(uid), rangeProcesses(sub, sub+h.SubUIDCount-1)...); len(p) != 0 {
		t.Errorf("processes left: %v", p)
	}
	if left := hostFilesOf(t, h, uid, sub, h.SubUIDCount); len(left) != 0 {
		t.Errorf("files left: %v", left)
	}
	for _, p := range []string{"/tmp/ray", "/tmp/kd-subdir", "/dev/mqueue/kd-queue", "/run/lock/kd-a", "/home/" + user,
		"/var/lib/systemd/linger/" + user} {
		if _, err := os.Lstat(h.Path(p)); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", p, err)
		}
	}
	if objs := ipcOf(t, h, uid, uid); len(objs) != 0 {
		t.Errorf("SysV IPC objects left: %v", objs)
	}
	var state, note string
	var reset, flag *string
	if err := f.db.QueryRow(`SELECT h.state, h.note, h.gpu_reset, r.customer_flag FROM gpu_hosts h
		JOIN host_reservations r ON r.host_id = h.id WHERE h.name = 'gpu-leftovers' AND r.order_ref = $1`, ref).
		Scan(&state, &note, &reset, &flag); err != nil {
		t.Fatal(err)
	}
	if state != sshhost.StateAvailable {
		t.Errorf("host %s: %s", state, note)
	}
	// The range granted after prepare is on the driver's record too.
	var subIDs string
	_ = f.db.Get(&subIDs, `SELECT sub_ids FROM host_reservations WHERE order_ref = $1`, ref)
	if !strings.Contains(subIDs, fmt.Sprintf("%d:%d", sub, h.SubUIDCount)) {
		t.Errorf("sub_ids recorded: %q", subIDs)
	}
	if flag == nil || !strings.Contains(*flag, "/home/"+user) || !strings.Contains(note, ref) {
		t.Errorf("the home's chown is not recorded as the customer's doing: flag %v, note %q", flag, note)
	}
	if reset == nil || !strings.Contains(*reset, "nvidia-smi --gpu-reset") {
		t.Fatalf("GPU reset outcome: %v", reset)
	}
	t.Logf("host note: %s; GPU reset: %s", note, *reset)

	// The next customer: another uid, above the previous one, no range,
	// nothing of the previous customer anywhere they can look.
	signer2, pub2 := customerKey(t)
	ref2 := f.order("rtx-a5000", 1, "python", pub2)
	user2, _ := d.UnixUser(ref2)
	f.provision(d, ref2, "rtx-a5000", 1, "python")
	uid2 := h.UID(t, user2)
	if uid2 <= uid {
		t.Errorf("next customer's uid %d, previous %d: a uid must never be given again", uid2, uid)
	}
	out, err := h.Run(user2, signer2, "ls -A /tmp /var/tmp /dev/shm /run/lock /var/crash /dev/mqueue; ipcs -m -s -q | grep -c '^0x' || true; "+
		"grep -c "+user2+" /etc/subuid /etc/subgid || true")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kd-a", "ray", "kd-sub", "kd-queue"} {
		if strings.Contains(out, name) {
			t.Errorf("the next customer sees %s:\n%s", name, out)
		}
	}
	if !strings.Contains(out, "\n0\n") || !strings.Contains(out, "/etc/subuid:0") || !strings.Contains(out, "/etc/subgid:0") {
		t.Errorf("the next customer sees IPC objects or has a range:\n%s", out)
	}
}

// What the release cannot clean keeps the host out until it is clean:
// `hosts repair` (Driver.RepairHost) runs the release check again and
// refuses while a file of the old account is left; once an operator
// removed it, the repair passes and the host is available.
func TestRepairRefusesWhileSomethingRemains(t *testing.T) {
	sshtest.RequireRoot(t)
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000)
	f.addHost("gpu-repair", h, h.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, h, t)
	ref := f.order("rtx-a5000", 1, "python", "")
	user, _ := d.UnixUser(ref)
	f.provision(d, ref, "rtx-a5000", 1, "python")
	// A daemon wrote a file for the customer where only root may write.
	if _, err := h.AdminRun("install -d -m 755 /var/tmp/kd-daemon && touch /var/tmp/kd-daemon/core && chown " + user + " /var/tmp/kd-daemon/core"); err != nil {
		t.Fatal(err)
	}
	if err := d.RevokeAccess(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if st := f.hostState("gpu-repair"); st != sshhost.StateBroken {
		t.Fatalf("host %s after a dirty release", st)
	}
	for i := 0; i < 2; i++ {
		err := d.RepairHost(ctx, "gpu-repair", "checked")
		if !errors.Is(err, sshhost.ErrHostDirty) || !strings.Contains(err.Error(), "/var/tmp/kd-daemon/core") {
			t.Fatalf("repair of a dirty host: %v", err)
		}
		var state, note string
		_ = f.db.QueryRow(`SELECT state, note FROM gpu_hosts WHERE name = 'gpu-repair'`).Scan(&state, &note)
		if state != sshhost.StateBroken || !strings.Contains(note, "réparation refusée") {
			t.Fatalf("host %s, note %q after a refused repair", state, note)
		}
		t.Logf("refused: %v", err)
	}
	if _, err := h.AdminRun("rm -r /var/tmp/kd-daemon"); err != nil {
		t.Fatal(err)
	}
	if err := d.RepairHost(ctx, "gpu-repair", "core file removed"); err != nil {
		t.Fatalf("repair of a clean host: %v", err)
	}
	var state, note string
	_ = f.db.QueryRow(`SELECT state, note FROM gpu_hosts WHERE name = 'gpu-repair'`).Scan(&state, &note)
	if state != sshhost.StateAvailable || note != "core file removed" {
		t.Fatalf("host %s, note %q after the repair", state, note)
	}
	// Checked clean: the next repair has nothing of that account to check.
	var unchecked int
	_ = f.db.Get(&unchecked, `SELECT count(*) FROM host_reservations WHERE order_ref = $1 AND cleaned_at IS NULL`, ref)
	if unchecked != 0 {
		t.Fatalf("reservation not marked clean")
	}
}

// helperSpy stands for a process of the customer's uid that survived long
// enough to see the teardown's helpers run as that uid: as the same uid
// may, it opens their standard input, output and error through /proc and
// writes forged protocol lines into the outputs. It records where each
// descriptor led.
type helperSpy struct {
	uid  int
	mu   sync.Mutex
	seen map[int][3]string
}

func (s *helperSpy) run(stop <-chan struct{}) {
	forged := []byte("KD_STEP forged-by-customer\nKD_TEARDOWN_OK\nKD_PREPARE_OK\n")
	for {
		select {
		case <-stop:
			return
		default:
		}
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			var st syscall.Stat_t
			if syscall.Stat("/proc/"+e.Name(), &st) != nil || int(st.Uid) != s.uid {
				continue
			}
			s.mu.Lock()
			_, done := s.seen[pid]
			s.mu.Unlock()
			if done {
				continue
			}
			var fds [3]string
			for i := range fds {
				fds[i], _ = os.Readlink(filepath.Join("/proc", e.Name(), "fd", strconv.Itoa(i)))
			}
			comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
			switch strings.TrimSpace(string(comm)) {
			case "setpriv", "find", "chmod", "kill", "rm", "bash":
			default:
				continue // the customer's own processes
			}
			if fds[0] == "" || fds[1] == "" || fds[2] == "" {
				continue // exiting, or not started yet
			}
			for _, i := range []int{1, 2} {
				if w, err := os.OpenFile(filepath.Join("/proc", e.Name(), "fd", strconv.Itoa(i)), os.O_WRONLY, 0); err == nil {
					_, _ = w.Write(forged)
					_ = w.Close()
				}
			}
			s.mu.Lock()
			s.seen[pid] = fds
			s.mu.Unlock()
		}
	}
}

// Nothing a process of the customer's uid prints can be read as the
// script's own output: the teardown's helpers run as the customer get
// /dev/null as input and never the script's output, so lines a customer
// process forges into them (KD_STEP, KD_TEARDOWN_OK) never reach the
// driver, and a dirty host stays dirty.
func TestCustomerCannotForgeTeardownOutput(t *testing.T) {
	sshtest.RequireRoot(t)
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000)
	f.addHost("gpu-forge", h, h.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, h, t)
	var stepsMu sync.Mutex
	var steps []string
	d.OnStep = func(_, step string) {
		stepsMu.Lock()
		steps = append(steps, step)
		stepsMu.Unlock()
	}
	signer, pub := customerKey(t)
	ref := f.order("rtx-a5000", 1, "python", pub)
	user, _ := d.UnixUser(ref)
	f.provision(d, ref, "rtx-a5000", 1, "python")
	uid := h.UID(t, user)
	// Many files, so the helpers deleting them as the customer live long
	// enough to be seen; a file only root could remove makes the host dirty.
	if _, err := h.Run(user, signer, "set -e; mkdir -p ~/many; cd ~/many; seq 1 4000 | xargs touch\n"+
		"setsid sh -c 'exec sleep 3600' </dev/null >/dev/null 2>&1 &\necho started"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.AdminRun("install -d -m 755 /var/tmp/kd-daemon && touch /var/tmp/kd-daemon/core && chown " + user + " /var/tmp/kd-daemon/core"); err != nil {
		t.Fatal(err)
	}
	spy := &helperSpy{uid: uid, seen: map[int][3]string{}}
	stop := make(chan struct{})
	spyDone := make(chan struct{})
	go func() { spy.run(stop); close(spyDone) }()
	errRevoke := d.RevokeAccess(ctx, ref)
	errRelease := d.Release(ctx, ref)
	close(stop)
	<-spyDone
	if errRevoke != nil || errRelease != nil {
		t.Fatalf("revoke %v, release %v", errRevoke, errRelease)
	}
	if st := f.hostState("gpu-forge"); st != sshhost.StateBroken {
		t.Errorf("a dirty host is %s", st)
	}
	stepsMu.Lock()
	defer stepsMu.Unlock()
	for _, s := range steps {
		if s == "forged-by-customer" {
			t.Errorf("a line forged by a customer process reached the driver (steps %v)", steps)
			break
		}
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	helpers := 0
	for pid, fds := range spy.seen {
		helpers++
		for i, fd := range fds {
			if fd != "/dev/null" {
				t.Errorf("helper %d run as the customer has descriptor %d on %s (want /dev/null)", pid, i, fd)
			}
		}
	}
	if helpers == 0 {
		t.Fatalf("no helper run as the customer was seen (%d processes)", len(spy.seen))
	}
	t.Logf("%d helpers seen as uid %d, all on /dev/null", helpers, uid)
}

// On an AMD host the account joins the groups the GPU device nodes need
// (render, video): the customer opens /dev/kfd and the render node, which
// belong to group render, mode 0660. On an NVIDIA host it joins none.
func TestAccountGetsTheGPUGroupsItNeeds(t *testing.T) {
	sshtest.RequireRoot(t)
	f := newFixture(t)
	admin := sshtest.Options{AdminKeyPEM: sshtest.NewKeyPEM(t)}
	amd := admin
	amd.GPUNodes = []string{"/dev/kfd", "/dev/dri/renderD128"}
	h := sshtest.Start(t, sshtest.MI210x2, amd)
	f.addHost("gpu-mi210-groups", h, h.Fingerprint, "mi210", 2)
	d := driver(f.db, h, t)
	signer, pub := customerKey(t)
	ref := f.order("mi210", 2, "python", pub)
	user, _ := d.UnixUser(ref)
	f.provision(d, ref, "mi210", 2, "python")
	out, err := h.Run(user, signer, "id -nG; head -c 0 /dev/kfd && head -c 0 /dev/dri/renderD128 && echo opened")
	if err != nil || !strings.Contains(out, "render") || !strings.Contains(out, "video") || !strings.Contains(out, "opened") {
		t.Fatalf("AMD customer: %v %q", err, out)
	}

	nv := admin
	nv.GPUNodes = []string{"/dev/nvidia0", "/dev/nvidiactl"}
	h2 := sshtest.Start(t, sshtest.RTXA5000, nv)
	f.addHost("gpu-a5000-groups", h2, h2.Fingerprint, "rtx-a5000", 1)
	d2 := driver(f.db, h2, t)
	ref2 := f.order("rtx-a5000", 1, "python", pub)
	user2, _ := d2.UnixUser(ref2)
	f.provision(d2, ref2, "rtx-a5000", 1, "python")
	out, err = h2.Run(user2, signer, "id -nG; head -c 0 /dev/nvidia0 && echo opened")
	if err != nil || strings.TrimSpace(out) != user2+"\nopened" {
		t.Fatalf("NVIDIA customer: %v %q", err, out)
	}
}

// A GPU device node held open by another non-system account (a process the
// customer's teardown does not touch: not theirs) keeps the host out: the
// release marks it broken, says who holds the GPU and tries no reset; the
// repair refuses until that process is gone, then passes.
func TestGPUHeldByAnotherAccountKeepsTheHostOut(t *testing.T) {
	sshtest.RequireRoot(t)
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000, sshtest.Options{GPUNodes: []string{"/dev/nvidia0", "/dev/nvidiactl"}})
	f.addHost("gpu-held-node", h, h.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, h, t)
	ref := f.order("rtx-a5000", 1, "python", "")
	f.provision(d, ref, "rtx-a5000", 1, "python")
	other := h.UIDMax // a uid of the host's account range, no account of this order
	if _, err := h.AdminRun(fmt.Sprintf("setpriv --reuid=%d --regid=%d --clear-groups setsid sh -c 'exec sleep 3600' </dev/nvidia0 >/dev/null 2>&1 &", other, other)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other account's process", func() bool { return sshtest.ProcessCount(other) == 1 })
	if err := d.RevokeAccess(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, ref); err != nil {
		t.Fatal(err)
	}
	var state, note string
	var reset *string
	_ = f.db.QueryRow(`SELECT state, note, gpu_reset FROM gpu_hosts WHERE name = 'gpu-held-node'`).Scan(&state, &note, &reset)
	if state != sshhost.StateBroken || !strings.Contains(note, "GPU encore ouverts par") || !strings.Contains(note, strconv.Itoa(other)) || reset != nil {
		t.Fatalf("host %s, note %q, reset %v", state, note, reset)
	}
	// Not the customer's: the teardown left it alone.
	if n := sshtest.ProcessCount(other); n != 1 {
		t.Fatalf("the other account's process was killed by the customer's teardown (%d left)", n)
	}
	if err := d.RepairHost(ctx, "gpu-held-node", ""); !errors.Is(err, sshhost.ErrHostDirty) {
		t.Fatalf("repair while the GPU is held: %v", err)
	}
	if _, err := h.AdminRun(fmt.Sprintf("pkill -KILL -U %d", other)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other account's process to end", func() bool { return sshtest.ProcessCount(other) == 0 })
	if err := d.RepairHost(ctx, "gpu-held-node", "GPU released"); err != nil {
		t.Fatalf("repair once the GPU is free: %v", err)
	}
	_ = f.db.QueryRow(`SELECT state, gpu_reset FROM gpu_hosts WHERE name = 'gpu-held-node'`).Scan(&state, &reset)
	if state != sshhost.StateAvailable || reset == nil {
		t.Fatalf("host %s, reset %v after the repair", state, reset)
	}
}
