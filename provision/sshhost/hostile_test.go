package sshhost_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/provision/sshhost"
	"github.com/kernodeck/kernodeck/provision/sshhost/sshtest"
)

// snapshot describes every file under root without following symlinks:
// type, mode, owner and a checksum of the content. Files listed in
// skipContent keep their metadata checked but not their content (the account
// databases, which the test's own account changes).
func snapshot(t *testing.T, root string, skipContent ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == root {
				out["."] = "absent"
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(root, p)
		desc := fmt.Sprintf("%v %d:%d", info.Mode(), st.Uid, st.Gid)
		switch {
		case info.Mode().Type() == fs.ModeSymlink:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case info.Mode().IsRegular() && !slices.Contains(skipContent, rel):
			raw, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(raw)
			desc += " " + hex.EncodeToString(sum[:8])
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot of %s: %v", root, err)
	}
	return out
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	var diffs []string
	for p, b := range before {
		if a, ok := after[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: removed (was %s)", p, b))
		} else if a != b {
			diffs = append(diffs, fmt.Sprintf("%s: %s -> %s", p, b, a))
		}
	}
	for p, a := range after {
		if _, ok := before[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: appeared (%s)", p, a))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("%s changed:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// filesOf lists the files owned by uid under root (without following
// symlinks).
func filesOf(t *testing.T, uid int, root string) []string {
	t.Helper()
	var found []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil && info.Sys().(*syscall.Stat_t).Uid == uint32(uid) {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// The account files useradd/userdel rewrite: their metadata is compared,
// their content is not.
var accountFiles = []string{"passwd", "passwd-", "shadow", "shadow-", "group", "group-", "gshadow", "gshadow-",
	"subuid", "subuid-", "subgid", "subgid-", ".pwd.lock"}

// A hostile customer, during the rental, points ~/.ssh at /root/.ssh,
// ~/kernodeck at /etc, other entries of their home and of the scratch space
// at /root and at a root-owned decoy, leaves a double-forked setsid process
// ignoring SIGHUP/SIGTERM, a process respawning children, a crontab, an at
// job and files (one a mode-000 directory) in /tmp, /var/tmp and /dev/shm.
// A prepare retry and the teardown then run as root on the host: the decoy,
// /root and /etc are as they were, the admin still logs in, nothing of that
// uid is left, and the host is available again.
//
// The stand-in host's /root and /etc are copies (see sshtest.Host): a
// regression damages them, and this test sees it, but never this machine's
// own files, which are compared too, from the outside.
func TestHostileCustomerGetsNothingFromRoot(t *testing.T) {
	sshtest.RequireRoot(t)
	ctx := context.Background()
	realBefore := map[string]map[string]string{"/root/.ssh": snapshot(t, "/root/.ssh")}
	realEtc, err := os.Stat("/etc")
	if err != nil {
		t.Fatal(err)
	}

	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000)
	f.addHost("gpu-hostile", h, h.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, h, t)
	signer, ref, user := f.rental(d, "rtx-a5000", 1, "notebook")
	uid := h.UID(t, user)

	// A root-owned decoy the customer can read but not write.
	decoy := filepath.Join(h.Dir, "decoy")
	if err := os.MkdirAll(filepath.Join(decoy, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"secret", "sub/config"} {
		if err := os.WriteFile(filepath.Join(decoy, name), []byte("root's "+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]map[string]string{
		"decoy":      snapshot(t, decoy),
		"/root":      snapshot(t, h.Path("/root")),
		"/etc":       snapshot(t, h.Path("/etc"), accountFiles...),
		"/root/.ssh": snapshot(t, h.Path("/root/.ssh")),
	}
	if len(before["/root/.ssh"]) != 2 { // the directory and authorized_keys
		t.Fatalf("host's /root/.ssh: %v", before["/root/.ssh"])
	}

	hostile := strings.NewReplacer("DECOY", decoy).Replace(`set -e
cd
rm -rf .ssh kernodeck .jupyter work
ln -s /root/.ssh .ssh
ln -s /etc kernodeck
ln -s /root .jupyter
ln -s DECOY work
ln -s DECOY scratch/decoy-dir
ln -s DECOY/secret scratch/decoy-file
ln -s /root/.ssh/authorized_keys scratch/admin-keys
mkdir scratch/locked && touch scratch/locked/f && chmod 000 scratch/locked
echo x >/tmp/kd-hostile && ln -s DECOY /tmp/kd-hostile-link
mkdir /tmp/kd-hostile-dir && touch /tmp/kd-hostile-dir/f && chmod 000 /tmp/kd-hostile-dir
echo x >/var/tmp/kd-hostile && echo x >/dev/shm/kd-hostile && ln -s /etc/passwd /dev/shm/kd-hostile-link
echo '* * * * * touch /tmp/kd-cron-ran' | crontab -
echo 'touch /tmp/kd-at-ran' | at now + 1 hour 2>/dev/null
# Double-forked, new session, deaf to HUP and TERM.
setsid sh -c 'trap "" HUP TERM; (setsid sh -c "trap \"\" HUP TERM; while :; do sleep 1; done" &); exec sleep 3600' </dev/null >/dev/null 2>&1 &
# A respawner: forks a new detached child every 50 ms.
setsid bash -c 'trap "" HUP TERM; while :; do (setsid sleep 1000 &); sleep 0.05; done' </dev/null >/dev/null 2>&1 &
echo hostile-ready
`)
	if out, err := h.Run(user, signer, hostile); err != nil || !strings.Contains(out, "hostile-ready") {
		t.Fatalf("hostile session: %v %s", err, out)
	}
	waitFor(t, "the customer's detached processes", func() bool { return sshtest.ProcessCount(uid) >= 5 })
	if _, err := os.Stat(h.Path("/var/spool/cron/crontabs/" + user)); err != nil {
		t.Fatalf("the customer's crontab was not written: %v", err)
	}
	if out, err := h.AdminRun("atq"); err != nil || !strings.Contains(out, user) {
		t.Fatalf("the customer's at job is not queued: %v %q", err, out)
	}
	if n := len(filesOf(t, uid, h.Path("/tmp"))) + len(filesOf(t, uid, h.Path("/dev/shm"))); n < 5 {
		t.Fatalf("the customer's temporary files: %d", n)
	}
	t.Logf("hostile customer uid %d: %d processes", uid, sshtest.ProcessCount(uid))

	// Support (or an activity retry) runs prepare again during the rental.
	// Failures below are reported with t.Errorf, so one run lists every
	// damage a regression does.
	if err := d.Prepare(ctx, activities.PrepareInput{OrderRef: ref, Preset: "notebook"}); err != nil {
		t.Errorf("prepare retry: %v", err)
	}
	// Prepare put real directories back in the home, as the customer: the
	// customer's key works again, /etc got no file and no new owner.
	if out, err := h.Run(user, signer, "test -d ~/.ssh && ! test -L ~/.ssh && test -d ~/kernodeck && ! test -L ~/kernodeck && cat ~/kernodeck/preset"); err != nil || !strings.Contains(out, "notebook") {
		t.Errorf("home after the prepare retry: %v %q", err, out)
	}
	sameSnapshot(t, "the host's /root/.ssh after the prepare retry", before["/root/.ssh"], snapshot(t, h.Path("/root/.ssh")))
	sameSnapshot(t, "the host's /etc after the prepare retry", before["/etc"], snapshot(t, h.Path("/etc"), accountFiles...))

	// The end of the rental, each step retried once.
	for i := 0; i < 2; i++ {
		if err := d.RevokeAccess(ctx, ref); err != nil {
			t.Errorf("revoke: %v", err)
			break
		}
		if err := d.Release(ctx, ref); err != nil {
			t.Errorf("release: %v", err)
			break
		}
	}

	sameSnapshot(t, "the decoy", before["decoy"], snapshot(t, decoy))
	sameSnapshot(t, "the host's /root", before["/root"], snapshot(t, h.Path("/root")))
	sameSnapshot(t, "the host's /etc", before["/etc"], snapshot(t, h.Path("/etc"), accountFiles...))
	if out, err := h.AdminRun("id -u; atq"); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("admin after the teardown: %v %q (want uid 0 and no at job left)", err, out)
	}
	if _, err := h.Run(user, signer, "true"); err == nil {
		t.Fatal("the customer still logs in")
	}
	if p := sshtest.Processes(uid); len(p) != 0 {
		t.Errorf("processes of uid %d left: %v", uid, p)
	}
	for _, dir := range []string{"/tmp", "/var/tmp", "/dev/shm", "/var/spool/cron", "/var/lib/kernodeck", "/home"} {
		if left := filesOf(t, uid, h.Path(dir)); len(left) != 0 {
			t.Errorf("files of uid %d left in %s: %v", uid, dir, left)
		}
	}
	if _, err := os.Lstat(h.Path("/var/spool/cron/crontabs/" + user)); !os.IsNotExist(err) {
		t.Errorf("crontab left: %v", err)
	}
	if lines := h.PasswdLines(t, user); len(lines) != 0 {
		t.Errorf("account left: %v", lines)
	}
	if st := f.hostState("gpu-hostile"); st != sshhost.StateAvailable {
		var note string
		_ = f.db.Get(&note, `SELECT note FROM gpu_hosts WHERE name = 'gpu-hostile'`)
		t.Errorf("host %s: %s", st, note)
	}

	// This machine's own files, untouched whatever happened on the host.
	sameSnapshot(t, "this machine's /root/.ssh", realBefore["/root/.ssh"], snapshot(t, "/root/.ssh"))
	if after, err := os.Stat("/etc"); err != nil || after.Mode() != realEtc.Mode() ||
		after.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("this machine's /etc: %v %v", after.Mode(), err)
	}
}

// What the teardown cannot clean keeps the host out of rotation: a file of
// the customer's uid in a directory only root may write (as a daemon
// writing on the customer's behalf would leave) makes the host broken, with
// the reason for operators; the order's release still completes.
func TestReleaseMarksHostBrokenWhenSomethingRemains(t *testing.T) {
	sshtest.RequireRoot(t)
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000)
	f.addHost("gpu-dirty", h, h.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, h, t)
	ref := f.order("rtx-a5000", 1, "python", "")
	user, _ := d.UnixUser(ref)
	if err := d.Reserve(ctx, activities.ReserveInput{OrderRef: ref, GPUModel: "rtx-a5000", GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(ctx, activities.PrepareInput{OrderRef: ref, Preset: "python"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.AdminRun("install -d -m 755 /var/tmp/kd-daemon && touch /var/tmp/kd-daemon/core && chown " + user + " /var/tmp/kd-daemon/core"); err != nil {
		t.Fatal(err)
	}
	if err := d.RevokeAccess(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, ref); err != nil {
		t.Fatalf("release of a dirty host must end the order's release: %v", err)
	}
	var state, note string
	if err := f.db.QueryRow(`SELECT state, note FROM gpu_hosts WHERE name = 'gpu-dirty'`).Scan(&state, &note); err != nil {
		t.Fatal(err)
	}
	if state != sshhost.StateBroken || !strings.Contains(note, "/var/tmp/kd-daemon/core") || !strings.Contains(note, ref) {
		t.Fatalf("host %s, note %q", state, note)
	}
	t.Logf("operator's note: %s", note)
	var active int
	_ = f.db.Get(&active, `SELECT count(*) FROM host_reservations WHERE order_ref = $1 AND state = 'active'`, ref)
	if active != 0 {
		t.Fatal("the reservation is still active")
	}
	// Operators see it in the inventory.
	hosts, err := (&sshhost.Inventory{Store: postgres.Hosts{DB: f.db}}).List(ctx)
	if err != nil || len(hosts) != 1 || hosts[0].State != sshhost.StateBroken || hosts[0].Note != note {
		t.Fatalf("inventory: %+v %v", hosts, err)
	}
	if got := h.PasswdLines(t, user); len(got) != 0 {
		t.Fatalf("account left: %v", got)
	}
}

// A customer who lost their key gets access back: their new public key
// replaces the old one on the running host, then a generated key is
// reissued; each time sshd refuses the previous key. Meanwhile the customer
// had pointed ~/.ssh at /root/.ssh: the host's /root/.ssh is untouched.
func TestKeyReplacedThenReissuedOldOnesRefused(t *testing.T) {
	sshtest.RequireRoot(t)
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000)
	f.addHost("gpu-keys", h, h.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, h, t)
	first, firstPub := customerKey(t)
	ref := f.order("rtx-a5000", 1, "python", firstPub)
	user, _ := d.UnixUser(ref)
	f.provision(d, ref, "rtx-a5000", 1, "python")
	rootSSH := snapshot(t, h.Path("/root/.ssh"))
	if _, err := h.Run(user, first, "rm -rf ~/.ssh && ln -s /root/.ssh ~/.ssh"); err != nil {
		t.Fatal(err)
	}

	second, secondPub := customerKey(t)
	if err := d.ReplaceKey(ctx, ref, secondPub); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Run(user, first, "true"); err == nil {
		t.Fatal("the replaced key still logs in")
	}
	if out, err := h.Run(user, second, "id -un"); err != nil || strings.TrimSpace(out) != user {
		t.Fatalf("new key: %v %q", err, out)
	}
	sameSnapshot(t, "the host's /root/.ssh", rootSSH, snapshot(t, h.Path("/root/.ssh")))

	if err := d.ReissueKey(ctx, ref); err != nil {
		t.Fatal(err)
	}
	stored := pgtest.Access(t, f.db, ref)
	if !stored.PrivateKey.Valid || stored.PrivateKeyShownAt != nil {
		t.Fatalf("reissued key on the access: %v, shown at %v", stored.PrivateKey.Valid, stored.PrivateKeyShownAt)
	}
	pemKey, err := postgres.AccessPrivateKey.Open(keyring(t), ref, stored.PrivateKey.String)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Run(user, second, "true"); err == nil {
		t.Fatal("the customer's key still logs in after the reissue")
	}
	if out := customerRun(t, h, user, pemKey, "id -un"); strings.TrimSpace(out) != user {
		t.Fatalf("reissued key: %q", out)
	}
	// A prepare retry keeps the reissued key, not the order-time one.
	if err := d.Prepare(ctx, activities.PrepareInput{OrderRef: ref, Preset: "python"}); err != nil {
		t.Fatal(err)
	}
	customerRun(t, h, user, pemKey, "true")
	if _, err := h.Run(user, first, "true"); err == nil {
		t.Fatal("the first key logs in after a prepare retry")
	}
	if out, err := h.AdminRun("id -u"); err != nil || strings.TrimSpace(out) != "0" {
		t.Fatalf("admin: %v %q", err, out)
	}
	// No running rental, no key change.
	if err := d.RevokeAccess(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.ReissueKey(ctx, ref); err == nil {
		t.Fatal("key reissued after the end of the rental")
	}
}
