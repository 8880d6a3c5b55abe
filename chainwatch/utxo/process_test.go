package utxo_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
)

// TestWatcherKilledBetweenSeenAndConfirmed: a watcher process is killed
// with SIGKILL after it recorded and signalled a payment as seen, the
// confirming blocks are mined while no watcher runs, and a new watcher
// process (another holder, so it must take the dead one's lease over:
// its beacon is out, or at worst its time is up) confirms the payment,
// once.
func TestWatcherKilledBetweenSeenAndConfirmed(t *testing.T) {
	skipShort(t)
	forEachNode(t, func(t *testing.T, n node) {
		f := newFixture(t, n, apptest.Options{})
		relay := f.e.SignalRelay()
		// Long enough that the killed watcher's lease still runs when it is
		// checked below however loaded the machine, short enough that the
		// waits below outlast it should the beacon not end it.
		const lease = 20 * time.Second
		first := f.startChild(relay, "watcher-a", lease)
		o, in := f.order()
		n.pay(in.Address, amountOf(in))
		n.mine(1)
		f.waitPayments("payment seen and signalled", in.ID, onePayment("seen"))
		f.e.WaitOrderStatus(o.Ref, domain.StatusPaymentDetected)

		// kill waits for the process's end: from here until watcher-b
		// starts, no watcher runs, so the confirmations are left unread.
		first.kill()
		f.confirmRest()
		if ps := f.e.ChainPayments(in.ID); len(ps) != 1 || ps[0].State != "seen" {
			t.Fatalf("with no watcher running: %+v", ps)
		}
		if h := f.e.LeaseHolder(f.network); h != "watcher-a" {
			t.Fatalf("lease held by %q: the killed watcher's lease should run until it expires", h)
		}

		f.startChild(relay, "watcher-b", lease)
		got := f.e.WaitOrderStatus(o.Ref, domain.StatusActive)
		ps := f.waitPayments("payment confirmed", in.ID, onePayment("confirmed"))
		if ps[0].AmountCents != in.USDCents || got.PaidCents != o.TotalCents {
			t.Fatalf("payment %+v, order paid %d of %d", ps[0], got.PaidCents, o.TotalCents)
		}
		if s, cf := f.count(o.Ref, domain.EventPaymentSeen), f.count(o.Ref, domain.EventPaymentConfirmed); s != 1 || cf != 1 {
			t.Fatalf("%d payment_seen, %d payment_confirmed events; want 1 and 1", s, cf)
		}
		if h := f.e.LeaseHolder(f.network); h != "watcher-b" {
			t.Fatalf("lease held by %q, want watcher-b", h)
		}
	})
}

