package solana

import (
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/payments"
	"github.com/kernodeck/kernodeck/workflows"
)

// TestSolanaOrderThroughRentalWorkflow pays a real order in SOL (Solana Pay
// request: the shop's address, its own reference) on the Solana stand-in and
// follows its RentalWorkflow, on a real Temporal dev server and PostgreSQL,
// through payment and provisioning to an active rental.
// A second order's payment, sent without its reference, is matched by its
// exact amount.
func TestSolanaOrderThroughRentalWorkflow(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the Temporal CLI and PostgreSQL")
	}
	env := apptest.New(t, apptest.Options{Networks: map[string]payments.Network{
		Network: {ShopAddress: shop},
	}})
	node := newSolanaStandIn(t, time.Now().UTC())
	w := &Watcher{RPCURL: node.srv.URL, Store: env.DB, Signaler: chainwatch.TemporalSignaler{Client: env.Temporal},
		Holder: "watchtest", Logger: env.Logger}
	account := env.NewAccount("sol-payer@example.com")

	o := env.NewOrder(account, 1)
	it, err := env.RequestOrderPayment(o.Ref, Asset, Network)
	if err != nil {
		t.Fatal(err)
	}
	if it.Address != shop || it.ReferenceKey == nil || *it.ReferenceKey == "" {
		t.Fatalf("intent %+v", it)
	}
	// 23.57 USD at 150 USD/SOL: 0.157133334 SOL, rounded up.
	if it.AmountBase.Cmp(big.NewInt(157_133_334)) < 0 {
		t.Fatalf("amount %s", it.AmountBase.String())
	}
	other := env.NewOrder(account, 1)
	otherIt, err := env.RequestOrderPayment(other.Ref, Asset, Network)
	if err != nil {
		t.Fatal(err)
	}

	// Half, then the rest; and a payment to the shop under no watched
	// reference.
	half := new(big.Int).Div(&it.AmountBase.Int, big.NewInt(2))
	node.pay(*it.ReferenceKey, shop, half.Int64())
	node.pay(newReference(t), shop, otherIt.AmountBase.Int64())
	if err := w.Step(env.Ctx); err != nil {
		t.Fatal(err)
	}
	env.WaitFor("first part delivered", func() bool {
		rows := env.ChainPayments(it.ID)
		return len(rows) == 1 && rows[0].SignaledState != nil && *rows[0].SignaledState == chainwatch.StateConfirmed
	})
	if got := env.Order(o.Ref).Status; got != domain.StatusAwaitingPayment {
		t.Fatalf("half-paid order is %s", got)
	}
	node.pay(*it.ReferenceKey, shop, new(big.Int).Sub(&it.AmountBase.Int, half).Int64())
	if err := w.Step(env.Ctx); err != nil {
		t.Fatal(err)
	}
	env.WaitFor(o.Ref+" paid and provisioning", func() bool {
		return len(env.EventsOfKind(o.Ref, domain.EventPaid)) == 1 &&
			len(env.EventsOfKind(o.Ref, domain.EventProvisioningStep)) > 0
	})
	kinds := env.Kinds(o.Ref)
	if i, j := slices.Index(kinds, domain.EventPaid), slices.Index(kinds, domain.EventProvisioningStep); i > j {
		t.Fatalf("timeline %v", kinds)
	}
	if n := len(env.EventsOfKind(o.Ref, domain.EventPaymentConfirmed)); n != 2 {
		t.Fatalf("%d payment_confirmed events, want 2", n)
	}
	// The payment to the shop without the other request's reference (an
	// exchange withdrawal cannot add one) is matched by its exact amount,
	// unique among the watched requests.
	rows := env.ChainPayments(otherIt.ID)
	if len(rows) != 1 || rows[0].AmountBase != otherIt.AmountBase.String() || rows[0].AmountCents != other.TotalCents {
		t.Fatalf("payment without reference: %+v", rows)
	}
	if got := env.WaitOrderStatus(other.Ref, domain.StatusActive); got.PaidCents != other.TotalCents {
		t.Fatalf("other order paid %d cents of %d", got.PaidCents, other.TotalCents)
	}
	if got := env.WaitOrderStatus(o.Ref, domain.StatusActive); got.PaidCents != o.TotalCents {
		t.Fatalf("paid %d cents of %d", got.PaidCents, o.TotalCents)
	}
	// An amount no watched request has, without reference: not ours to count.
	node.pay(newReference(t), shop, otherIt.AmountBase.Int64()+7)
	if err := w.Step(env.Ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := env.DB.GetContext(env.Ctx, &n, `SELECT count(*) FROM chain_payments WHERE network = 'solana'`); err != nil || n != 3 {
		t.Fatalf("%d solana payments recorded (%v), want 3", n, err)
	}
}

// TestSolanaDustTransfersSummarised: 5000 transfers of 1 lamport, each its
// own transaction carrying the request's (public) reference, are stored
// once each and reach the RentalWorkflow as running dust summaries (one per
// watcher step), not 5000 signals; the order is then paid and provisioned
// as usual, with a short history.
func TestSolanaDustTransfersSummarised(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the Temporal CLI and PostgreSQL")
	}
	const transfers = 5000
	env := apptest.New(t, apptest.Options{Networks: map[string]payments.Network{Network: {ShopAddress: shop}}})
	// The stand-in puts its transactions 2 s apart: the last one, the
	// payment, lands now, before the request's deadline.
	node := newSolanaStandIn(t, time.Now().UTC().Add(-transfers*2*time.Second))
	w := &Watcher{RPCURL: node.srv.URL, Store: env.DB, Signaler: chainwatch.TemporalSignaler{Client: env.Temporal},
		Logger: env.Logger, Dust: big.NewInt(100_000)}
	o := env.NewOrder(env.NewAccount("sol-dust@example.com"), 1)
	it, err := env.RequestOrderPayment(o.Ref, Asset, Network)
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	for i := range transfers {
		node.pay(*it.ReferenceKey, shop, 1)
		if (i+1)%2500 == 0 { // the watcher reads them in two steps
			if err := w.Step(env.Ctx); err != nil {
				t.Fatal(err)
			}
			steps++
		}
	}
	var n int
	if err := env.DB.GetContext(env.Ctx, &n, `SELECT count(*) FROM chain_payments
		WHERE intent_id = $1 AND dust AND state = 'confirmed' AND signaled_state IS NULL`, it.ID); err != nil || n != transfers {
		t.Fatalf("%d dust payments stored (%v), want %d", n, err, transfers)
	}
	node.pay(*it.ReferenceKey, shop, it.AmountBase.Int64())
	if err := w.Step(env.Ctx); err != nil {
		t.Fatal(err)
	}
	if got := env.WaitOrderStatus(o.Ref, domain.StatusActive); got.PaidCents != o.TotalCents {
		t.Fatalf("paid %d of %d", got.PaidCents, o.TotalCents)
	}
	signals, events := env.History(workflows.RentalWorkflowID(o.Ref))
	if signals[workflows.SignalPaymentDust] != steps || signals[workflows.SignalPaymentConfirmed] != 1 {
		t.Fatalf("signals %v: want %d payment-dust (one per step) and one payment-confirmed", signals, steps)
	}
	if events > 300 {
		t.Fatalf("history of %d events after %d dust transfers", events, transfers)
	}
	t.Logf("rental history: %d events, signals %v", events, signals)
}
