package tron

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/codec"
	"github.com/kernodeck/kernodeck/payments"
	"github.com/kernodeck/kernodeck/workflows"
)

// TestReconcileConcurrentInOrderPerWorkflow: a block paying 8 real orders
// twice each is delivered to their RentalWorkflows on a real Temporal dev
// server with several workflows signalled at once; each workflow receives
// its two payments in the store's order, never two at once; the one
// workflow whose first signal fails gets neither of its payments in that
// pass (the others get all theirs), and both, in order, in the next pass.
func TestReconcileConcurrentInOrderPerWorkflow(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the Temporal CLI and PostgreSQL")
	}
	env := apptest.New(t, apptest.Options{Networks: map[string]payments.Network{
		Network: {Deriver: testDeriver{seed: t.Name()}},
	}})
	node := newTronStandIn(t, time.Now().UTC())
	chain, err := New(Config{URL: node.srv.URL})
	require.NoError(t, err)
	store := &listingStore{Store: env.DB}
	probe := &probeSignaler{inner: chainwatch.TemporalSignaler{Client: env.Temporal}, inFlight: map[string]int{},
		failNext: map[string]bool{}, concurrent: make(chan struct{})}
	w := env.Watcher(chain, Policy.Confirmations)
	w.Store, w.Signaler = store, probe
	_, err = w.Step(env.Ctx)
	require.NoError(t, err)

	account := env.NewAccount("reconcile@example.com")
	var refs, addrs []string
	for range 8 {
		o := env.NewOrder(account, 1)
		in, err := env.RequestOrderPayment(o.Ref, "TRX", Network)
		require.NoError(t, err)
		refs, addrs = append(refs, o.Ref), append(addrs, in.Address)
	}
	// Two parts of 94.28 TRX each, neither paying it all, in one block:
	// every first part's txid before every second part's, so the targets
	// interleave in the store's order.
	var txs []standInTx
	for _, amount := range []int64{30_000_000, 20_000_000} {
		for _, a := range addrs {
			txs = append(txs, trx(a, amount))
		}
	}
	stuck := refs[3]
	probe.fail(stuck)
	node.mineSolid(txs...)

	_, err = w.Step(env.Ctx)
	require.ErrorContains(t, err, stuck)
	listed := store.first()
	require.Len(t, listed, 16)
	require.GreaterOrEqual(t, probe.maxInFlight(), 2, "workflows signalled one at a time")
	require.Empty(t, probe.overlaps(), "a workflow signalled while its previous signal was in flight")
	require.Empty(t, probe.sentTo(stuck), "%s failed its first signal: nothing of it may be sent in that pass", stuck)
	for _, ref := range refs {
		if ref != stuck {
			requireSignals(t, env, ref, txidsOf(listed, ref))
		}
	}

	_, err = w.Step(env.Ctx)
	require.NoError(t, err)
	requireSignals(t, env, stuck, txidsOf(listed, stuck))
	for _, ref := range refs {
		require.Len(t, probe.sentTo(ref), 2, "%s: each payment sent once", ref)
	}
	require.Empty(t, probe.overlaps())
}

// requireSignals waits until the workflow's history holds its payment
// signals (a signal that arrives during a workflow task is written when
// the task completes), and checks they are want, in that order.
func requireSignals(t *testing.T, env *apptest.Env, ref string, want []string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, want, paymentSignals(t, env, ref), "%s: its payments, in the store's order", ref)
	}, 30*time.Second, 50*time.Millisecond)
}

// paymentSignals lists the txids of the payment signals in the order the
// workflow's history holds them.
func paymentSignals(t *testing.T, env *apptest.Env, ref string) []string {
	t.Helper()
	out := []string{}
	it := env.Temporal.GetWorkflowHistory(env.Ctx, workflows.RentalWorkflowID(ref), "", false,
		enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		a := ev.GetWorkflowExecutionSignaledEventAttributes()
		if a == nil || (a.GetSignalName() != workflows.SignalPaymentSeen && a.GetSignalName() != workflows.SignalPaymentConfirmed) {
			continue
		}
		var pe workflows.PaymentEvent
		// Sealed with the harness's keyring, as the application seals them.
		require.NoError(t, codec.DataConverter(env.Keyring).FromPayloads(a.GetInput(), &pe))
		out = append(out, pe.TxID)
	}
	return out
}

func txidsOf(ps []chainwatch.Pending, ref string) []string {
	out := []string{}
	for _, p := range ps {
		if p.TargetRef == ref {
			out = append(out, p.TxID)
		}
	}
	return out
}

// listingStore keeps the first non-empty list of pending payments the
// reconciler read: the order each workflow must receive its payments in.
type listingStore struct {
	chainwatch.Store
	mu     sync.Mutex
	listed []chainwatch.Pending
}

func (s *listingStore) Unsignaled(ctx context.Context, network string, skip []string, limit int) ([]chainwatch.Pending, error) {
	ps, err := s.Store.Unsignaled(ctx, network, skip, limit)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listed == nil && len(ps) > 0 {
		s.listed = slices.Clone(ps)
	}
	return ps, err
}

func (s *listingStore) first() []chainwatch.Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listed
}

// probeSignaler signals through Temporal and watches how: how many signals
// are in flight at once, any workflow signalled while its previous signal
// is in flight, and a failure on a chosen workflow's next signal. Each
// signal waits (at most a second) until two have been in flight at once,
// so a reconciler that signals one at a time cannot pass by chance.
type probeSignaler struct {
	inner    chainwatch.Signaler
	mu       sync.Mutex
	inFlight map[string]int
	total    int
	max      int
	overlap  []string
	failNext map[string]bool
	sent     []chainwatch.Pending
	// concurrent is closed once two signals were in flight together.
	concurrent chan struct{}
}

func (p *probeSignaler) Signal(ctx context.Context, pe chainwatch.Pending) error {
	p.mu.Lock()
	if p.inFlight[pe.TargetRef] > 0 {
		p.overlap = append(p.overlap, pe.TargetRef)
	}
	p.inFlight[pe.TargetRef]++
	p.total++
	if p.total == 2 && p.max < 2 {
		close(p.concurrent)
	}
	p.max = max(p.max, p.total)
	fail := p.failNext[pe.TargetRef]
	delete(p.failNext, pe.TargetRef)
	if !fail {
		p.sent = append(p.sent, pe)
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inFlight[pe.TargetRef]--
		p.total--
		p.mu.Unlock()
	}()
	// Held until a second signal is in flight (or a second passed: a
	// reconciler signalling one at a time is then seen by max, not hung).
	select {
	case <-p.concurrent:
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	if fail {
		return fmt.Errorf("workflow %s: deadline exceeded", pe.TargetRef)
	}
	return p.inner.Signal(ctx, pe)
}

func (p *probeSignaler) SignalDust(ctx context.Context, d chainwatch.DustPending) error {
	return p.inner.SignalDust(ctx, d)
}

func (p *probeSignaler) fail(ref string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failNext[ref] = true
}

func (p *probeSignaler) maxInFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max
}

func (p *probeSignaler) sentTo(ref string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return txidsOf(p.sent, ref)
}

func (p *probeSignaler) overlaps() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.overlap)
}