// TestTwoWatchersRecordOnce: two watcher processes with different holders
// follow the same node; the lease lets one act, and the payment is stored,
// signalled and counted once. Then the lease is bypassed: two in-process
// watchers step the same blocks concurrently, and the store is asked to
// record the same block twice; the payment row stays one.
func TestTwoWatchersRecordOnce(t *testing.T) {
	skipShort(t)
	n := startBtcd(t)
	f := newFixture(t, n, apptest.Options{})
	relay := f.e.SignalRelay()
	// A long lease: under load a renewal must not lapse, so that exactly
	// one of the two is ever active.
	a := f.startChild(relay, "watcher-a", 10*time.Second)
	b := f.startChild(relay, "watcher-b", 10*time.Second)
	o, in := f.order()
	n.pay(in.Address, amountOf(in))
	n.mine(int(n.policy()))
	got := f.e.WaitOrderStatus(o.Ref, domain.StatusActive)
	f.waitPayments("payment confirmed", in.ID, onePayment("confirmed"))
	if got.PaidCents != o.TotalCents || f.e.PaymentRows(f.network) != 1 {
		t.Fatalf("paid %d of %d, %d payment rows", got.PaidCents, o.TotalCents, f.e.PaymentRows(f.network))
	}
	if h := f.e.LeaseHolder(f.network); h != "watcher-a" && h != "watcher-b" {
		t.Fatalf("lease held by %q", h)
	}
	// Read before stopping: the survivor of a clean stop takes the
	// released lease over, as it should.
	var active []string
	for _, c := range []*child{a, b} {
		log, err := os.ReadFile(c.log)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(log), "watcher is active") {
			active = append(active, c.log)
		}
	}
	if len(active) != 1 {
		t.Fatalf("watchers that acted: %v, want exactly one", active)
	}
	a.stop()
	b.stop()

	t.Log("lease bypassed")
	{
		o2, in2 := f.order()
		n.pay(in2.Address, amountOf(in2))
		hash := n.mine(1)[0]
		// Two watchers step concurrently, without the lease (Step does not
		// take it): both read the block, both try to record the payment.
		ws := []*chainwatch.Watcher{f.e.Watcher(f.chain, n.policy()), f.e.Watcher(f.chain, n.policy())}
		ws[0].Holder, ws[1].Holder = "", "" // no lease, no fencing
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					caughtUp, err := w.Step(f.e.Ctx)
					if err != nil {
						// The loser of the race on the payment's key gets a
						// unique violation and retries.
						t.Logf("%s step: %v", w.Holder, err)
						continue
					}
					if caughtUp {
						return
					}
				}
			}()
		}
		wg.Wait()
		ps := f.waitPayments("payment seen once", in2.ID, onePayment("seen"))

		// And the store directly: the same block recorded twice.
		tip, err := f.chain.Tip(f.e.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		blk, err := f.chain.Block(f.e.Ctx, tip)
		if err != nil || blk.Hash != hash {
			t.Fatalf("block %d: %v (%s, want %s)", tip, err, blk.Hash, hash)
		}
		idx := chainwatch.NewIndex()
		addrs, err := f.e.DB.KnownAddresses(f.e.Ctx, f.network, 0)
		if err != nil {
			t.Fatal(err)
		}
		idx.Add(addrs...)
		var seen []chainwatch.Seen
		for _, out := range blk.Outputs {
			if idx.Has(out.Address) {
				seen = append(seen, chainwatch.Seen{TxID: out.TxID, Index: out.Index, Asset: out.Asset, Address: out.Address,
					Amount: out.Amount, BlockHeight: blk.Height, BlockHash: blk.Hash, BlockTime: blk.Time})
			}
		}
		if len(seen) != 1 || seen[0].Address != in2.Address {
			t.Fatalf("matched %+v", seen)
		}
		for range 2 {
			if err := f.e.DB.RecordBlock(context.WithoutCancel(f.e.Ctx), f.network, "", blk.Height, blk.Hash, seen); err != nil {
				t.Fatal(err)
			}
		}
		after := f.e.ChainPayments(in2.ID)
		if len(after) != 1 || after[0].State != ps[0].State || after[0].AmountBase != ps[0].AmountBase ||
			after[0].AmountCents != ps[0].AmountCents || *after[0].SignaledState != *ps[0].SignaledState {
			t.Fatalf("after recording the block twice: %+v, before %+v", after, ps)
		}

		// Confirm through the two watchers again: counted once.
		n.mine(int(n.policy()) - 1)
		for _, w := range ws {
			if _, err := w.Step(f.e.Ctx); err != nil && !strings.Contains(err.Error(), "duplicate") {
				t.Fatal(err)
			}
		}
		got := f.e.WaitOrderStatus(o2.Ref, domain.StatusActive)
		if got.PaidCents != o2.TotalCents || f.e.PaymentRows(f.network) != 2 {
			t.Fatalf("paid %d of %d, %d payment rows (want 2: one per order)", got.PaidCents, o2.TotalCents, f.e.PaymentRows(f.network))
		}
		if c := f.count(o2.Ref, domain.EventPaymentConfirmed); c != 1 {
			t.Fatalf("%d payment_confirmed events", c)
		}
	}
}
