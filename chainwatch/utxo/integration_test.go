package utxo_test

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/domain"
)

// Integration tests on real regtest nodes (btcd, Litecoin Core), a real
// Temporal dev server running RentalWorkflow with the real activities and the
// localpg provisioner, and a fresh PostgreSQL database:
//
//	go test ./chainwatch/utxo -v                       # everything (about 70 s)
//	go test ./chainwatch/utxo -run 'Test(Bitcoin|Litecoin)' -v
//	go test ./chainwatch/utxo -run 'TestWatcherKilled|TestTwoWatchers' -v
//	go test ./chainwatch/utxo -short                   # unit tests only
//
// They start and stop the nodes themselves (free ports, temp dirs); btcd and
// litecoind come from scripts/ensure-tools.sh.

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: real nodes and a Temporal dev server")
	}
}

func TestBitcoinPayments(t *testing.T) {
	skipShort(t)
	paymentScenarios(t, startBtcd(t))
}

func TestLitecoinPayments(t *testing.T) {
	skipShort(t)
	paymentScenarios(t, startLitecoind(t))
}

func TestBitcoinLatePayment(t *testing.T) {
	skipShort(t)
	latePayment(t, startBtcd(t))
}

func TestLitecoinLatePayment(t *testing.T) {
	skipShort(t)
	latePayment(t, startLitecoind(t))
}

