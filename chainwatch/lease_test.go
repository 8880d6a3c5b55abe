package chainwatch_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/stretchr/testify/require"
)

// leaseTTL is short so that a delivery outlasting it takes a few seconds;
// the keeper renews every third of it.
const leaseTTL = 3 * time.Second

// payAddress is the address of the seeded payment request (36262 satoshi).
const payAddress = "bc1qleasekeeper"

// fakeChain is a bitcoin node at height tip whose tip block pays
// payAddress once per entry of paid, and whose mempool holds mempool.
type fakeChain struct {
	tip     int64
	paid    []int64
	mempool []chainwatch.MempoolTx
	// mempoolReads counts Mempool calls.
	mempoolReads atomic.Int32
}

func (c *fakeChain) Network() string                    { return "bitcoin" }
func (c *fakeChain) Tip(context.Context) (int64, error) { return c.tip, nil }
func (c *fakeChain) BlockHash(_ context.Context, h int64) (string, error) {
	return fmt.Sprint("h", h), nil
}

func (c *fakeChain) Block(_ context.Context, h int64) (chainwatch.Block, error) {
	b := chainwatch.Block{Height: h, Hash: fmt.Sprint("h", h), Parent: fmt.Sprint("h", h-1), Time: time.Now()}
	if h == c.tip {
		for i, amount := range c.paid {
			b.Outputs = append(b.Outputs, chainwatch.Output{TxID: "blocktx", Index: int64(i), Address: payAddress,
				Asset: "BTC", Amount: big.NewInt(amount)})
		}
	}
	return b, nil
}

func (c *fakeChain) Mempool(context.Context) ([]chainwatch.MempoolTx, error) {
	c.mempoolReads.Add(1)
	return c.mempool, nil
}

// TxState: every transaction stays in the mempool.
func (c *fakeChain) TxState(context.Context, string) (chainwatch.TxState, error) {
	return chainwatch.TxPending, nil
}

// gateSignaler acknowledges every signal; with gate set, the first one
// hands its context to entered and waits for release.
type gateSignaler struct {
	gate     bool
	entered  chan context.Context
	release  chan struct{}
	mu       sync.Mutex
	received []chainwatch.Pending
}

func newGate() *gateSignaler {
	return &gateSignaler{gate: true, entered: make(chan context.Context, 1), release: make(chan struct{})}
}

func (s *gateSignaler) Signal(ctx context.Context, p chainwatch.Pending) error {
	s.mu.Lock()
	s.received = append(s.received, p)
	first := len(s.received) == 1
	s.mu.Unlock()
	if first && s.gate {
		s.entered <- ctx
		<-s.release
	}
	return nil
}

func (s *gateSignaler) SignalDust(context.Context, chainwatch.DustPending) error { return nil }

func (s *gateSignaler) signals() []chainwatch.Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]chainwatch.Pending(nil), s.received...)
}

// seedRequest stores an order and its bitcoin payment request to
// payAddress.
func seedRequest(t *testing.T, db *postgres.DB) {
	t.Helper()
	acc, ref := pgtest.AccountWithOrder(t, db, "lease@example.com")
	if _, err := db.Exec(`INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals,
		amount_base, usd_cents, rate, rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until, request_key)
		VALUES ('PI-LEASE', 'order', $1, $2, 'BTC', 'bitcoin', 8, 36262, 2357, 65000, 'test', now(), $3, 1,
			'bitcoin:x', now() + interval '1 hour', now() + interval '25 hours', 'intent:1')`, ref, acc, payAddress); err != nil {
		t.Fatal(err)
	}
}

func newWatcher(db *postgres.DB, chain chainwatch.Chain, s chainwatch.Signaler, holder string) *chainwatch.Watcher {
	return &chainwatch.Watcher{Chain: chain, Store: db, Signaler: s, Holder: holder, LeaseTTL: leaseTTL,
		Policy: chainwatch.Policy{Confirmations: 1}}
}

// stepAsync runs w.Step and hands its error back.
func stepAsync(ctx context.Context, w *chainwatch.Watcher) <-chan error {
	done := make(chan error, 1)
	go func() { _, err := w.Step(ctx); done <- err }()
	return done
}

// waitFor waits until cond holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, time.Minute, 20*time.Millisecond, "timed out waiting for %s", what)
}

func receive[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// A delivery slower than the lease's TTL keeps the lease: its expiry keeps
// moving past the first one, and another watcher cannot take it meanwhile
// (before, the lease was renewed only between blocks and lapsed under a
// busy block's deliveries).
func TestSlowDeliveryKeepsTheLease(t *testing.T) {
	ctx := t.Context()
	db := pgtest.NewDB(t)
	seedRequest(t, db)
	chain := &fakeChain{tip: 5, paid: []int64{36262}}
	sig := newGate()
	done := stepAsync(ctx, newWatcher(db, chain, sig, "holder"))
	receive(t, "the delivery", sig.entered)

	var first time.Time
	if err := db.Get(&first, `SELECT expires_at FROM watcher_leases WHERE network = 'bitcoin' AND holder = 'holder'`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the delivery to outlast the first expiry, the lease still held", func() bool {
		var held bool
		err := db.Get(&held, `SELECT holder = 'holder' AND expires_at > now() AND now() > $1 FROM watcher_leases
			WHERE network = 'bitcoin'`, first)
		return err == nil && held
	})
	if _, err := newWatcher(db, chain, &gateSignaler{}, "standby").Step(ctx); !errors.Is(err, chainwatch.ErrLeaseLost) {
		t.Fatalf("standby step during the delivery: %v, want ErrLeaseLost", err)
	}

	close(sig.release)
	if err := receive(t, "the step", done); err != nil {
		t.Fatalf("holder's step: %v", err)
	}
	if got := sig.signals(); len(got) != 1 || got[0].State != chainwatch.StateConfirmed {
		t.Fatalf("signals %+v, want the payment confirmed once", got)
	}
}

