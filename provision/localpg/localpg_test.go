package localpg_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/provision/localpg"
	"github.com/kernodeck/kernodeck/secrets"
)

func testKeyring(t testing.TB) *secrets.Keyring {
	t.Helper()
	k, err := secrets.Parse(secrets.Generate("test"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newOrder(t testing.TB, db *postgres.DB, acc int64, model string, lots, perLot int) string {
	t.Helper()
	return pgtest.NewOrder(t, db, pgtest.Order{AccountID: acc, Model: model, Lots: lots, GPUsPerLot: perLot})
}

func TestFullCycleIsIdempotent(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash) VALUES ('a','b','p@x.io','h') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	kr := testKeyring(t)
	p := &localpg.Provisioner{Store: postgres.LocalGPUs{DB: db}, Host: "gpu.local", Port: 22, Keyring: kr}
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
	pw1 := pgtest.Access(t, db, ref).Password.String
	a2, err := p.CreateAccess(ctx, activities.CreateAccessInput{OrderRef: ref, Verification: v})
	if err != nil {
		t.Fatal(err)
	}
	pw2 := pgtest.Access(t, db, ref).Password.String
	if a1 != a2 || pw1 != pw2 || len(pw1) < 20 {
		t.Fatalf("access changed on retry: %+v %+v", a1, a2)
	}
	// Sealed at rest, and it opens to the generated password.
	if !secrets.IsSealed(pw1) {
		t.Fatalf("password stored in clear: %q", pw1)
	}
	if clear, err := postgres.AccessPassword.Open(kr, ref, pw1); err != nil || len(clear) < 20 {
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
	p := &localpg.Provisioner{Store: postgres.LocalGPUs{DB: db}, Host: "gpu.local", Port: 22, Keyring: testKeyring(t)}
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

// holdFor gives order ref a hold of gpus GPUs of model, live until until
// (status: the order's, which says whether the hold still counts).
func holdFor(t testing.TB, db *postgres.DB, ref, model, status string, gpus int, until string) {
	t.Helper()
	pgtest.SetOrderStatus(t, db, ref, status)
	if _, err := db.Exec(`INSERT INTO capacity_holds (order_ref, gpu_model, gpus, held_until)
		VALUES ($1, $2, $3, now() + $4::interval)`, ref, model, gpus, until); err != nil {
		t.Fatal(err)
	}
}

// 64 rentals reserve one model at once while other rentals hold some of it:
// the reservations never go past the inventory minus those holds, an order
// holding capacity always gets its reservation (its hold is consumed), each
// winner has one reservation and every loser is told no_capacity. A hold
// whose payment window is over counts for nothing and is given back.
func TestConcurrentReservationsRespectHolds(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	const model, total, racers = "h100-80g", 40, 64
	if _, err := db.Exec(`UPDATE gpu_inventory SET total_gpus = $2 WHERE gpu_model = $1`, model, total); err != nil {
		t.Fatal(err)
	}
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash) VALUES ('a','b','c@x.io','h') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	// Others' holds: 3 unpaid rentals within their window (2 GPUs each), one
	// paid order not provisioned yet (3 GPUs), one unpaid order whose window
	// is over (5 GPUs, not counted).
	var others []string
	for range 3 {
		ref := newOrder(t, db, acc, model, 2, 1)
		holdFor(t, db, ref, model, domain.StatusAwaitingPayment, 2, "1 hour")
		others = append(others, ref)
	}
	paid := newOrder(t, db, acc, model, 3, 1)
	holdFor(t, db, paid, model, domain.StatusPaid, 3, "-1 hour")
	others = append(others, paid)
	lapsed := newOrder(t, db, acc, model, 5, 1)
	holdFor(t, db, lapsed, model, domain.StatusAwaitingPayment, 5, "-1 minute")
	const othersHeld = 3*2 + 3

	p := &localpg.Provisioner{Store: postgres.LocalGPUs{DB: db}, Host: "gpu.local", Port: 22, Keyring: testKeyring(t)}
	refs := make([]string, racers)
	holders := map[string]bool{}
	for i := range refs {
		refs[i] = newOrder(t, db, acc, model, 1, 1)
		if i%8 == 0 { // some racers hold their GPU (paid, hold taken at checkout)
			holdFor(t, db, refs[i], model, domain.StatusPaid, 1, "1 hour")
			holders[refs[i]] = true
		}
	}
	errs := make([]error, racers)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			errs[i] = p.Reserve(ctx, activities.ReserveInput{OrderRef: refs[i], GPUModel: model, GPUs: 1})
		}()
	}
	start.Done()
	wg.Wait()
	won := map[string]bool{}
	for i, err := range errs {
		switch {
		case err == nil:
			won[refs[i]] = true
		case domain.ErrorCode(err) != domain.ECodeNoCapacity:
			t.Fatalf("reserve %s: %v", refs[i], err)
		case holders[refs[i]]:
			t.Fatalf("%s held its GPU and was refused: %v", refs[i], err)
		}
	}
	if len(won) != total-othersHeld {
		t.Fatalf("%d reservations won, want %d (%d GPUs, %d held by others)", len(won), total-othersHeld, total, othersHeld)
	}
	var rows []struct {
		Ref  string `db:"order_ref"`
		GPUs int    `db:"gpus"`
	}
	if err := db.Select(&rows, `SELECT order_ref, gpus FROM gpu_reservations WHERE gpu_model = $1 AND state <> 'released'`, model); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(won) {
		t.Fatalf("%d reservation rows for %d winners", len(rows), len(won))
	}
	for _, r := range rows {
		if !won[r.Ref] || r.GPUs != 1 {
			t.Fatalf("reservation %+v: not a winner's, or not 1 GPU", r)
		}
	}
	holdStates := func() map[string]string {
		var hs []struct {
			Ref   string `db:"order_ref"`
			State string `db:"state"`
		}
		if err := db.Select(&hs, `SELECT order_ref, state FROM capacity_holds`); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, h := range hs {
			m[h.Ref] = h.State
		}
		return m
	}
	states := holdStates()
	for ref := range holders {
		if states[ref] != "consumed" {
			t.Fatalf("winner %s's hold is %q, want consumed", ref, states[ref])
		}
	}
	for _, ref := range others {
		if states[ref] != "held" {
			t.Fatalf("other order %s's hold is %q, want held", ref, states[ref])
		}
	}
	if states[lapsed] != "released" {
		t.Fatalf("lapsed hold is %q, want released", states[lapsed])
	}

	// Reserving again is a no-op; a loser gets the GPU a winner releases.
	var winner, loser string
	for _, ref := range refs {
		if won[ref] && winner == "" {
			winner = ref
		}
		if !won[ref] && loser == "" {
			loser = ref
		}
	}
	if err := p.Reserve(ctx, activities.ReserveInput{OrderRef: winner, GPUModel: model, GPUs: 1}); err != nil {
		t.Fatalf("second reserve of %s: %v", winner, err)
	}
	if err := p.Reserve(ctx, activities.ReserveInput{OrderRef: loser, GPUModel: model, GPUs: 1}); domain.ErrorCode(err) != domain.ECodeNoCapacity {
		t.Fatalf("reserve with nothing free: %v", err)
	}
	if err := p.Release(ctx, winner); err != nil {
		t.Fatal(err)
	}
	if err := p.Reserve(ctx, activities.ReserveInput{OrderRef: loser, GPUModel: model, GPUs: 1}); err != nil {
		t.Fatalf("reserve after a release: %v", err)
	}
	if err := p.Reserve(ctx, activities.ReserveInput{OrderRef: winner, GPUModel: model, GPUs: 1}); domain.ErrorCode(err) != domain.ECodeNoCapacity {
		t.Fatalf("released order reserved again past capacity: %v", err)
	}
	var used int
	if err := db.Get(&used, `SELECT COALESCE(SUM(gpus), 0) FROM gpu_reservations WHERE gpu_model = $1 AND state <> 'released'`, model); err != nil {
		t.Fatal(err)
	}
	if used != total-othersHeld {
		t.Fatalf("%d GPUs reserved, want %d", used, total-othersHeld)
	}
}

// benchDB is a database whose model has capacity for any benchmark, and
// an account to order with.
func benchDB(b *testing.B, model string) (*postgres.DB, int64) {
	db := pgtest.NewDB(b)
	if _, err := db.Exec(`UPDATE gpu_inventory SET total_gpus = 1000000 WHERE gpu_model = $1`, model); err != nil {
		b.Fatal(err)
	}
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash) VALUES ('a','b','bench@x.io','h') RETURNING id`); err != nil {
		b.Fatal(err)
	}
	return db, acc
}

// BenchmarkReserveConcurrent reserves one GPU of the same model per
// iteration from 32 goroutines per CPU, with 200 other rentals' holds of the
// model present (issue 23: the burst's rentals are all one model).
func BenchmarkReserveConcurrent(b *testing.B) {
	ctx := context.Background()
	const model = "h100-80g"
	db, acc := benchDB(b, model)
	for range 200 {
		holdFor(b, db, newOrder(b, db, acc, model, 1, 1), model, domain.StatusPaid, 1, "1 hour")
	}
	refs := make([]string, b.N)
	for i := range refs {
		refs[i] = newOrder(b, db, acc, model, 1, 1)
	}
	p := &localpg.Provisioner{Store: postgres.LocalGPUs{DB: db}, Host: "gpu.local", Port: 22, Keyring: testKeyring(b)}
	var next atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ref := refs[next.Add(1)-1]
			if err := p.Reserve(ctx, activities.ReserveInput{OrderRef: ref, GPUModel: model, GPUs: 1}); err != nil {
				b.Error(fmt.Errorf("reserve %s: %w", ref, err))
				return
			}
		}
	})
}

// A paid order that holds its GPUs turns its hold into its reservation
// without waiting for the model's capacity lock (in a block paying
// thousands of rentals of one model, every reservation waited for it); an
// order without a hold still waits for the lock, and gets its reservation
// once the lock is given back.
func TestHeldReservationSkipsTheCapacityLock(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	const model = "h100-80g"
	if _, err := db.Exec(`UPDATE gpu_inventory SET total_gpus = 2 WHERE gpu_model = $1`, model); err != nil {
		t.Fatal(err)
	}
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash) VALUES ('a','b','l@x.io','h') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	held, unheld := newOrder(t, db, acc, model, 1, 1), newOrder(t, db, acc, model, 1, 1)
	holdFor(t, db, held, model, domain.StatusProvisioning, 1, "-1 hour") // paid: live past its window
	p := &localpg.Provisioner{Store: postgres.LocalGPUs{DB: db}, Host: "gpu.local", Port: 22, Keyring: testKeyring(t)}

	lock, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback() }()
	if err := postgres.LockCapacity(ctx, lock, model); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := p.Reserve(rctx, activities.ReserveInput{OrderRef: held, GPUModel: model, GPUs: 1}); err != nil {
		t.Fatalf("the order holding its GPU, while the capacity lock is taken: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Reserve(rctx, activities.ReserveInput{OrderRef: unheld, GPUModel: model, GPUs: 1}) }()
	pgtest.AwaitLockWaiters(t, db, 1) // the order without a hold waits for the lock
	if err := lock.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the order without a hold, once the lock is given back: %v", err)
	}
	var states []string
	if err := db.Select(&states, `SELECT h.state FROM capacity_holds h WHERE h.order_ref = $1
		UNION ALL SELECT r.state FROM gpu_reservations r WHERE r.order_ref IN ($1, $2) ORDER BY 1`, held, unheld); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(states) != "[consumed reserved reserved]" {
		t.Fatalf("hold and reservations %v, want the hold consumed and both reserved", states)
	}
}

// The real Provision activity, on this driver and PostgreSQL, writes each
// step's end and the next step's start in one transaction: four
// transactions for the seven step events, where it took seven. Run again
// from the start, as after a lost heartbeat, it writes nothing twice.
func TestProvisionWritesStepEndWithNextStart(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash) VALUES ('a','b','p@x.io','h') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	ref := newOrder(t, db, acc, "b200", 1, 2)
	acts := &activities.Activities{Store: db, Provisioner: &localpg.Provisioner{Store: postgres.LocalGPUs{DB: db}, Host: "gpu.local", Port: 22, Keyring: testKeyring(t)}}
	in := activities.ProvisionInput{OrderRef: ref, GPUModel: "b200", GPUs: 2, Preset: "pytorch", Attempt: 1}
	for range 2 {
		if _, err := acts.Provision(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	var rows []struct {
		Key string `db:"idem_key"`
		Tx  string `db:"tx"`
	}
	if err := db.Select(&rows, `SELECT idem_key, xmin::text AS tx FROM timeline_events
		WHERE ref = $1 AND kind = $2 ORDER BY id`, ref, domain.EventProvisioningStep); err != nil {
		t.Fatal(err)
	}
	var keys []string
	txs := map[string]bool{}
	for _, r := range rows {
		keys = append(keys, strings.TrimPrefix(r.Key, domain.KeyProvisioning(1, "")))
		txs[r.Tx] = true
	}
	want := []string{"reserve:done", "prepare:start", "prepare:done", "verify:start", "verify:done", "access:start", "access:done"}
	if !slices.Equal(keys, want) {
		t.Fatalf("step events %v, want %v", keys, want)
	}
	for i := 0; i+1 < len(rows)-1; i += 2 {
		if rows[i].Tx != rows[i+1].Tx {
			t.Errorf("%s and %s in transactions %s and %s, want one", keys[i], keys[i+1], rows[i].Tx, rows[i+1].Tx)
		}
	}
	if len(txs) != 4 {
		t.Errorf("step events written in %d transactions, want 4", len(txs))
	}
}

// BenchmarkProvision: the real Provision activity for one order, its four
// steps and their timeline events, on this driver and PostgreSQL.
func BenchmarkProvision(b *testing.B) {
	ctx := context.Background()
	const model = "h100-80g"
	db, acc := benchDB(b, model)
	refs := make([]string, b.N)
	for i := range refs {
		refs[i] = newOrder(b, db, acc, model, 1, 1)
	}
	acts := &activities.Activities{Store: db, Provisioner: &localpg.Provisioner{Store: postgres.LocalGPUs{DB: db}, Host: "gpu.local", Port: 22, Keyring: testKeyring(b)}}
	b.ResetTimer()
	for _, ref := range refs {
		if _, err := acts.Provision(ctx, activities.ProvisionInput{OrderRef: ref, GPUModel: model, GPUs: 1, Preset: "pytorch", Attempt: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
