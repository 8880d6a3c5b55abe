package tron

import (
	"context"
	"errors"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/chainwatch"
)

// TestReconcileGoesOnPastAFailingWorkflow: one workflow that cannot be
// signalled holds back only its own payments; the others are delivered in
// the same pass, and the failing one is delivered once it answers again.
func TestReconcileGoesOnPastAFailingWorkflow(t *testing.T) {
	f := newFixture(t)
	stuck := f.intent("TRX", 25_000_000, 1000, time.Now().Add(time.Hour))
	fine := f.intent("TRX", 26_000_000, 1040, time.Now().Add(time.Hour))
	f.step()
	f.sig.failFor(stuck.TargetRef, true)
	// The stuck request's payment comes first in the block, and in the
	// reconciler's order.
	payStuck, payFine := trx(stuck.Address, 25_000_000), trx(fine.Address, 26_000_000)
	f.node.mineSolid(payStuck, payFine)

	_, err := f.w.Step(f.ctx)
	require.ErrorContains(t, err, stuck.TargetRef)
	got := f.sig.take()
	require.Len(t, got, 1)
	require.Equal(t, payFine.ID, got[0].TxID)
	require.Equal(t, chainwatch.StateConfirmed, got[0].State)
	require.Equal(t, map[string]string{payStuck.ID: "", payFine.ID: "confirmed"}, signaledStates(t, f))

	f.sig.failFor(stuck.TargetRef, false)
	f.step()
	got = f.sig.take()
	require.Len(t, got, 1)
	require.Equal(t, payStuck.ID, got[0].TxID)
	require.Equal(t, map[string]string{payStuck.ID: "confirmed", payFine.ID: "confirmed"}, signaledStates(t, f))
}

func signaledStates(t *testing.T, f *fixture) map[string]string {
	t.Helper()
	var rs []struct {
		TxID  string `db:"txid"`
		State string `db:"s"`
	}
	require.NoError(t, f.db.SelectContext(f.ctx, &rs, `SELECT txid, COALESCE(signaled_state, '') AS s FROM chain_payments`))
	out := map[string]string{}
	for _, r := range rs {
		out[r.TxID] = r.State
	}
	return out
}

// slowChain is a node that takes a while per block (a long catch-up).
type slowChain struct {
	*Chain
	delay time.Duration
}

func (c slowChain) Block(ctx context.Context, h int64) (chainwatch.Block, error) {
	select {
	case <-time.After(c.delay):
	case <-ctx.Done():
		return chainwatch.Block{}, ctx.Err()
	}
	return c.Chain.Block(ctx, h)
}

// write is one RecordBlock that the store accepted.
type write struct {
	holder     string
	height     int64
	start, end time.Time
}

// recordingStore logs the block writes the database accepted.
type recordingStore struct {
	chainwatch.Store
	mu     sync.Mutex
	writes []write
}

func (s *recordingStore) RecordBlock(ctx context.Context, network, holder string, height int64, hash string, ps []chainwatch.Seen) error {
	start := time.Now()
	err := s.Store.RecordBlock(ctx, network, holder, height, hash, ps)
	if err == nil {
		s.mu.Lock()
		s.writes = append(s.writes, write{holder, height, start, time.Now()})
		s.mu.Unlock()
	}
	return err
}

func (s *recordingStore) snapshot() []write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]write(nil), s.writes...)
}

