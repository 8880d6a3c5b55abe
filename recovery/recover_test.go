package recovery_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/devserver"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/payments"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/rates"
	"github.com/kernodeck/kernodeck/recovery"
	"github.com/kernodeck/kernodeck/secrets"
	"github.com/kernodeck/kernodeck/workflows"
)

// testKeys seals Temporal payloads and access secrets (test only).
const testKeys = "rec1:cmVjb3ZlcnktdGVzdC1rZXktbm90LWZvci1wcm9kISE="

// day is a rental day here: a 3-day rental lasts 3*day.
const day = 8 * time.Second

func rentalConfig() workflows.RentalConfig {
	return workflows.RentalConfig{
		UnpaidTimeout: time.Hour, ProvisioningAttempts: 3, Day: day,
		// One reminder soon after delivery (before Temporal is lost),
		// one near the end (after the recovery).
		ReminderOffsets: []time.Duration{3*day - 2*time.Second, 4 * time.Second},
	}
}

const topUpTimeout = time.Hour

// chain is a bitcoin node the test mines blocks on.
type chain struct {
	mu     sync.Mutex
	blocks []chainwatch.Block
}

func newChain(n int) *chain {
	c := &chain{}
	for range n {
		c.mine()
	}
	return c
}

// mine adds a block paying outs.
func (c *chain) mine(outs ...chainwatch.Output) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := int64(len(c.blocks) + 1)
	c.blocks = append(c.blocks, chainwatch.Block{Height: h, Hash: fmt.Sprint("b", h), Parent: fmt.Sprint("b", h-1),
		Time: time.Now(), Outputs: outs})
}

func (c *chain) Network() string { return domain.NetworkBitcoin }
func (c *chain) Tip(context.Context) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(len(c.blocks)), nil
}
func (c *chain) BlockHash(_ context.Context, h int64) (string, error) { return fmt.Sprint("b", h), nil }
func (c *chain) Block(_ context.Context, h int64) (chainwatch.Block, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h < 1 || h > int64(len(c.blocks)) {
		return chainwatch.Block{}, fmt.Errorf("no block %d", h)
	}
	return c.blocks[h-1], nil
}

// pay mines a block paying intent it exactly.
func (c *chain) pay(it domain.Intent) {
	c.mine(chainwatch.Output{TxID: "tx-" + it.ID, Index: 0, Address: it.Address, Asset: it.Asset,
		Amount: new(big.Int).Set(&it.AmountBase.Int)})
}

// deriver hands out test addresses by index.
type deriver struct{}

func (deriver) Address(i uint32) (string, error) { return fmt.Sprintf("bcrt1qrecovery%06d", i), nil }

type fixedRates struct{}

func (fixedRates) Rate(_ context.Context, asset string) (rates.Rate, error) {
	if asset != "BTC" {
		return rates.Rate{}, rates.ErrUnknownAsset
	}
	return rates.Rate{Asset: asset, USDPerUnit: decimal.RequireFromString("50000"), Source: "test", At: time.Now()}, nil
}

// machines is a machine driver in memory: it counts each order's
// reservations, preparations and accesses created, and holds the
// preparation of the orders in hold until they are let go. Every step is
// idempotent by order, as the real drivers' are.
type machines struct {
	mu       sync.Mutex
	reserved map[string]bool
	accesses map[string]int
	prepares map[string]int
	released map[string]int
	hold     map[string]chan struct{}
}

func newMachines() *machines {
	return &machines{reserved: map[string]bool{}, accesses: map[string]int{}, prepares: map[string]int{},
		released: map[string]int{}, hold: map[string]chan struct{}{}}
}

func (m *machines) Reserve(_ context.Context, in activities.ReserveInput) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reserved[in.OrderRef] = true
	return nil
}

