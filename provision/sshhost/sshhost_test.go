package sshhost_test

import (
	"context"
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
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/provision/sshhost"
	"github.com/kernodeck/kernodeck/provision/sshhost/sshtest"
	"github.com/kernodeck/kernodeck/secrets"
)

// userPrefix names every account these tests create; they remove them all.
const userPrefix = "kdt-"

// Fixed for the subprocess helper, which must open what the parent sealed.
const testKeys = "t1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

func keyring(t testing.TB) *secrets.Keyring {
	t.Helper()
	k, err := secrets.Parse(testKeys)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type fixture struct {
	t   *testing.T
	db  *postgres.DB
	acc int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := pgtest.NewDB(t)
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash)
		VALUES ('Ada', 'L', 'ada@example.com', 'h') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, db: db, acc: acc}
}

func (f *fixture) order(model string, gpus int, preset, pubKey string) string {
	f.t.Helper()
	return pgtest.NewOrder(f.t, f.db, pgtest.Order{AccountID: f.acc, Model: model, Lots: gpus, Preset: preset,
		SSHPublicKey: pubKey})
}

func (f *fixture) addHost(name string, h *sshtest.Host, fingerprint, model string, gpus int) {
	f.t.Helper()
	inv := &sshhost.Inventory{Store: postgres.Hosts{DB: f.db}}
	if _, err := inv.Add(context.Background(), sshhost.Host{Name: name, Address: h.Addr, Port: h.Port,
		Fingerprint: fingerprint, KeyType: h.KeyType, GPUModel: model, GPUCount: gpus}); err != nil {
		f.t.Fatal(err)
	}
}

// provision runs an order through reserve, prepare, verify and access, as the
// workflow does; any failure fails the test.
func (f *fixture) provision(d *sshhost.Driver, ref, model string, gpus int, preset string) activities.Verification {
	f.t.Helper()
	ctx := context.Background()
	if err := d.Reserve(ctx, activities.ReserveInput{OrderRef: ref, GPUModel: model, GPUs: gpus}); err != nil {
		f.t.Fatal(err)
	}
	if err := d.Prepare(ctx, activities.PrepareInput{OrderRef: ref, Preset: preset}); err != nil {
		f.t.Fatal(err)
	}
	v, err := d.Verify(ctx, activities.VerifyInput{OrderRef: ref, GPUModel: model, GPUs: gpus})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := d.CreateAccess(ctx, activities.CreateAccessInput{OrderRef: ref, Verification: v}); err != nil {
		f.t.Fatal(err)
	}
	return v
}

// rental provisions an order of a new customer with their own key, as
// provision does: the customer's signer, the order and its Unix user.
func (f *fixture) rental(d *sshhost.Driver, model string, gpus int, preset string) (ssh.Signer, string, string) {
	f.t.Helper()
	signer, pub := customerKey(f.t)
	ref := f.order(model, gpus, preset, pub)
	user, err := d.UnixUser(ref)
	if err != nil {
		f.t.Fatal(err)
	}
	f.provision(d, ref, model, gpus, preset)
	return signer, ref, user
}

func (f *fixture) hostState(name string) string {
	f.t.Helper()
	var s string
	if err := f.db.Get(&s, `SELECT state FROM gpu_hosts WHERE name = $1`, name); err != nil {
		f.t.Fatal(err)
	}
	return s
}

func driver(db *postgres.DB, h *sshtest.Host, t testing.TB) *sshhost.Driver {
	return &sshhost.Driver{
		Store: postgres.Hosts{DB: db}, Keyring: keyring(t), Signer: h.Admin, UserPrefix: userPrefix,
		ConnectTimeout: 5 * time.Second, // scratch: the default, in each host's own /var
	}
}