// paymentScenarios runs, on one harness and one watcher, the cases a real
// gateway has: exact, under then remainder, over, and a reorganisation that
// removes a seen payment before its confirmation. They run in sequence on
// the same *testing.T (the harness fails through it), each on its own order.
func paymentScenarios(t *testing.T, n node) {
	f := newFixture(t, n, apptest.Options{})
	f.runWatcher("watcher-" + f.network)

	t.Log("scenario: exact")
	{
		o, in := f.order()
		if o.Status != domain.StatusAwaitingPayment {
			t.Fatalf("new order is %s", o.Status)
		}
		txid, _ := n.pay(in.Address, amountOf(in))
		hash := n.mine(1)[0]
		f.checkBlockAgainstRaw(hash)
		// One confirmation is "seen": detected, not paid.
		f.e.WaitOrderStatus(o.Ref, domain.StatusPaymentDetected)
		f.waitPayments("payment seen", in.ID, onePayment("seen"))
		f.confirmRest()
		got := f.e.WaitOrderStatus(o.Ref, domain.StatusActive)
		ps := f.waitPayments("payment confirmed", in.ID, onePayment("confirmed"))
		if ps[0].TxID != txid || ps[0].AmountBase != in.AmountBase.String() || ps[0].AmountCents != in.USDCents || ps[0].Late {
			t.Fatalf("payment %+v, want %s of %s (%d cents)", ps[0], txid, in.AmountBase.String(), in.USDCents)
		}
		if got.PaidCents != o.TotalCents {
			t.Fatalf("paid %d cents, want %d", got.PaidCents, o.TotalCents)
		}
		// paid -> provisioning -> active, each status written with its event.
		f.inOrder(o.Ref, domain.EventPaymentRequested, domain.EventPaymentSeen, domain.EventPaymentConfirmed,
			domain.EventPaid, domain.EventProvisioningStep, domain.EventAccessAvailable)
		if c := f.count(o.Ref, domain.EventPaymentConfirmed); c != 1 {
			t.Fatalf("%d payment_confirmed events", c)
		}
	}

	t.Log("scenario: underpaid then remainder")
	{
		o, in := f.order()
		first := amountOf(in) * 2 / 5
		n.pay(in.Address, first)
		n.mine(int(n.policy()))
		// The first part confirmed: partial, still waiting for the rest.
		f.e.WaitFor("payment_partial", func() bool { return f.count(o.Ref, domain.EventPaymentPartial) == 1 })
		f.waitPayments("first part confirmed", in.ID, onePayment("confirmed"))
		mid := f.e.Order(o.Ref)
		if mid.Status != domain.StatusAwaitingPayment || mid.PaidCents <= 0 || mid.PaidCents >= o.TotalCents {
			t.Fatalf("after the first part: status %s, paid %d of %d", mid.Status, mid.PaidCents, o.TotalCents)
		}
		if f.count(o.Ref, domain.EventPaid) != 0 {
			t.Fatal("paid after the first part")
		}
		n.pay(in.Address, amountOf(in)-first)
		n.mine(int(n.policy()))
		got := f.e.WaitOrderStatus(o.Ref, domain.StatusActive)
		ps := f.waitPayments("both parts confirmed", in.ID, func(ps []apptest.ChainPayment) bool {
			return len(ps) == 2 && ps[0].State == "confirmed" && ps[1].State == "confirmed"
		})
		sum := new(big.Int)
		for _, p := range ps {
			v, _ := new(big.Int).SetString(p.AmountBase, 10)
			sum.Add(sum, v)
		}
		if sum.Cmp(&in.AmountBase.Int) != 0 || sumCents(ps) != in.USDCents {
			t.Fatalf("parts sum to %s (%d cents), want %s (%d cents)", sum, sumCents(ps), in.AmountBase.String(), in.USDCents)
		}
		if got.PaidCents != o.TotalCents {
			t.Fatalf("paid %d cents, want %d", got.PaidCents, o.TotalCents)
		}
		f.inOrder(o.Ref, domain.EventPaymentPartial, domain.EventPaymentConfirmed, domain.EventPaid, domain.EventAccessAvailable)
	}

	t.Log("scenario: overpaid")
	{
		o, in := f.order()
		paid := amountOf(in) + amountOf(in)/5
		n.pay(in.Address, paid)
		n.mine(int(n.policy()))
		f.e.WaitOrderStatus(o.Ref, domain.StatusActive)
		ps := f.waitPayments("payment confirmed", in.ID, onePayment("confirmed"))
		// The payment's value at the request's rate, floor(paid x cents / amount).
		wantCents := new(big.Int).Mul(big.NewInt(paid), big.NewInt(in.USDCents))
		wantCents.Quo(wantCents, &in.AmountBase.Int)
		if ps[0].AmountCents != wantCents.Int64() {
			t.Fatalf("payment worth %d cents, want %d", ps[0].AmountCents, wantCents.Int64())
		}
		evs := f.e.EventsOfKind(o.Ref, domain.EventPaymentConfirmed)
		if len(evs) != 1 {
			t.Fatalf("%d payment_confirmed events", len(evs))
		}
		over, _ := apptest.EventData(evs[0])["overpaid_cents"].(float64)
		if int64(over) != wantCents.Int64()-o.TotalCents || over <= 0 {
			t.Fatalf("overpaid_cents %v, want %d (event %s)", over, wantCents.Int64()-o.TotalCents, evs[0].Data)
		}
	}

	t.Log("scenario: reorg before confirmation")
	{
		o, in := f.order()
		txid, rawHex := n.pay(in.Address, amountOf(in))
		hash := n.mine(1)[0]
		f.e.WaitOrderStatus(o.Ref, domain.StatusPaymentDetected)
		f.waitPayments("payment seen", in.ID, onePayment("seen"))

		// The block carrying the payment leaves the best chain.
		if _, err := n.call("invalidateblock", hash); err != nil {
			t.Fatalf("invalidateblock: %v", err)
		}
		f.waitPayments("payment reverted", in.ID, onePayment("reverted"))
		f.e.WaitOrderStatus(o.Ref, domain.StatusAwaitingPayment)
		if c := f.count(o.Ref, domain.EventPaymentReverted); c != 1 {
			t.Fatalf("%d payment_reverted events", c)
		}

		// The same transaction is mined again on the new chain, in another
		// block, and confirms: counted once.
		rebroadcast(t, n, txid, rawHex)
		again := n.mine(1)[0]
		if again == hash {
			t.Fatal("the competing block is the invalidated one")
		}
		f.checkBlockAgainstRaw(again)
		f.waitPayments("payment seen again", in.ID, onePayment("seen"))
		f.e.WaitOrderStatus(o.Ref, domain.StatusPaymentDetected)
		f.confirmRest()
		got := f.e.WaitOrderStatus(o.Ref, domain.StatusActive)
		ps := f.waitPayments("payment confirmed", in.ID, onePayment("confirmed"))
		if ps[0].TxID != txid || ps[0].AmountCents != in.USDCents {
			t.Fatalf("payment %+v", ps[0])
		}
		if got.PaidCents != o.TotalCents {
			t.Fatalf("paid %d cents after the reorg, want %d (counted once)", got.PaidCents, o.TotalCents)
		}
		if s, c := f.count(o.Ref, domain.EventPaymentSeen), f.count(o.Ref, domain.EventPaymentConfirmed); s != 2 || c != 1 {
			t.Fatalf("%d payment_seen (want 2: before and after the reorg), %d payment_confirmed (want 1)", s, c)
		}
		f.inOrder(o.Ref, domain.EventPaymentSeen, domain.EventPaymentReverted, domain.EventPaymentSeen,
			domain.EventPaymentConfirmed, domain.EventPaid, domain.EventAccessAvailable)
	}

	hb, ok := n.(interface{ holdBack(txid string, hold bool) })
	if !ok {
		return
	}
	t.Log("scenario: longer competing chain without the payment, mined again later")
	{
		o, in := f.order()
		txid, _ := n.pay(in.Address, amountOf(in))
		hash := n.mine(1)[0]
		f.waitPayments("payment seen", in.ID, onePayment("seen"))
		f.e.WaitOrderStatus(o.Ref, domain.StatusPaymentDetected)
		tip, err := f.chain.Tip(f.e.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.call("invalidateblock", hash); err != nil {
			t.Fatalf("invalidateblock: %v", err)
		}
		hb.holdBack(txid, true)
		// Two blocks without the payment: the new chain is longer than the
		// one that had it.
		n.mine(2)
		f.waitPayments("payment reverted", in.ID, onePayment("reverted"))
		f.e.WaitOrderStatus(o.Ref, domain.StatusAwaitingPayment)
		if now, err := f.chain.Tip(f.e.Ctx); err != nil || now != tip+1 {
			t.Fatalf("tip %d (%v), want %d", now, err, tip+1)
		}
		hb.holdBack(txid, false)
		again := n.mine(1)[0]
		f.checkBlockAgainstRaw(again)
		f.waitPayments("payment seen again, higher", in.ID, onePayment("seen"))
		f.confirmRest()
		got := f.e.WaitOrderStatus(o.Ref, domain.StatusActive)
		ps := f.waitPayments("payment confirmed", in.ID, onePayment("confirmed"))
		if got.PaidCents != o.TotalCents || ps[0].AmountCents != in.USDCents {
			t.Fatalf("paid %d of %d, payment %+v", got.PaidCents, o.TotalCents, ps[0])
		}
		var height int64
		if err := f.e.DB.GetContext(f.e.Ctx, &height, `SELECT block_height FROM chain_payments WHERE txid = $1`, txid); err != nil {
			t.Fatal(err)
		}
		if height != tip+2 {
			t.Fatalf("payment recorded at height %d, want %d (mined again after the competing chain)", height, tip+2)
		}
		if c := f.count(o.Ref, domain.EventPaymentConfirmed); c != 1 {
			t.Fatalf("%d payment_confirmed events", c)
		}
	}
}

// latePayment pays after the request's deadline: recorded and confirmed,
// never provisioned automatically, handed to support.
func latePayment(t *testing.T, n node) {
	const deadline = 3 * time.Second
	f := newFixture(t, n, apptest.Options{Deadline: deadline})
	f.runWatcher("watcher-" + f.network)
	o, in := f.order()
	// Block times have a one-second resolution and must be after the
	// deadline.
	time.Sleep(time.Until(in.Deadline) + 1500*time.Millisecond)
	n.pay(in.Address, amountOf(in))
	n.mine(int(n.policy()))
	ps := f.waitPayments("late payment confirmed", in.ID, onePayment("confirmed"))
	if !ps[0].Late {
		t.Fatalf("payment %+v not flagged late", ps[0])
	}
	var ev domain.TimelineEvent
	f.e.WaitFor("payment_confirmed event", func() bool {
		evs := f.e.EventsOfKind(o.Ref, domain.EventPaymentConfirmed)
		if len(evs) > 0 {
			ev = evs[0]
		}
		return len(evs) > 0
	})
	data := apptest.EventData(ev)
	if data["late"] != true || data["to_support"] != true || !strings.Contains(ev.Message, "support") {
		t.Fatalf("late payment event: %s %s", ev.Message, ev.Data)
	}
	// Whatever the late payment led to is written once its workflow has
	// nothing left to do.
	f.e.WaitSettled(domain.RentalWorkflowID(o.Ref))
	got := f.e.Order(o.Ref)
	if got.Status != domain.StatusAwaitingPayment || got.PaidCents != 0 {
		t.Fatalf("late payment moved the order to %s (paid %d)", got.Status, got.PaidCents)
	}
	for _, k := range []string{domain.EventPaid, domain.EventProvisioningStep} {
		if c := f.count(o.Ref, k); c != 0 {
			t.Fatalf("late payment led to %d %s events", c, k)
		}
	}
}