func (m *machines) Prepare(ctx context.Context, in activities.PrepareInput) error {
	m.mu.Lock()
	m.prepares[in.OrderRef]++
	gate := m.hold[in.OrderRef]
	m.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (m *machines) Verify(_ context.Context, in activities.VerifyInput) (activities.Verification, error) {
	return activities.Verification{GPUModel: in.GPUModel, GPUCount: in.GPUs, DriverVersion: "550", CUDAVersion: "12.4"}, nil
}

func (m *machines) CreateAccess(_ context.Context, in activities.CreateAccessInput) (activities.AccessSummary, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.reserved[in.OrderRef] {
		return activities.AccessSummary{}, fmt.Errorf("order %s has no machine", in.OrderRef)
	}
	m.accesses[in.OrderRef]++
	return activities.AccessSummary{Host: "gpu-recovery.local", Port: 22, Username: "u" + in.OrderRef}, nil
}

func (m *machines) RevokeAccess(context.Context, string) error { return nil }

func (m *machines) Release(_ context.Context, ref string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.released[ref]++
	return nil
}

func (m *machines) count(what map[string]int, ref string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return what[ref]
}

// temporal is one Temporal dev server with the application's worker and
// chain watcher on it: the "lost" one, then the one recovered into.
type temporal struct {
	srv     *devserver.Server
	tc      client.Client
	app     *app.App
	w       worker.Worker
	stopW   context.CancelFunc
	watchEd chan struct{}
}

func startTemporal(t *testing.T, db *postgres.DB, kr *secrets.Keyring, prov activities.Provisioner, ch *chain,
	logger *slog.Logger, cli string) *temporal {
	t.Helper()
	addr := freeAddr(t)
	logf, err := os.Create(filepath.Join(t.TempDir(), "temporal.log"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := devserver.Start(context.Background(), devserver.Options{CLI: cli, Addr: addr, Log: logf})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := client.Dial(app.ClientOptions(client.Options{HostPort: addr}, kr, nil, logger))
	if err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	pay := &payments.Service{Store: db, Rates: fixedRates{},
		Networks: map[string]payments.Network{domain.NetworkBitcoin: {Deriver: deriver{}}}}
	a := app.New(app.Config{DB: db, Temporal: tc, Keyring: kr, Payments: pay, Provisioner: prov,
		ProvisionerName: postgres.ProvisionerLocal, Logger: logger})
	w := a.Worker()
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	tp := &temporal{srv: srv, tc: tc, app: a, w: w, stopW: stop, watchEd: make(chan struct{})}
	watcher := a.Watcher(ch, app.WatcherOptions{Confirmations: 1, Holder: "recovery-test", Poll: 100 * time.Millisecond, Backfill: 3})
	go func() { defer close(tp.watchEd); _ = watcher.Run(wctx) }()
	t.Cleanup(tp.stop)
	return tp
}

// stop stops the watcher, the worker and the server: everything Temporal
// held is gone.
func (tp *temporal) stop() {
	if tp.srv == nil {
		return
	}
	tp.stopW()
	<-tp.watchEd
	tp.w.Stop()
	tp.tc.Close()
	tp.srv.Stop()
	tp.srv = nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestRecoverRebuildsEveryLiveWorkflow runs orders in every phase and a
// top-up awaiting payment, loses Temporal (its server stopped, a new one
// started empty), recovers, then pays, delivers and ends them: nothing is
// lost or doubled.
func TestRecoverRebuildsEveryLiveWorkflow(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the Temporal CLI and PostgreSQL")
	}
	cli, err := devserver.FindCLI(os.Getenv("KERNODECK_TEMPORAL_CLI"))
	if err != nil {
		t.Fatalf("%v (scripts/ensure-tools.sh installs it)", err)
	}
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db := pgtest.NewDB(t)
	kr, err := secrets.Parse(testKeys)
	if err != nil {
		t.Fatal(err)
	}
	prov := newMachines()
	ch := newChain(5)
	first := startTemporal(t, db, kr, prov, ch, logger, cli)

	acc, err := db.CreateAccount(ctx, domain.Account{FirstName: "Re", LastName: "Covery", Email: "recover@example.com"}, "x")
	if err != nil {
		t.Fatal(err)
	}
	newOrder := func() domain.Order {
		t.Helper()
		item, err := db.CatalogItem(ctx, "rtx-a5000")
		if err != nil {
			t.Fatal(err)
		}
		q, err := domain.PriceQuote(item, domain.Configuration{Model: "rtx-a5000", Lots: 1, DurationDays: 3, Preset: "python"})
		if err != nil {
			t.Fatal(err)
		}
		o, err := db.CreateOrder(ctx, acc.ID, q)
		if err != nil {
			t.Fatal(err)
		}
		if err := first.app.Workflows.StartRental(ctx, workflows.NewRentalInput(o, rentalConfig())); err != nil {
			t.Fatal(err)
		}
		if err := db.MarkOrderWorkflowStarted(ctx, o.Ref); err != nil {
			t.Fatal(err)
		}
		return o
	}
	orderIntent := func(tp *temporal, ref string) domain.Intent {
		t.Helper()
		it, err := tp.app.Workflows.CreateOrderIntent(ctx, ref, workflows.IntentRequest{Asset: "BTC", Network: domain.NetworkBitcoin})
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	order := func(ref string) domain.Order {
		t.Helper()
		o, err := db.GetOrder(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	waitStatus := func(ref, status string, within time.Duration) domain.Order {
		t.Helper()
		var o domain.Order
		waitUntil(t, within, func() bool { o = order(ref); return o.Status == status },
			func() string { return fmt.Sprintf("order %s is %s, want %s", ref, o.Status, status) })
		return o
	}

	// partial: an order paid in part (its request made first, so its
	// amount is exactly 20 satoshi a cent).
	partial := newOrder()
	partialReq := orderIntent(first, partial.Ref)
	if partialReq.AmountBase.Int.Cmp(big.NewInt(47140)) != 0 {
		t.Fatalf("the partly paid order's request asks %s satoshi, want 47140", partialReq.AmountBase.String())
	}
	payPart := func(txid string, sats int64) {
		ch.mine(chainwatch.Output{TxID: txid, Address: partialReq.Address, Asset: "BTC", Amount: big.NewInt(sats)})
	}
	payPart("tx-part-1", 30000) // 15.00 USD of 23.57
	// awaiting: an order with its payment request, unpaid.
	awaiting := newOrder()
	awaitingReq := orderIntent(first, awaiting.Ref)
	// provisioning: paid, its preparation held until after the recovery.
	provisioning := newOrder()
	prov.hold[provisioning.Ref] = make(chan struct{})
	provisioningReq := orderIntent(first, provisioning.Ref)
	// active: paid and delivered, its period running.
	active := newOrder()
	activeReq := orderIntent(first, active.Ref)
	// A top-up awaiting payment, with its request.
	tu, err := db.CreateTopUp(ctx, acc.ID, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.app.Workflows.StartTopUp(ctx, workflows.NewTopUpInput(tu, topUpTimeout)); err != nil {
		t.Fatal(err)
	}
	topUpReq, err := first.app.Workflows.CreateTopUpIntent(ctx, tu.Ref, workflows.IntentRequest{Asset: "BTC", Network: domain.NetworkBitcoin})
	if err != nil {
		t.Fatal(err)
	}

	ch.pay(provisioningReq)
	ch.pay(activeReq)
	waitPaid := func(ref string, cents int64) {
		t.Helper()
		waitUntil(t, time.Minute, func() bool { return order(ref).PaidCents == cents },
			func() string { return fmt.Sprintf("order %s paid %d cents, want %d", ref, order(ref).PaidCents, cents) })
	}
	waitPaid(partial.Ref, 1500)
	waitStatus(provisioning.Ref, domain.StatusProvisioning, time.Minute)
	activeBefore := waitStatus(active.Ref, domain.StatusActive, time.Minute)
	waitUntil(t, time.Minute, func() bool {
		return prov.count(prov.prepares, provisioning.Ref) > 0 && slices.ContainsFunc(timelineKeys(t, db, active.Ref), isReminder)
	}, func() string {
		return fmt.Sprintf("the held order never reached its preparation, or the active one its first reminder: %v", timelineKeys(t, db, active.Ref))
	})

	// Temporal's database is lost.
	first.stop()
	second := startTemporal(t, db, kr, prov, ch, logger, cli)
	rec := &recovery.Recoverer{Store: db, Workflows: second.app.Workflows, Rental: rentalConfig(),
		TopUpTimeout: topUpTimeout, Logger: logger}
	rep, err := rec.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{partial.Ref: "payment", awaiting.Ref: "payment", provisioning.Ref: "provision", active.Ref: "period", tu.Ref: "payment"}
	if fmt.Sprint(rep.Started) != fmt.Sprint(want) {
		t.Fatalf("recovered %v, want %v", rep.Started, want)
	}
	// Run again: everything exists, nothing starts twice.
	again, err := rec.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Started) != 0 || len(again.Existing) != 5 {
		t.Fatalf("second run started %v, left alone %v; want nothing started, 5 left alone", again.Started, again.Existing)
	}

	// The recovered workflows answer, each at its phase.
	v, err := second.tc.QueryWorkflow(ctx, workflows.RentalWorkflowID(awaiting.Ref), "", workflows.QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st workflows.RentalStatus
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	if st.Status != domain.StatusAwaitingPayment {
		t.Fatalf("recovered awaiting order is %s", st.Status)
	}

	// The payments the lost workflows had handled are delivered again to
	// the recovered ones, which know them: the partly paid order still
	// waits for the rest.
	waitUntil(t, time.Minute, func() bool {
		return countRows(t, db, `SELECT count(*) FROM chain_payments WHERE signaled_version IS DISTINCT FROM state_version`) == 0
	}, func() string { return "payments delivered again were never acknowledged" })
	if got := order(partial.Ref); got.PaidCents != 1500 || !slices.Contains([]string{domain.StatusAwaitingPayment, domain.StatusPaymentDetected}, got.Status) {
		t.Fatalf("the partly paid order is %s with %d cents after the recovery, want 1500 cents and still awaiting the rest", got.Status, got.PaidCents)
	}

	// Pay, deliver and end them.
	payPart("tx-part-2", 17140) // the rest: 8.57 USD
	close(prov.hold[provisioning.Ref])
	ch.pay(awaitingReq)
	ch.pay(topUpReq)
	waitStatus(awaiting.Ref, domain.StatusActive, time.Minute)
	waitStatus(partial.Ref, domain.StatusActive, time.Minute)
	waitStatus(provisioning.Ref, domain.StatusActive, time.Minute)
	activeAfter := waitStatus(active.Ref, domain.StatusEnded, time.Minute)
	waitTopUp(t, db, tu.Ref, domain.TopUpCredited)
	waitStatus(awaiting.Ref, domain.StatusEnded, time.Minute)
	waitStatus(provisioning.Ref, domain.StatusEnded, time.Minute)
	waitStatus(partial.Ref, domain.StatusEnded, time.Minute)

	// Nothing lost or doubled.
	if !activeAfter.PeriodEnd.Equal(*activeBefore.PeriodEnd) {
		t.Errorf("the active rental's end moved from %v to %v", activeBefore.PeriodEnd, activeAfter.PeriodEnd)
	}
	if activeAfter.EndedAt.Before(*activeBefore.PeriodEnd) {
		t.Errorf("the active rental ended at %v, before its end %v", activeAfter.EndedAt, activeBefore.PeriodEnd)
	}
	reminders := slices.DeleteFunc(timelineKeys(t, db, active.Ref), func(k string) bool { return !isReminder(k) })
	if len(reminders) != 2 {
		t.Errorf("the active rental's reminders: %v, want its two", reminders)
	}
	for _, o := range []domain.Order{partial, awaiting, provisioning, active} {
		got := order(o.Ref)
		if got.PaidCents != o.TotalCents {
			t.Errorf("order %s paid %d cents, want its total %d once", o.Ref, got.PaidCents, o.TotalCents)
		}
		if n := prov.count(prov.accesses, o.Ref); n != 1 {
			t.Errorf("order %s provisioned %d times, want once", o.Ref, n)
		}
		if n := countRows(t, db, `SELECT count(*) FROM timeline_events WHERE ref = $1 AND kind = $2`, o.Ref, domain.EventAccessAvailable); n != 1 {
			t.Errorf("order %s: %d access events, want 1", o.Ref, n)
		}
	}
	// The payments delivered again to the recovered workflows were known:
	// none is counted twice, nor queued for support as money received
	// beyond the total.
	for _, ref := range []string{partial.Ref, awaiting.Ref, provisioning.Ref, active.Ref, tu.Ref} {
		if n := countRows(t, db, `SELECT count(*) FROM payment_exceptions WHERE target_ref = $1`, ref); n != 0 {
			t.Errorf("%s: %d payments queued for support, want none", ref, n)
		}
	}

	bal, err := db.Balance(ctx, acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if bal.AvailableCents != tu.AmountCents {
		t.Errorf("balance %d cents after the top-up, want %d (credited once)", bal.AvailableCents, tu.AmountCents)
	}
}

func isReminder(k string) bool { return strings.HasPrefix(k, "reminder:") }

func timelineKeys(t *testing.T, db *postgres.DB, ref string) []string {
	t.Helper()
	var keys []string
	if err := db.SelectContext(context.Background(), &keys, `SELECT idem_key FROM timeline_events WHERE ref = $1 ORDER BY id`, ref); err != nil {
		t.Fatal(err)
	}
	return keys
}

func countRows(t *testing.T, db *postgres.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.GetContext(context.Background(), &n, q, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitTopUp(t *testing.T, db *postgres.DB, ref, status string) {
	t.Helper()
	var tu domain.TopUp
	waitUntil(t, time.Minute, func() bool {
		var err error
		if tu, err = db.GetTopUp(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
		return tu.Status == status
	}, func() string { return fmt.Sprintf("top-up %s is %s, want %s", ref, tu.Status, status) })
}

// waitUntil polls cond (every 50 ms) until it holds, failing with what
// failure says once within has passed.
func waitUntil(t *testing.T, within time.Duration, cond func() bool, failure func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(failure())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
