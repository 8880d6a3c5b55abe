package localpg_test

import (
	"context"
	"sync"
	"testing"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/provision/localpg"
	"github.com/kernodeck/kernodeck/secrets"
)

func testKeyring(t *testing.T) *secrets.Keyring {
	t.Helper()
	k, err := secrets.Parse(secrets.Generate("test"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newOrder(t *testing.T, db *postgres.DB, acc int64, model string, lots, perLot int) string {
	t.Helper()
	ref := domain.NewRef(domain.OrderRefPrefix)
	if _, err := db.Exec(`INSERT INTO orders (ref, account_id, gpu_model, lots, gpus_per_lot, total_gpus,
		duration_days, preset, lot_cents, total_cents, status, workflow_id)
		VALUES ($1, $2, $3, $4::int, $5::int, $4::int * $5::int, 3, 'python', 100, 100 * $4::int, 'paid', 'rental-' || $1)`,
		ref, acc, model, lots, perLot); err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestFullCycleIsIdempotent(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash) VALUES ('a','b','p@x.io','h') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	kr := testKeyring(t)
	p := &localpg.Provisioner{DB: db.DB, Host: "gpu.local", Port: 22, Keyring: kr}
	ref := newOrder(t, db, acc, "b200", 2, 2)
	for i := 0; i < 2; i++ { // every step retried once
		if err := p.Reserve(ctx, activities.ReserveInput{OrderRef: ref, GPUModel: "b200", GPUs: 4}); err != nil {
			t.Fatal(err)
		}
		if err := p.Prepare(ctx, activities.PrepareInput{OrderRef: ref, Preset: "pytorch"}); err != nil {
			t.Fatal(err)
		}
	}
	v, err := p.Verify(ctx, activities.VerifyInput{OrderRef: ref, GPUModel: "b200", GPUs: 4})
	if err != nil {
		t.Fatal(err)
	}
	if v.GPUModel != "b200" || v.GPUCount != 4 {
		t.Fatalf("verification = %+v", v)
	}
	if _, err := p.Verify(ctx, activities.VerifyInput{OrderRef: ref, GPUModel: "b200", GPUs: 2}); domain.ErrorCode(err) != activities.ErrTypeVerifyMismatch {
		t.Fatalf("mismatch not detected: %v", err)
	}
	a1, err := p.CreateAccess(ctx, activities.CreateAccessInput{OrderRef: ref, Verification: v})
	if err != nil {
		t.Fatal(err)
	}
	var pw1 string
	_ = db.Get(&pw1, `SELECT password FROM order_access WHERE order_ref = $1`, ref)
	a2, err := p.CreateAccess(ctx, activities.CreateAccessInput{OrderRef: ref, Verification: v})
	if err != nil {
		t.Fatal(err)
	}
	var pw2 string
	_ = db.Get(&pw2, `SELECT password FROM order_access WHERE order_ref = $1`, ref)
	if a1 != a2 || pw1 != pw2 || len(pw1) < 20 {
		t.Fatalf("access changed on retry: %+v %+v", a1, a2)
	}
	// Sealed at rest, and it opens to the generated password.
	if !secrets.IsSealed(pw1) {
		t.Fatalf("password stored in clear: %q", pw1)
	}
	if clear, err := kr.Open(pw1, "order_access.password:"+ref); err != nil || len(clear) < 20 {
		t.Fatalf("open password: %q %v", clear, err)
	}
	for i := 0; i < 2; i++ {
		if err := p.RevokeAccess(ctx, ref); err != nil {
			t.Fatal(err)
		}
		if err := p.Release(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	var used int
	_ = db.Get(&used, `SELECT COALESCE(SUM(gpus),0) FROM gpu_reservations WHERE gpu_model='b200' AND state <> 'released'`)
	if used != 0 {
		t.Fatalf("gpus still reserved after release: %d", used)
	}
}

// Orders racing for the last GPUs: capacity is never exceeded.
func TestReservationsNeverExceedInventory(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	if _, err := db.Exec(`UPDATE gpu_inventory SET total_gpus = 3 WHERE gpu_model = 'h100-80g'`); err != nil {
		t.Fatal(err)
	}
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash) VALUES ('a','b','q@x.io','h') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	p := &localpg.Provisioner{DB: db.DB, Host: "gpu.local", Port: 22, Keyring: testKeyring(t)}
	const n = 10
	refs := make([]string, n)
	for i := range refs {
		refs[i] = newOrder(t, db, acc, "h100-80g", 1, 1)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range refs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = p.Reserve(ctx, activities.ReserveInput{OrderRef: refs[i], GPUModel: "h100-80g", GPUs: 1})
		}(i)
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else if domain.ErrorCode(err) != domain.ECodeNoCapacity {
			t.Fatalf("unexpected: %v", err)
		}
	}
	if ok != 3 {
		t.Fatalf("%d reservations succeeded for 3 GPUs", ok)
	}
}