// Prepare, verify and teardown leave the host as it was: same /etc/passwd,
// no home directory, no process, no scratch space; meanwhile the customer
// really logs in with the generated key.
func TestPrepareVerifyTeardownLeavesHostAsItWas(t *testing.T) {
	sshtest.RequireRoot(t)
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000)
	f.addHost("gpu-a5000-1", h, h.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, h, t)
	ref := f.order("rtx-a5000", 1, "notebook", "")
	user, _ := d.UnixUser(ref)
	before := h.PasswdLines(t, "")

	for i := 0; i < 2; i++ { // every step retried once: same result
		if err := d.Reserve(ctx, activities.ReserveInput{OrderRef: ref, GPUModel: "rtx-a5000", GPUs: 1}); err != nil {
			t.Fatal(err)
		}
		if err := d.Prepare(ctx, activities.PrepareInput{OrderRef: ref, Preset: "notebook"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.PasswdLines(t, user); len(got) != 1 {
		t.Fatalf("passwd lines for %s: %v", user, got)
	}
	v, err := d.Verify(ctx, activities.VerifyInput{OrderRef: ref, GPUModel: "rtx-a5000", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if v.GPUModel != "NVIDIA RTX A5000" || v.GPUCount != 1 || v.DriverVersion != "570.211.01" || v.CUDAVersion != "12.8" {
		t.Fatalf("verification = %+v", v)
	}
	t.Logf("verification: %+v", v)
	sum, err := d.CreateAccess(ctx, activities.CreateAccessInput{OrderRef: ref, Verification: v})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Username != user || sum.Port != h.Port {
		t.Fatalf("access summary %+v", sum)
	}
	if st := f.hostState("gpu-a5000-1"); st != sshhost.StateInUse {
		t.Fatalf("host state %s, want in_use", st)
	}

	// Secrets are sealed at rest; opened, they let the customer in.
	stored := pgtest.Access(t, f.db, ref)
	sealedKey, sealedTok, jupyterURL := stored.PrivateKey.String, stored.JupyterToken.String, stored.JupyterURL.String
	if !secrets.IsSealed(sealedKey) || !secrets.IsSealed(sealedTok) || strings.Contains(sealedKey, "PRIVATE KEY") {
		t.Fatalf("secrets stored in clear: %.40s / %.40s", sealedKey, sealedTok)
	}
	pemKey, err := postgres.AccessPrivateKey.Open(keyring(t), ref, sealedKey)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := postgres.AccessJupyterToken.Open(keyring(t), ref, sealedTok)
	if err != nil || len(tok) != 48 {
		t.Fatalf("jupyter token %q %v", tok, err)
	}
	uid := h.UID(t, user)
	out := customerRun(t, h, user, pemKey, "cat ~/kernodeck/preset; cat ~/.jupyter/jupyter_server_config.json; "+
		"setsid nohup sleep 600 </dev/null >/dev/null 2>&1 & echo started")
	if !strings.Contains(out, "notebook") || !strings.Contains(out, tok) || !strings.Contains(out, "started") {
		t.Fatalf("customer session: %s", out)
	}
	if !strings.HasPrefix(jupyterURL, "http://127.0.0.1:") {
		t.Fatalf("jupyter url %q", jupyterURL)
	}
	waitFor(t, "customer process", func() bool { return sshtest.ProcessCount(uid) > 0 })

	for i := 0; i < 2; i++ {
		if err := d.RevokeAccess(ctx, ref); err != nil {
			t.Fatal(err)
		}
		if err := d.Release(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	after := h.PasswdLines(t, "")
	if !slices.Equal(before, after) {
		t.Fatalf("/etc/passwd changed:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := os.Stat(h.Path("/home/" + user)); !os.IsNotExist(err) {
		t.Fatalf("home directory still there: %v", err)
	}
	if _, err := os.Stat(h.Path(filepath.Join(sshhost.DefaultScratchDir, user))); !os.IsNotExist(err) {
		t.Fatalf("scratch space still there: %v", err)
	}
	if p := sshtest.Processes(uid); len(p) != 0 {
		t.Fatalf("processes of %s survive: %v", user, p)
	}
	if st := f.hostState("gpu-a5000-1"); st != sshhost.StateAvailable {
		t.Fatalf("host state after release %s", st)
	}
	if a := pgtest.Access(t, f.db, ref); a.RevokedAt == nil || a.PrivateKey.Valid {
		t.Fatal("access not revoked")
	}
}

func customerRun(t *testing.T, h *sshtest.Host, user, pemKey, cmd string) string {
	t.Helper()
	signer, err := ssh.ParsePrivateKey([]byte(pemKey))
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Run(user, signer, cmd)
	if err != nil {
		t.Fatalf("customer: %v", err)
	}
	return out
}

func waitFor(t *testing.T, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Killing the worker in the middle of prepare (SIGKILL right after the
// account is created, while the script still runs) and running prepare
// again gives one account, fully prepared.
func TestPrepareKilledMidScriptGivesOneAccount(t *testing.T) {
	sshtest.RequireRoot(t)
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000)
	f.addHost("gpu-a5000-kill", h, h.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, h, t)
	_, custPub := customerKey(t)
	ref := f.order("rtx-a5000", 1, "pytorch", custPub)
	user, _ := d.UnixUser(ref)
	if err := d.Reserve(ctx, activities.ReserveInput{OrderRef: ref, GPUModel: "rtx-a5000", GPUs: 1}); err != nil {
		t.Fatal(err)
	}

	// The "worker": this test binary re-run as a helper that SIGKILLs itself
	// when the remote script reports the account step.
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPrepareThenDie$", "-test.v")
	cmd.Env = append(os.Environ(), "KD_HELPER=1", "KD_HELPER_DB="+f.db.URL, "KD_HELPER_REF="+ref,
		"KD_HELPER_ADDR="+h.Addr, "KD_HELPER_PORT="+strconv.Itoa(h.Port), "KD_HELPER_DIR="+h.Dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !asExit(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper was not killed mid-prepare: %v\n%s", err, out)
	}
	if n := len(h.PasswdLines(t, user)); n != 1 {
		t.Fatalf("after the crash: %d accounts (want the one created before the kill)", n)
	}
	// The connection died with the worker, which cuts the script that bash
	// reads from it: usually the later steps never ran.
	_, keyErr := os.Stat(h.Path("/home/" + user + "/.ssh/authorized_keys"))
	t.Logf("after the kill: account present, authorized_keys present: %v", keyErr == nil)
	// The restarted worker runs the activity again.
	if err := d.Prepare(ctx, activities.PrepareInput{OrderRef: ref, Preset: "pytorch"}); err != nil {
		t.Fatal(err)
	}
	if got := h.PasswdLines(t, user); len(got) != 1 {
		t.Fatalf("after the retry: %v", got)
	}
	keys, err := os.ReadFile(h.Path("/home/" + user + "/.ssh/authorized_keys"))
	if err != nil || strings.TrimSpace(string(keys)) != custPub {
		t.Fatalf("authorized_keys = %q, %v", keys, err)
	}
	if _, err := os.Stat(h.Path("/home/" + user + "/kernodeck/check_torch.py")); err != nil {
		t.Fatalf("preset not laid out: %v", err)
	}
	if err := d.RevokeAccess(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if got := h.PasswdLines(t, user); len(got) != 0 {
		t.Fatalf("account left after teardown: %v", got)
	}
}

func asExit(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*target = e
	}
	return ok
}

// TestHelperPrepareThenDie is the worker process killed by
// TestPrepareKilledMidScriptGivesOneAccount; it does nothing on its own.
func TestHelperPrepareThenDie(t *testing.T) {
	if os.Getenv("KD_HELPER") != "1" {
		t.Skip("helper process")
	}
	ctx := context.Background()
	db, err := postgres.Open(ctx, os.Getenv("KD_HELPER_DB"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(os.Getenv("KD_HELPER_DIR"), "admin_key"))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(os.Getenv("KD_HELPER_PORT"))
	h := &sshtest.Host{Addr: os.Getenv("KD_HELPER_ADDR"), Port: port, Admin: signer, Dir: os.Getenv("KD_HELPER_DIR")}
	d := driver(db, h, t)
	d.OnStep = func(_, step string) {
		if step == "account" {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
	_ = d.Prepare(ctx, activities.PrepareInput{OrderRef: os.Getenv("KD_HELPER_REF"), Preset: "pytorch"})
	t.Fatal("prepare finished: the kill did not happen")
}

// customerKey returns a new key pair standing for a customer's own key.
func customerKey(t *testing.T) (ssh.Signer, string) {
	t.Helper()
	signer, err := ssh.ParsePrivateKey(sshtest.NewKeyPEM(t))
	if err != nil {
		t.Fatal(err)
	}
	return signer, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
}

// A host that shows other GPUs than the inventory says is set aside as
// broken, with what was seen recorded; the next Reserve takes another host.
func TestVerifyMismatchSetsHostAsideAndRetryTakesAnother(t *testing.T) {
	sshtest.RequireRoot(t)
	ctx := context.Background()
	f := newFixture(t)
	admin := sshtest.Options{AdminKeyPEM: sshtest.NewKeyPEM(t)}
	liar := sshtest.Start(t, sshtest.QuadroRTX4000x2, admin)
	good := sshtest.Start(t, sshtest.RTXA5000, admin)
	f.addHost("gpu-liar", liar, liar.Fingerprint, "rtx-a5000", 1) // first by id: reserved first
	f.addHost("gpu-good", good, good.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, liar, t)
	ref := f.order("rtx-a5000", 1, "python", "")
	user, _ := d.UnixUser(ref)

	if err := d.Reserve(ctx, activities.ReserveInput{OrderRef: ref, GPUModel: "rtx-a5000", GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(ctx, activities.PrepareInput{OrderRef: ref, Preset: "python"}); err != nil {
		t.Fatal(err)
	}
	_, err := d.Verify(ctx, activities.VerifyInput{OrderRef: ref, GPUModel: "rtx-a5000", GPUs: 1})
	if domain.ErrorCode(err) != activities.ErrTypeVerifyMismatch {
		t.Fatalf("mismatch not detected: %v", err)
	}
	t.Logf("mismatch: %v", err)
	if st := f.hostState("gpu-liar"); st != sshhost.StateBroken {
		t.Fatalf("liar host state %s", st)
	}
	var seen string
	var count int
	if err := f.db.QueryRow(`SELECT gpu_model_seen, gpu_count_seen FROM host_reservations WHERE order_ref = $1 AND state = 'failed'`, ref).
		Scan(&seen, &count); err != nil || seen != "Quadro RTX 4000" || count != 2 {
		t.Fatalf("seen %q x%d: %v", seen, count, err)
	}
	if got := liar.PasswdLines(t, user); len(got) != 0 {
		t.Fatalf("account left on the broken host: %v", got)
	}
	// A retried Verify says the same; the workflow's next attempt reserves again.
	if _, err := d.Verify(ctx, activities.VerifyInput{OrderRef: ref, GPUModel: "rtx-a5000", GPUs: 1}); domain.ErrorCode(err) != activities.ErrTypeVerifyMismatch {
		t.Fatalf("retried verify: %v", err)
	}
	if err := d.Reserve(ctx, activities.ReserveInput{OrderRef: ref, GPUModel: "rtx-a5000", GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	var host string
	_ = f.db.Get(&host, `SELECT host_name FROM host_reservations WHERE order_ref = $1 AND state = 'active'`, ref)
	if host != "gpu-good" {
		t.Fatalf("retry reserved %q", host)
	}
	if err := d.Prepare(ctx, activities.PrepareInput{OrderRef: ref, Preset: "python"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Verify(ctx, activities.VerifyInput{OrderRef: ref, GPUModel: "rtx-a5000", GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	if err := d.RevokeAccess(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, ref); err != nil {
		t.Fatal(err)
	}
}

// A host presenting another key than the inventory's is refused before any
// command is sent, and set aside.
func TestHostKeyMismatchRefusesHost(t *testing.T) {
	sshtest.RequireRoot(t)
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000)
	other, _ := customerKey(t)
	f.addHost("gpu-impostor", h, ssh.FingerprintSHA256(other.PublicKey()), "rtx-a5000", 1)
	d := driver(f.db, h, t)
	ref := f.order("rtx-a5000", 1, "python", "")
	user, _ := d.UnixUser(ref)
	if err := d.Reserve(ctx, activities.ReserveInput{OrderRef: ref, GPUModel: "rtx-a5000", GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	err := d.Prepare(ctx, activities.PrepareInput{OrderRef: ref, Preset: "python"})
	if domain.ErrorCode(err) != sshhost.ErrTypeHostRefused {
		t.Fatalf("host key mismatch not refused: %v", err)
	}
	if got := h.PasswdLines(t, user); len(got) != 0 {
		t.Fatalf("account created on a refused host: %v", got)
	}
	if st := f.hostState("gpu-impostor"); st != sshhost.StateBroken {
		t.Fatalf("host state %s", st)
	}
	// Nothing else is free: the retry waits (no capacity), it never goes back.
	if err := d.Reserve(ctx, activities.ReserveInput{OrderRef: ref, GPUModel: "rtx-a5000", GPUs: 1}); domain.ErrorCode(err) != domain.ECodeNoCapacity {
		t.Fatalf("reserve after refusal: %v", err)
	}
}

// Two rentals racing for the last free host: exactly one gets it, the other
// is told there is no capacity; the database never holds both on one host.
func TestTwoOrdersRaceForLastHost(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	fake := &sshtest.Host{Addr: "10.0.0.7", Port: 22, KeyType: ssh.KeyAlgoED25519}
	other, _ := customerKey(t)
	f.addHost("gpu-last", fake, ssh.FingerprintSHA256(other.PublicKey()), "h100-80g", 1)
	d := &sshhost.Driver{Store: postgres.Hosts{DB: f.db}, Keyring: keyring(t), UserPrefix: userPrefix}
	for round := 0; round < 20; round++ {
		a, b := f.order("h100-80g", 1, "python", ""), f.order("h100-80g", 1, "python", "")
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, ref := range []string{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = d.Reserve(ctx, activities.ReserveInput{OrderRef: ref, GPUModel: "h100-80g", GPUs: 1})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case domain.ErrorCode(err) != domain.ECodeNoCapacity:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		var active int
		_ = f.db.Get(&active, `SELECT count(*) FROM host_reservations WHERE state = 'active'`)
		if won != 1 || active != 1 {
			t.Fatalf("round %d: %d winners, %d active reservations", round, won, active)
		}
		// Give the host back without SSH (nothing was prepared on it).
		if _, err := f.db.Exec(`UPDATE host_reservations SET state = 'released' WHERE state = 'active';
			UPDATE gpu_hosts SET state = 'available'`); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := f.db.Get(&n, `SELECT count(*) FROM gpu_hosts WHERE state = 'available' AND gpu_model = 'h100-80g'
		AND gpu_count = 1`); err != nil || n != 1 {
		t.Fatalf("free hosts %d %v", n, err)
	}
}

// A paid order whose capacity was held at its payment request gets its host
// even when another paid order (attributed by support, so without a hold)
// reserves at the same moment: 20 rounds, the held order never waits for a
// host.
func TestHeldOrderGetsItsHostWhileAnotherRaces(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	fake := &sshtest.Host{Addr: "10.0.0.8", Port: 22, KeyType: ssh.KeyAlgoED25519}
	other, _ := customerKey(t)
	f.addHost("gpu-held", fake, ssh.FingerprintSHA256(other.PublicKey()), "h100-80g", 1)
	d := &sshhost.Driver{Store: postgres.Hosts{DB: f.db}, Keyring: keyring(t), UserPrefix: userPrefix}
	capa := postgres.Capacity{DB: f.db, Provisioner: postgres.ProvisionerSSH}
	for round := 0; round < 20; round++ {
		held, racer := f.order("h100-80g", 1, "python", ""), f.order("h100-80g", 1, "python", "")
		pgtest.SetOrderStatus(t, f.db, held, domain.StatusAwaitingPayment)
		if _, err := capa.HoldCapacity(ctx, held, time.Now().Add(time.Hour)); err != nil {
			t.Fatalf("round %d: hold: %v", round, err)
		}
		pgtest.SetOrderStatus(t, f.db, held, domain.StatusPaid)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, ref := range []string{racer, held} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = d.Reserve(ctx, activities.ReserveInput{OrderRef: ref, GPUModel: "h100-80g", GPUs: 1})
			}()
		}
		wg.Wait()
		if errs[1] != nil || domain.ErrorCode(errs[0]) != domain.ECodeNoCapacity {
			t.Fatalf("round %d: held order %v, racer %v", round, errs[1], errs[0])
		}
		var owner, holdState string
		_ = f.db.Get(&owner, `SELECT order_ref FROM host_reservations WHERE state = 'active'`)
		_ = f.db.Get(&holdState, `SELECT state FROM capacity_holds WHERE order_ref = $1`, held)
		if owner != held || holdState != "consumed" {
			t.Fatalf("round %d: host reserved by %s (held order %s), hold %s", round, owner, held, holdState)
		}
		if _, err := f.db.Exec(`UPDATE host_reservations SET state = 'released' WHERE state = 'active';
			UPDATE gpu_hosts SET state = 'available'`); err != nil {
			t.Fatal(err)
		}
	}
}

// A paid order takes the host its hold keeps without waiting for the
// model's capacity lock; an order without a hold waits for the lock, then
// gets the other free host, never the held one.
func TestHeldOrderSkipsTheCapacityLock(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	other, _ := customerKey(t)
	for i, name := range []string{"gpu-held-1", "gpu-held-2"} {
		fake := &sshtest.Host{Addr: fmt.Sprintf("10.0.0.%d", 20+i), Port: 22, KeyType: ssh.KeyAlgoED25519}
		f.addHost(name, fake, ssh.FingerprintSHA256(other.PublicKey()), "h100-80g", 1)
	}
	d := &sshhost.Driver{Store: postgres.Hosts{DB: f.db}, Keyring: keyring(t), UserPrefix: userPrefix}
	capa := postgres.Capacity{DB: f.db, Provisioner: postgres.ProvisionerSSH}
	held, unheld := f.order("h100-80g", 1, "python", ""), f.order("h100-80g", 1, "python", "")
	pgtest.SetOrderStatus(t, f.db, held, domain.StatusAwaitingPayment)
	if _, err := capa.HoldCapacity(ctx, held, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	pgtest.SetOrderStatus(t, f.db, held, domain.StatusProvisioning)
	var heldHost string
	if err := f.db.Get(&heldHost, `SELECT h.name FROM capacity_holds c JOIN gpu_hosts h ON h.id = c.host_id WHERE c.order_ref = $1`, held); err != nil {
		t.Fatal(err)
	}

	lock, err := f.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback() }()
	if err := postgres.LockCapacity(ctx, lock, "h100-80g"); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := d.Reserve(rctx, activities.ReserveInput{OrderRef: held, GPUModel: "h100-80g", GPUs: 1}); err != nil {
		t.Fatalf("the order holding its host, while the capacity lock is taken: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		done <- d.Reserve(rctx, activities.ReserveInput{OrderRef: unheld, GPUModel: "h100-80g", GPUs: 1})
	}()
	pgtest.AwaitLockWaiters(t, f.db, 1) // the order without a hold waits for the lock
	if err := lock.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the order without a hold, once the lock is given back: %v", err)
	}
	got := map[string]string{}
	rows, err := f.db.Query(`SELECT order_ref, host_name FROM host_reservations WHERE state = 'active'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var ref, host string
		if err := rows.Scan(&ref, &host); err != nil {
			t.Fatal(err)
		}
		got[ref] = host
	}
	if len(got) != 2 || got[held] != heldHost || got[unheld] == heldHost || got[unheld] == "" {
		t.Fatalf("reservations %v: want %s on its held host %s, and %s on the other", got, held, heldHost, unheld)
	}
}

// An AMD MI210 order is verified with amd-smi (output recorded on real
// MI210 hosts, see sshtest.MI210x2): model, count, amdgpu driver and the
// ROCm release go on the order, which says ROCm, not CUDA. A host declared
// with one MI210 but showing two is set aside.
func TestMI210OrderVerifiedWithAMDSMI(t *testing.T) {
	sshtest.RequireRoot(t)
	f := newFixture(t)
	admin := sshtest.Options{AdminKeyPEM: sshtest.NewKeyPEM(t)}
	f.mi210Rental(admin, "gpu-mi210-2", sshtest.MI210x2, "amd-smi", "6.16.13", "ROCm 6.2.0-66")
	f.requireSetAside(admin, "gpu-mi210-liar", sshtest.MI210x2, 1, "2 GPU au lieu de 1")
}

// A host with rocm-smi and no amd-smi (older ROCm releases) is verified
// from rocm-smi's output recorded on a real two-MI210 host (see
// sshtest.MI210x2ROCmSMI, whose "Instinct MI210" lacks amd-smi's "AMD"):
// model, count and amdgpu driver go on the order, and the ROCm release,
// which rocm-smi does not print, reads "ROCm (version inconnue)". Hosts
// whose rocm-smi shows another model (four MI300X, recorded) or more GPUs
// than declared are set aside.
func TestMI210OrderVerifiedWithROCmSMI(t *testing.T) {
	sshtest.RequireRoot(t)
	f := newFixture(t)
	admin := sshtest.Options{AdminKeyPEM: sshtest.NewKeyPEM(t)}
	f.mi210Rental(admin, "gpu-mi210-rocmsmi", sshtest.MI210x2ROCmSMI, "rocm-smi", "6.10.5", "ROCm (version inconnue)")
	f.requireSetAside(admin, "gpu-mi300x-as-mi210", sshtest.MI300Xx4ROCmSMI, 4, `modèle "AMD Instinct MI300X OAM"`)
	f.requireSetAside(admin, "gpu-mi210-rocmsmi-liar", sshtest.MI210x2ROCmSMI, 1, "2 GPU au lieu de 1")
}

// mi210Rental provisions a pytorch order of two MI210 on a new stand-in
// host showing gpu, then ends it. Verification must read the model and
// count, the amdgpu driver and the ROCm stack with tool, and the order's
// access must say that stack, ROCm rather than CUDA, and that the host has
// no PyTorch.
func (f *fixture) mi210Rental(admin sshtest.Options, name string, gpu sshtest.GPU, tool, driverVersion, stack string) {
	f.t.Helper()
	ctx := context.Background()
	h := sshtest.Start(f.t, gpu, admin)
	f.addHost(name, h, h.Fingerprint, "mi210", 2)
	d := driver(f.db, h, f.t)
	ref := f.order("mi210", 2, "pytorch", "")
	v := f.provision(d, ref, "mi210", 2, "pytorch")
	f.t.Logf("verification: %+v", v)
	if v.GPUModel != "AMD Instinct MI210" || v.GPUCount != 2 || v.DriverVersion != driverVersion ||
		v.CUDAVersion != stack || !strings.Contains(v.Notes, "Lu par "+tool) {
		f.t.Fatalf("verification %+v, want %s, driver %s, %s", v, tool, driverVersion, stack)
	}
	if a := pgtest.Access(f.t, f.db, ref); a.CUDAVersion != stack || !strings.Contains(a.Notes, "ROCm, pas CUDA") ||
		!strings.Contains(a.Notes, "PyTorch n'est pas installé") {
		f.t.Fatalf("order access: stack %q, notes %q", a.CUDAVersion, a.Notes)
	}
	if err := d.RevokeAccess(ctx, ref); err != nil {
		f.t.Fatal(err)
	}
	if err := d.Release(ctx, ref); err != nil {
		f.t.Fatal(err)
	}
}

// requireSetAside declares a new stand-in host showing gpu as one of gpus
// MI210 and requires verification of an order for them to set it aside,
// saying cause.
func (f *fixture) requireSetAside(admin sshtest.Options, name string, gpu sshtest.GPU, gpus int, cause string) {
	f.t.Helper()
	ctx := context.Background()
	h := sshtest.Start(f.t, gpu, admin)
	f.addHost(name, h, h.Fingerprint, "mi210", gpus)
	d := driver(f.db, h, f.t)
	ref := f.order("mi210", gpus, "python", "")
	if err := d.Reserve(ctx, activities.ReserveInput{OrderRef: ref, GPUModel: "mi210", GPUs: gpus}); err != nil {
		f.t.Fatal(err)
	}
	if err := d.Prepare(ctx, activities.PrepareInput{OrderRef: ref, Preset: "python"}); err != nil {
		f.t.Fatal(err)
	}
	_, err := d.Verify(ctx, activities.VerifyInput{OrderRef: ref, GPUModel: "mi210", GPUs: gpus})
	if domain.ErrorCode(err) != activities.ErrTypeVerifyMismatch || !strings.Contains(err.Error(), cause) ||
		f.hostState(name) != sshhost.StateBroken {
		f.t.Fatalf("%s declared with %d MI210: %v, host %s", name, gpus, err, f.hostState(name))
	}
}

// The pytorch and inference presets run the FAQ's backend check as the
// customer when the image has PyTorch, and the result goes on the order:
// the interpreter, the backend (ROCm here) and the device; a PyTorch that
// sees no GPU (it would silently use the CPU) is reported as a failure.
func TestPresetCheckResultOnTheOrder(t *testing.T) {
	sshtest.RequireRoot(t)
	f := newFixture(t)
	admin := sshtest.NewKeyPEM(t)
	cases := []struct {
		name, model, preset string
		gpu                 sshtest.GPU
		gpus                int
		torch               sshtest.Torch
		want                []string
	}{
		{"rocm", "mi210", "pytorch", sshtest.MI210x2, 2,
			sshtest.Torch{Version: "2.5.1+rocm6.2", HIP: "6.2.41133", Available: true, Device: "AMD Instinct MI210"},
			[]string{"Contrôle PyTorch réussi", "python=/usr/bin/python3", "backend=ROCm 6.2.41133", "device=AMD Instinct MI210"}},
		{"cpu-fallback", "rtx-a5000", "inference", sshtest.RTXA5000, 1,
			sshtest.Torch{Version: "2.5.1+cpu", Available: false},
			[]string{"Contrôle PyTorch en échec", "no GPU visible to PyTorch"}},
	}
	for _, c := range cases {
		h := sshtest.Start(t, c.gpu, sshtest.Options{AdminKeyPEM: admin, Torch: &c.torch})
		f.addHost("gpu-check-"+c.name, h, h.Fingerprint, c.model, c.gpus)
		d := driver(f.db, h, t)
		ref := f.order(c.model, c.gpus, c.preset, "")
		f.provision(d, ref, c.model, c.gpus, c.preset)
		notes := pgtest.Access(t, f.db, ref).Notes
		for _, w := range c.want {
			if !strings.Contains(notes, w) {
				t.Fatalf("%s: notes %q lack %q", c.name, notes, w)
			}
		}
		t.Logf("%s: %s", c.name, notes)
	}
}