// A holder whose lease is taken while it delivers stops: the signal in
// flight is cancelled, no later one is sent, and the step reports the
// loss.
func TestLostLeaseStopsSignals(t *testing.T) {
	ctx := t.Context()
	db := pgtest.NewDB(t)
	seedRequest(t, db)
	// Three payments to one request: delivered one after the other.
	chain := &fakeChain{tip: 5, paid: []int64{36262, 1000, 2000}}
	sig := newGate()
	done := stepAsync(ctx, newWatcher(db, chain, sig, "holder"))
	inFlight := receive(t, "the first signal", sig.entered)

	// The other watcher runs in a process of its own (its beacon lit: it
	// is alive), and takes the lease as if the holder's had run out.
	other := openProcess(t, db)
	if ok, err := other.AcquireLease(ctx, "bitcoin", "other", time.Hour); err != nil || ok {
		t.Fatalf("other watcher's lease while the holder is alive: %v %v, want refused", ok, err)
	}
	if _, err := db.Exec(`UPDATE watcher_leases SET holder = 'other', expires_at = now() + interval '1 hour'
		WHERE network = 'bitcoin'`); err != nil {
		t.Fatal(err)
	}
	receive(t, "the holder to notice the loss (the signal's context cancelled)", inFlight.Done())
	close(sig.release)
	if err := receive(t, "the step", done); !errors.Is(err, chainwatch.ErrLeaseLost) {
		t.Fatalf("step: %v, want ErrLeaseLost", err)
	}
	if got := sig.signals(); len(got) != 1 {
		t.Fatalf("%d signals sent, want only the one in flight when the lease was lost", len(got))
	}
}

// openProcess opens db's database as another process of the service
// would, closed at the end of the test.
func openProcess(t *testing.T, db *postgres.DB) *postgres.DB {
	t.Helper()
	p, err := postgres.Open(t.Context(), db.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// A holder whose process dies (its sessions end, nothing released) loses
// its lease to the standby's next step, with an hour of it left: the
// standby sees the holder's beacon gone. While the holder lives, the
// standby waits.
func TestDeadHolderLeaseTakenAtOnce(t *testing.T) {
	ctx := t.Context()
	db := pgtest.NewDB(t)
	seedRequest(t, db)
	holder := openProcess(t, db)
	if ok, err := holder.AcquireLease(ctx, "bitcoin", "holder", time.Hour); err != nil || !ok {
		t.Fatalf("holder's lease: %v %v", ok, err)
	}
	standby := newWatcher(db, &fakeChain{tip: 5, paid: []int64{36262}}, &gateSignaler{}, "standby")
	if _, err := standby.Step(ctx); !errors.Is(err, chainwatch.ErrLeaseLost) {
		t.Fatalf("standby's step while the holder lives: %v, want ErrLeaseLost", err)
	}
	if err := holder.Close(); err != nil { // the process dies: no ReleaseLease
		t.Fatal(err)
	}
	// PostgreSQL ends the holder's session as soon as it reads the closed
	// connection: the step after that takes over.
	waitFor(t, "the standby to take the lease over", func() bool {
		_, err := standby.Step(ctx)
		return err == nil
	})
	var who string
	if err := db.Get(&who, `SELECT holder FROM watcher_leases WHERE network = 'bitcoin'`); err != nil {
		t.Fatal(err)
	}
	if who != "standby" {
		t.Fatalf("lease held by %q, want the standby", who)
	}
}

// A watcher taking the lease over reads the node's mempool at once: a
// payment broadcast while the other watcher held the lease (and that
// watcher's notification lost) is detected before its block, with no new
// notification. Later steps do not read the whole mempool again.
func TestTakeoverReadsMempool(t *testing.T) {
	ctx := t.Context()
	db := pgtest.NewDB(t)
	seedRequest(t, db)
	chain := &fakeChain{tip: 5, mempool: []chainwatch.MempoolTx{{
		TxID: "mempooltx", Spends: []string{"prev:0"},
		Outputs: []chainwatch.Output{{TxID: "mempooltx", Address: payAddress, Asset: "BTC", Amount: big.NewInt(36262)}},
	}}}
	if ok, err := db.AcquireLease(ctx, "bitcoin", "old", time.Hour); err != nil || !ok {
		t.Fatalf("old holder's lease: %v %v", ok, err)
	}
	sig := &gateSignaler{}
	w := newWatcher(db, chain, sig, "standby")
	w.Mempool = chain
	if _, err := w.Step(ctx); !errors.Is(err, chainwatch.ErrLeaseLost) {
		t.Fatalf("standby step: %v, want ErrLeaseLost", err)
	}
	if err := db.ReleaseLease(ctx, "bitcoin", "old"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := w.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := sig.signals()
	if len(got) != 1 || got[0].TxID != "mempooltx" || !got[0].Mempool || got[0].State != chainwatch.StateSeen {
		t.Fatalf("signals %+v, want the mempool payment seen", got)
	}
	if n := chain.mempoolReads.Load(); n != 1 {
		t.Fatalf("mempool read %d times, want once (on takeover)", n)
	}
}