// TestLeaseRenewedDuringSlowCatchUp: a watcher catching up on 60 blocks at
// 100 ms each (6 s) with a lease of 2.5 s keeps its lease by renewing it on
// the way (without renewal the second takes over after 2.5 s); a second
// watcher started meanwhile never writes, and every block is written once.
// A write by a holder without the lease is refused by the store.
func TestLeaseRenewedDuringSlowCatchUp(t *testing.T) {
	f := newFixture(t)
	in := f.intent("TRX", 25_000_000, 1000, time.Now().Add(time.Hour))
	var pay standInTx
	for i := range 60 {
		if i == 45 {
			pay = trx(in.Address, 25_000_000)
			f.node.mineSolid(pay)
			continue
		}
		f.node.mineSolid()
	}
	tip, err := f.w.Chain.Tip(f.ctx)
	require.NoError(t, err)
	store := &recordingStore{Store: f.db}
	watcher := func(holder string) *chainwatch.Watcher {
		w := f.watcher()
		w.Chain = slowChain{Chain: w.Chain.(*Chain), delay: 100 * time.Millisecond}
		w.Store, w.Holder, w.LeaseTTL, w.Poll, w.Backfill = store, holder, 2500*time.Millisecond, 20*time.Millisecond, 61
		return w
	}
	ctx, cancel := context.WithCancel(f.ctx)
	var wg sync.WaitGroup
	run := func(w *chainwatch.Watcher) {
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(ctx) }()
	}
	a, b := watcher("watcher-a"), watcher("watcher-b")
	run(a)
	require.Eventually(t, func() bool { return len(store.snapshot()) > 0 }, 10*time.Second, 5*time.Millisecond)
	run(b)
	require.Eventually(t, func() bool {
		ws := store.snapshot()
		return len(ws) > 0 && ws[len(ws)-1].height == tip
	}, 30*time.Second, 10*time.Millisecond)
	// A lease length after the catch-up, b is still waiting.
	deadline := time.Now().Add(a.LeaseTTL)
	require.Eventually(t, func() bool { return time.Now().After(deadline) }, 5*time.Second, 50*time.Millisecond)
	cancel()
	wg.Wait()

	ws := store.snapshot()
	require.Greater(t, ws[len(ws)-1].end.Sub(ws[0].start), 2*a.LeaseTTL, "the catch-up outlasted the lease")
	heights := map[int64]int{}
	for i, w := range ws {
		require.Equal(t, "watcher-a", w.holder, "write %d", i)
		heights[w.height]++
	}
	for h := ws[0].height; h <= tip; h++ {
		require.Equal(t, 1, heights[h], "block %d written %d times", h, heights[h])
	}
	rs := rows(t, f.db)
	require.Len(t, rs, 1)
	require.Equal(t, pay.ID, rs[0].TxID)

	// The store itself refuses a writer without the lease.
	err = f.db.RecordBlock(f.ctx, Network, "watcher-b", tip+1, "x", nil)
	require.True(t, errors.Is(err, chainwatch.ErrLeaseLost), "got %v", err)
}

// TestDustSummarisedNotSignalled: 500 TRX outputs of 1 sun to a request's
// address (one block) are stored, each once, and reach the workflow as one
// running summary per step, not as 500 signals; a normal payment in the
// same block is signalled as usual. More dust later gives a new version.
func TestDustSummarisedNotSignalled(t *testing.T) {
	f := newFixture(t)
	f.w.Dust = map[string]*big.Int{"TRX": big.NewInt(100_000)}
	in := f.intent("TRX", 25_000_000, 1000, time.Now().Add(time.Hour))
	f.step()
	var txs []standInTx
	for range 500 {
		txs = append(txs, trx(in.Address, 1))
	}
	pay := trx(in.Address, 25_000_000)
	f.node.mineSolid(append(txs, pay)...)
	f.step()

	got := f.sig.take()
	require.Len(t, got, 1)
	require.Equal(t, pay.ID, got[0].TxID)
	var n int
	require.NoError(t, f.db.GetContext(f.ctx, &n, `SELECT count(*) FROM chain_payments WHERE dust AND state = 'confirmed'`))
	require.Equal(t, 500, n)
	require.Equal(t, []chainwatch.DustPending{{Network: Network, Asset: "TRX", IntentID: in.ID, TargetKind: "order",
		TargetRef: in.TargetRef, Address: in.Address, Version: 1, Outputs: 500, AmountBase: "500", AmountCents: 0}}, f.sig.dust)

	// Stepping again sends nothing; 300 more give version 2 with the total.
	f.node.mineSolid()
	f.step()
	require.Len(t, f.sig.dust, 1)
	f.node.mineSolid(txs[:300]...) // the same transactions again: counted once
	var more []standInTx
	for range 300 {
		more = append(more, trx(in.Address, 2))
	}
	f.node.mineSolid(more...)
	f.step()
	require.Len(t, f.sig.dust, 2)
	require.Equal(t, int64(2), f.sig.dust[1].Version)
	require.Equal(t, int64(800), f.sig.dust[1].Outputs)
	require.Equal(t, "1100", f.sig.dust[1].AmountBase)
	require.Empty(t, f.sig.take())
}
