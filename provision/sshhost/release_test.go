package sshhost_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kernodeck/kernodeck/domain"
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

// rangeProcesses lists the live processes (not zombies) whose real or
// effective uid is in lo..hi, as "pid ruid euid command" lines (one ps for
// the whole range).
func rangeProcesses(lo, hi int) []string {
	out, _ := exec.Command("ps", "-e", "-o", "pid=,ruid=,euid=,stat=,args=").Output()
	var procs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || strings.HasPrefix(f[3], "Z") {
			continue
		}
		r, _ := strconv.Atoi(f[1])
		e, _ := strconv.Atoi(f[2])
		if (r >= lo && r <= hi) || (e >= lo && e <= hi) {
			procs = append(procs, strings.Join(f[:3], " ")+" "+strings.Join(f[4:], " "))
		}
	}
	return procs
}

// A customer with a shell leaves something of theirs everywhere they can
// write, then the release runs the real teardown as root on the stand-in
// host (its own mount and IPC namespaces, newuidmap present). Each kind of
// leftover is checked by a subtest of its own, so a teardown that lost one
// fix fails that subtest by name (README.md, "Tests of provisioning and
// mail", lists which subtests failed when each fix was taken out):
//
//   - no subordinate ids: prepare gives the account no subuid/subgid range,
//     so newuidmap maps nothing for it;
//   - processes: a detached setsid process of the uid;
//   - subordinate range: a range granted anyway after prepare (as another
//     tool could) and used through newuidmap: processes (one holding a GPU
//     device node) and files (one a 1777 directory) of range uids;
//   - /tmp, /var/tmp, /dev/shm: files of the uid;
//   - /run/lock: a 0600 file of the uid;
//   - /dev/mqueue: a POSIX message queue;
//   - SysV IPC: a shared memory segment, a semaphore set, a message queue;
//   - /var/crash: a file of the uid;
//   - 1777 directory of the customer: /tmp/ray, mode 1777, holding a file
//     of a range uid (sticky: only that uid may delete it);
//   - 1777 directory of the host: a file in a world-writable directory of
//     the host outside the usual places (found by prepare's scan);
//   - lingering user unit: a systemd user unit in the home with linger
//     enabled. The stand-in runs no systemd or logind, so no user manager
//     starts: the test writes the linger record /var/lib/systemd/linger/USER
//     (what `loginctl enable-linger` writes) and the unit file, and checks
//     both are gone; the user manager itself would be a process of the uid
//     (the processes subtest);
//   - home given to the range: reported as the customer's doing on the
//     reservation and in the host's note, and the host goes back to the pool
//     without an operator;
//   - host back in service, with the GPU reset's outcome recorded;
//   - next customer: a new uid, above the previous one, and nothing of the
//     previous customer where they can look.
func TestReleaseLeavesNothingOfTheCustomer(t *testing.T) {
	sshtest.RequireRoot(t)
	if _, err := os.Stat("/usr/bin/newuidmap"); err != nil {
		t.Skip("newuidmap missing (apt-get install -y uidmap, or scripts/ensure-tools.sh)")
	}
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000, sshtest.Options{GPUNodes: []string{"/dev/nvidia0", "/dev/nvidiactl"}})
	f.addHost("gpu-leftovers", h, h.Fingerprint, "rtx-a5000", 1)
	// A world-writable directory of the host outside the usual places, as
	// a shared cache some images have (/opt is a filesystem of its own on
	// the stand-in host).
	const shared = "/opt/kd-shared"
	if _, err := h.AdminRun("install -d -m 1777 " + shared); err != nil {
		t.Fatal(err)
	}
	d := driver(f.db, h, t)
	signer, ref, user := f.rental(d, "rtx-a5000", 1, "python")
	uid := h.UID(t, user)
	sub, subN := h.SubUIDMin, h.SubUIDCount

	t.Run("no subordinate ids", func(t *testing.T) {
		for _, file := range []string{"/etc/subuid", "/etc/subgid"} {
			raw, err := os.ReadFile(h.Path(file))
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if strings.Contains(string(raw), user+":") || strings.Contains(string(raw), strconv.Itoa(uid)+":") {
				t.Errorf("%s gives %s a range:\n%s", file, user, raw)
			}
		}
		if out, err := h.Run(user, signer, "unshare --map-auto --map-root-user true"); err == nil {
			t.Errorf("the customer maps subordinate ids: %q", out)
		}
	})

	// A range granted anyway (another tool, an older useradd), then used;
	// linger enabled for the account.
	if _, err := h.AdminRun(fmt.Sprintf("sed -i '/^%[1]s:/d' /etc/subuid /etc/subgid && echo %[1]s:%[2]d:%[3]d >>/etc/subuid && echo %[1]s:%[2]d:%[3]d >>/etc/subgid && "+
		"mkdir -p /var/lib/systemd/linger && touch /var/lib/systemd/linger/%[1]s", user, sub, subN)); err != nil {
		t.Fatal(err)
	}
	hostile := strings.NewReplacer("SHARED", shared).Replace(`set -e
cd
echo x >/tmp/kd-a && echo x >/var/tmp/kd-a && echo x >/dev/shm/kd-a && echo x >/var/crash/kd-a && echo x >SHARED/kd-a
umask 077 && echo secret >/run/lock/kd-a && umask 022
mkdir -m 1777 /tmp/ray
mkdir -p .config/systemd/user/default.target.wants
printf '[Service]\nExecStart=/bin/sleep infinity\n[Install]\nWantedBy=default.target\n' >.config/systemd/user/kd-miner.service
ln -s ../kd-miner.service .config/systemd/user/default.target.wants/kd-miner.service
python3 -c 'import ctypes; l = ctypes.CDLL("libc.so.6", use_errno=True); l.mq_open.restype = ctypes.c_int
fd = l.mq_open(b"/kd-queue", 0o100 | 0o2, 0o600, None)
assert fd >= 0, ctypes.get_errno()'
ipcmk -M 4096 >/dev/null && ipcmk -S 1 >/dev/null && ipcmk -Q >/dev/null
setsid sh -c 'trap "" HUP TERM; exec sleep 3600' </dev/null >/dev/null 2>&1 &
# In a user namespace: inner uid 1 is the range's first uid, 1000 is sub+999.
unshare --map-auto --map-root-user sh -c '
	setpriv --reuid=1000 --regid=1000 --clear-groups sh -c "echo x >/tmp/kd-sub && echo x >/dev/shm/kd-sub && mkdir -m 1777 /tmp/kd-subdir && echo x >/tmp/ray/session"
	setpriv --reuid=1000 --regid=1000 --clear-groups setsid sh -c "exec sleep 3600" </dev/nvidia0 >/dev/null 2>&1 &
	chown 1:1 "$HOME"
' </dev/null >/dev/null 2>&1
echo hostile-ready
`)
	if out, err := h.Run(user, signer, hostile); err != nil || !strings.Contains(out, "hostile-ready") {
		t.Fatalf("hostile session: %v %s", err, out)
	}
	waitFor(t, "processes of the customer and of the range", func() bool {
		return sshtest.ProcessCount(uid) > 0 && sshtest.ProcessCount(sub+999) > 0
	})
	home := "/home/" + user
	linger := "/var/lib/systemd/linger/" + user
	unit := home + "/.config/systemd/user/kd-miner.service"
	for _, p := range []string{"/tmp/kd-a", "/tmp/ray/session", "/var/tmp/kd-a", "/dev/shm/kd-a", "/run/lock/kd-a",
		"/var/crash/kd-a", shared + "/kd-a", "/dev/mqueue/kd-queue", "/tmp/kd-sub", "/dev/shm/kd-sub", "/tmp/kd-subdir", linger, unit} {
		if _, err := os.Lstat(h.Path(p)); err != nil {
			t.Fatalf("the customer's %s: %v", p, err)
		}
	}
	if st, err := os.Stat(h.Path(home)); err != nil || st.Sys().(*syscall.Stat_t).Uid != uint32(sub) {
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

	// gone fails t for each path still on the host.
	gone := func(t *testing.T, paths ...string) {
		t.Helper()
		for _, p := range paths {
			if _, err := os.Lstat(h.Path(p)); !os.IsNotExist(err) {
				t.Errorf("%s left: %v", p, err)
			}
		}
	}
	// noFilesOf fails t for files of uid under each dir (skip: paths left
	// to another subtest).
	noFilesOf := func(t *testing.T, uid int, dirs []string, skip ...string) {
		t.Helper()
		for _, dir := range dirs {
			for _, p := range filesOf(t, uid, h.Path(dir)) {
				if !slices.ContainsFunc(skip, func(s string) bool { return strings.HasPrefix(p, h.Path(s)) }) {
					t.Errorf("file of uid %d left: %s", uid, p)
				}
			}
		}
	}
	everywhere := []string{"/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run", "/var/crash", "/home", shared,
		"/var/lib/kernodeck", "/var/spool/cron", "/var/mail"}
	var state, note string
	var reset, flag *string
	if err := f.db.QueryRow(`SELECT h.state, h.note, h.gpu_reset, r.customer_flag FROM gpu_hosts h
		JOIN host_reservations r ON r.host_id = h.id WHERE h.name = 'gpu-leftovers' AND r.order_ref = $1`, ref).
		Scan(&state, &note, &reset, &flag); err != nil {
		t.Fatal(err)
	}
	if reset != nil {
		t.Logf("host %s, note: %s; GPU reset: %s", state, note, *reset)
	}

	t.Run("processes", func(t *testing.T) {
		if p := sshtest.Processes(uid); len(p) != 0 {
			t.Errorf("processes of uid %d left: %v", uid, p)
		}
	})
	t.Run("subordinate range", func(t *testing.T) {
		if p := rangeProcesses(sub, sub+subN-1); len(p) != 0 {
			t.Errorf("processes of the range left: %v", p)
		}
		for _, u := range []int{sub, sub + 999, sub + subN - 1} {
			noFilesOf(t, u, everywhere)
		}
		gone(t, "/tmp/kd-sub", "/dev/shm/kd-sub", "/tmp/kd-subdir")
		// The range granted after prepare is on the driver's record too.
		var subIDs string
		_ = f.db.Get(&subIDs, `SELECT sub_ids FROM host_reservations WHERE order_ref = $1`, ref)
		if !strings.Contains(subIDs, fmt.Sprintf("%d:%d", sub, subN)) {
			t.Errorf("sub_ids recorded: %q", subIDs)
		}
	})
	t.Run("/tmp /var/tmp /dev/shm", func(t *testing.T) {
		gone(t, "/tmp/kd-a", "/var/tmp/kd-a", "/dev/shm/kd-a")
		// h.Dir holds the stand-in's own overlays (their upper layers
		// show the host's /etc, /var and /opt files again): not a place of
		// the host's.
		noFilesOf(t, uid, []string{"/tmp", "/var/tmp", "/dev/shm"}, "/tmp/ray", h.Dir)
	})
	t.Run("/run/lock", func(t *testing.T) {
		gone(t, "/run/lock/kd-a")
		noFilesOf(t, uid, []string{"/run"})
	})
	t.Run("/dev/mqueue", func(t *testing.T) {
		gone(t, "/dev/mqueue/kd-queue")
		noFilesOf(t, uid, []string{"/dev/mqueue"})
	})
	t.Run("SysV shm sem msg", func(t *testing.T) {
		if objs := ipcOf(t, h, uid, uid); len(objs) != 0 {
			t.Errorf("SysV IPC objects left: %v", objs)
		}
	})
	t.Run("/var/crash", func(t *testing.T) {
		gone(t, "/var/crash/kd-a")
		noFilesOf(t, uid, []string{"/var/crash"})
	})
	t.Run("1777 directory of the customer", func(t *testing.T) {
		gone(t, "/tmp/ray")
	})
	t.Run("1777 directory of the host", func(t *testing.T) {
		gone(t, shared+"/kd-a")
		if st, err := os.Stat(h.Path(shared)); err != nil || st.Mode()&os.ModePerm != 0o777 {
			t.Errorf("the host's own %s: %v", shared, err)
		}
	})
	t.Run("lingering user unit", func(t *testing.T) {
		gone(t, linger, unit)
	})
	t.Run("home given to the range", func(t *testing.T) {
		gone(t, home)
		if flag == nil || !strings.Contains(*flag, home) {
			t.Errorf("not recorded as the customer's doing: flag %v", flag)
		}
		if state != sshhost.StateAvailable || !strings.Contains(note, ref) || !strings.Contains(note, "sali la machine") {
			t.Errorf("host %s, note %q: want available, the customer's doing in the note", state, note)
		}
		// In support's queue until an agent closes it.
		flags, err := f.db.HostFlags(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(flags, func(fl domain.HostFlag) bool {
			return fl.OrderRef == ref && strings.Contains(fl.Flag, home) && fl.HostName == "gpu-leftovers"
		}) {
			t.Errorf("not in support's queue: %+v", flags)
		}
	})
	t.Run("host back in service", func(t *testing.T) {
		if state != sshhost.StateAvailable {
			t.Errorf("host %s: %s", state, note)
		}
		if reset == nil || !strings.Contains(*reset, "nvidia-smi --gpu-reset") {
			t.Errorf("GPU reset outcome: %v", reset)
		}
	})
	if state != sshhost.StateAvailable {
		return // no next customer on this host
	}

	// The next customer: another uid, above the previous one, no range,
	// nothing of the previous customer anywhere they can look.
	signer2, pub2 := customerKey(t)
	ref2 := f.order("rtx-a5000", 1, "python", pub2)
	user2, _ := d.UnixUser(ref2)
	f.provision(d, ref2, "rtx-a5000", 1, "python")
	uid2 := h.UID(t, user2)
	t.Run("next customer: a new uid", func(t *testing.T) {
		if uid2 <= uid {
			t.Errorf("next customer's uid %d, previous %d: a uid must never be given again", uid2, uid)
		}
	})
	t.Run("next customer: finds nothing", func(t *testing.T) {
		out, err := h.Run(user2, signer2, "ls -A /tmp /var/tmp /dev/shm /run/lock /var/crash /dev/mqueue "+shared+"; ipcs -m -s -q | grep -c '^0x' || true; "+
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
	})
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
	signer, ref, user := f.rental(d, "rtx-a5000", 1, "python")
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
	// Another host on this kernel (its own mount namespace and /dev) whose
	// account holds that host's /dev/nvidia0: /proc shows the process, but
	// it holds none of this host's GPUs, so it never keeps this host out.
	elsewhere := sshtest.Start(t, sshtest.RTXA5000, sshtest.Options{GPUNodes: []string{"/dev/nvidia0", "/dev/nvidiactl"}})
	neighbour := elsewhere.UIDMax
	if _, err := elsewhere.AdminRun(fmt.Sprintf("setpriv --reuid=%d --regid=%d --clear-groups setsid sh -c 'exec sleep 3600' </dev/nvidia0 >/dev/null 2>&1 &", neighbour, neighbour)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = elsewhere.AdminRun(fmt.Sprintf("pkill -KILL -U %d", neighbour)) })
	waitFor(t, "the other host's process", func() bool { return sshtest.ProcessCount(neighbour) >= 1 })
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
	if neighbour != other && strings.Contains(note, strconv.Itoa(neighbour)) {
		t.Fatalf("the other host's process is named: %q", note)
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
