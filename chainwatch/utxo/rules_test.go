package utxo_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
)

// TestWatcherStoppedLongerThanTheWatchWindow: a watcher is stopped, a
// payment is mined before its request's deadline, and the watcher comes
// back two days later (its clock says so), long after the request's watch
// window (deadline + watch period) has ended. The payment is judged by its
// block's time: it is recorded, on time, and the order is paid. A payment
// mined to the same address after the window is recorded too, for support.
func TestWatcherStoppedLongerThanTheWatchWindow(t *testing.T) {
	skipShort(t)
	n := startBtcd(t)
	// Blocks mined in quick succession on regtest carry times ahead of the
	// clock (each must pass the median of the 11 before it): the request's
	// deadline is set from the chain's time, so that the first payment is
	// on time and the second one after the window.
	n.mine(20) // as much as paying may mine, for mature coins
	ahead := time.Until(tipTime(t, n)) + 10*time.Second
	f := newFixture(t, n, apptest.Options{Deadline: max(ahead, 0) + 30*time.Second, WatchAfter: time.Second})
	stop := f.startWatcher("watcher-before", nil)
	o, in := f.order()
	stored, err := f.e.DB.Intent(f.e.Ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	in.WatchUntil = stored.WatchUntil
	f.e.WaitFor("the watcher active", func() bool { return f.e.LeaseHolder(f.network) == "watcher-before" })
	stop()

	txid, _ := n.pay(in.Address, amountOf(in))
	n.mine(int(n.policy()))
	if bt := tipTime(t, n); !bt.Before(in.Deadline) {
		t.Fatalf("block time %s not before the deadline %s", bt, in.Deadline)
	}
	twoDaysLater := func() time.Time { return time.Now().Add(48 * time.Hour) }
	f.startWatcher("watcher-after", twoDaysLater)
	got := f.e.WaitOrderStatus(o.Ref, domain.StatusActive)
	ps := f.waitPayments("payment confirmed", in.ID, onePayment("confirmed"))
	if ps[0].TxID != txid || ps[0].Late || ps[0].ToSupport != nil || got.PaidCents != o.TotalCents {
		t.Fatalf("payment %+v, order paid %d of %d", ps[0], got.PaidCents, o.TotalCents)
	}

	// A payment to the address of a request no longer watched, by the
	// chain's time.
	f.e.WaitFor("the chain's time past the watch window", func() bool {
		n.mine(1)
		return tipTime(t, n).After(in.WatchUntil.Add(time.Second))
	})
	late, _ := n.pay(in.Address, 10_000)
	n.mine(int(n.policy()))
	f.e.WaitFor("payment after the window recorded", func() bool {
		return len(f.e.ChainPayments(in.ID)) == 2 && len(f.e.EventsOfKind(o.Ref, "payment_to_support")) == 1
	})
	var lateCents int64
	for _, p := range f.e.ChainPayments(in.ID) {
		if p.TxID == late && (p.ToSupport == nil || *p.ToSupport != "not_watched" || p.SignaledState != nil) {
			t.Fatalf("payment after the window: %+v", p)
		}
		if p.TxID == late {
			lateCents = p.AmountCents
		}
	}
	// Confirmed, it is in support's queue at the request's rate.
	var es []domain.Exception
	f.e.WaitFor("payment after the window queued", func() bool {
		es, err = f.e.DB.ExceptionsOf(f.e.Ctx, o.Ref)
		return err == nil && len(es) == 1
	})
	if es[0].Reason != domain.ExceptionNotWatched || es[0].TxID != late || es[0].AmountCents != lateCents || lateCents <= 0 || es[0].NeedsValue {
		t.Fatalf("queued: %+v (payment worth %d)", es[0], lateCents)
	}
	if got := f.e.Order(o.Ref); got.PaidCents != o.TotalCents {
		t.Fatalf("paid %d after the window's payment, want %d", got.PaidCents, o.TotalCents)
	}
}

// tipTime is the best block's time.
func tipTime(t *testing.T, n node) time.Time {
	t.Helper()
	raw, err := n.call("getbestblockhash")
	if err != nil {
		t.Fatal(err)
	}
	var hash string
	if err := json.Unmarshal(raw, &hash); err != nil {
		t.Fatal(err)
	}
	if raw, err = n.call("getblockheader", hash, true); err != nil {
		t.Fatal(err)
	}
	var h struct {
		Time int64 `json:"time"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	return time.Unix(h.Time, 0)
}

// TestReorgAfterConfirmationOnBtcd: a payment confirmed and signalled, then
// its block and the policy+1 blocks above it leave the best chain
// (invalidateblock, depth policy+2, then a longer chain without it): the
// payment is marked reverted after confirmation and the workflow receives
// payment-reverted with AfterConfirmation.
func TestReorgAfterConfirmationOnBtcd(t *testing.T) {
	skipShort(t)
	n := startBtcd(t)
	f := newFixture(t, n, apptest.Options{})
	f.startWatcher("watcher", nil)
	o, in := f.order()
	n.pay(in.Address, amountOf(in))
	depth := int(n.policy()) + 2
	hashes := n.mine(depth)
	f.waitPayments("payment confirmed", in.ID, onePayment("confirmed"))
	f.e.WaitFor("order paid", func() bool { return f.count(o.Ref, domain.EventPaid) == 1 })

	if _, err := n.call("invalidateblock", hashes[0]); err != nil {
		t.Fatalf("invalidateblock: %v", err)
	}
	// The best chain is now policy+2 blocks shorter; the transaction is
	// back in btcd's mempool.
	ps := f.waitPayments("payment reverted", in.ID, onePayment(chainwatch.StateReverted))
	if !ps[0].AfterConfirmation || ps[0].Reversals != 1 {
		t.Fatalf("payment %+v not marked reverted after confirmation (generation 1)", ps[0])
	}
	f.e.WaitFor("reverted after confirmation on the timeline", func() bool {
		for _, ev := range f.e.EventsOfKind(o.Ref, domain.EventPaymentReverted) {
			if apptest.EventData(ev)["after_confirmation"] == true {
				return true
			}
		}
		return false
	})
	// Provisioning had started: uncounted and flagged in support's queue
	// (not money), the order going on.
	f.e.WaitFor("reverted payment flagged for support", func() bool {
		xs, err := f.e.DB.ExceptionsOf(f.e.Ctx, o.Ref)
		return err == nil && len(xs) == 1 && xs[0].Reason == domain.ExceptionReverted && xs[0].ResolvedAt == nil &&
			f.e.Order(o.Ref).PaidCents == 0
	})
	// Mined again on the new chain: seen and confirmed again, counted
	// again once, and the flag closes by itself (nothing was paid out).
	n.mine(depth + 1)
	ps = f.waitPayments("payment confirmed again", in.ID, onePayment(chainwatch.StateConfirmed))
	if ps[0].AfterConfirmation || ps[0].Reversals != 1 {
		t.Fatalf("payment %+v still marked reverted, or not in generation 1", ps[0])
	}
	f.e.WaitFor("counted again once, flag resolved", func() bool {
		xs, err := f.e.DB.ExceptionsOf(f.e.Ctx, o.Ref)
		return err == nil && len(xs) == 1 && xs[0].Resolution == domain.ResolutionRemined &&
			f.e.Order(o.Ref).PaidCents == o.TotalCents
	})
}

// startWatcher runs an in-process watcher (on the clock now, if not nil)
// until the returned stop is called or the test ends.
func (f *fixture) startWatcher(holder string, now func() time.Time, configure ...func(*chainwatch.Watcher)) (stop func()) {
	f.t.Helper()
	w := f.e.Watcher(f.chain, f.n.policy())
	w.Holder, w.Now = holder, now
	for _, c := range configure {
		c(w)
	}
	ctx, cancel := context.WithCancel(f.e.Ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = w.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	f.t.Cleanup(stop)
	return stop
}
