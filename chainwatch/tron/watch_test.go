package tron

import (
	"crypto/sha256"
	"fmt"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/payments"
)

// testDeriver stands for the watch-only Tron account: distinct T-addresses
// per index (the watcher only needs them to be the intents' addresses).
type testDeriver struct{ seed string }

func (d testDeriver) Address(index uint32) (string, error) {
	h := sha256.Sum256(fmt.Appendf(nil, "%s/%d", d.seed, index))
	return Address([20]byte(h[:20])), nil
}

// waitActive waits until the order's RentalWorkflow counted the payment
// (payment_confirmed, then paid, then provisioning) and the rental is
// active, paid in full.
func waitActive(t *testing.T, env *apptest.Env, o domain.Order) {
	t.Helper()
	env.WaitFor(o.Ref+" paid and provisioning", func() bool {
		return len(env.EventsOfKind(o.Ref, domain.EventPaid)) == 1 &&
			len(env.EventsOfKind(o.Ref, domain.EventProvisioningStep)) > 0
	})
	kinds := env.Kinds(o.Ref)
	if i, j, k := slices.Index(kinds, domain.EventPaymentConfirmed), slices.Index(kinds, domain.EventPaid),
		slices.Index(kinds, domain.EventProvisioningStep); i < 0 || i > j || j > k {
		t.Fatalf("%s: timeline %v", o.Ref, kinds)
	}
	if got := env.WaitOrderStatus(o.Ref, domain.StatusActive); got.PaidCents != o.TotalCents {
		t.Fatalf("%s: paid %d cents of %d", o.Ref, got.PaidCents, o.TotalCents)
	}
}

// TestTronOrdersThroughRentalWorkflow pays real orders in TRX and in USDT
// (the latter in two parts) on the Tron stand-in and follows each
// RentalWorkflow, on a real Temporal dev server and PostgreSQL, through
// payment and provisioning to an active rental.
func TestTronOrdersThroughRentalWorkflow(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the Temporal CLI and PostgreSQL")
	}
	env := apptest.New(t, apptest.Options{Networks: map[string]payments.Network{
		Network: {Deriver: testDeriver{seed: t.Name()}, Tokens: map[string]string{"USDT": usdtMainnet}},
	}})
	node := newTronStandIn(t, time.Now().UTC())
	chain, err := New(Config{URL: node.srv.URL, Tokens: map[string]string{"USDT": usdtMainnet}})
	if err != nil {
		t.Fatal(err)
	}
	w := env.Watcher(chain, Policy.Confirmations)
	step := func() {
		t.Helper()
		for range 20 {
			caughtUp, err := w.Step(env.Ctx)
			if err != nil {
				t.Fatalf("watcher step: %v", err)
			}
			if caughtUp {
				return
			}
		}
		t.Fatal("watcher does not catch up")
	}
	step()
	account := env.NewAccount("tron-payer@example.com")

	trxOrder := env.NewOrder(account, 1)
	trxIntent, err := env.RequestOrderPayment(trxOrder.Ref, "TRX", Network)
	if err != nil {
		t.Fatal(err)
	}
	usdtOrder := env.NewOrder(account, 2)
	usdtIntent, err := env.RequestOrderPayment(usdtOrder.Ref, "USDT", Network)
	if err != nil {
		t.Fatal(err)
	}
	if usdtIntent.TokenContract == nil || *usdtIntent.TokenContract != usdtMainnet {
		t.Fatalf("USDT intent's contract %v", usdtIntent.TokenContract)
	}
	// 23.57 USD at 0.25 USD/TRX = 94.28 TRX; 47.14 USD = 47.14 USDT.
	if trxIntent.AmountBase.Cmp(big.NewInt(94_280_000)) < 0 || usdtIntent.AmountBase.Cmp(big.NewInt(47_140_000)) < 0 {
		t.Fatalf("amounts %s TRX, %s USDT", trxIntent.AmountBase.String(), usdtIntent.AmountBase.String())
	}

	full := new(big.Int).Set(&trxIntent.AmountBase.Int)
	part := big.NewInt(20_000_000)
	rest := new(big.Int).Sub(&usdtIntent.AmountBase.Int, part)
	node.mineSolid(
		standInTx{ID: txid(), To: trxIntent.Address, Amount: full},
		standInTx{ID: txid(), Token: true, To: usdtIntent.Address, Amount: part},
	)
	step()
	waitActive(t, env, trxOrder)
	env.WaitFor("USDT part delivered", func() bool {
		rows := env.ChainPayments(usdtIntent.ID)
		return len(rows) == 1 && rows[0].SignaledState != nil && *rows[0].SignaledState == chainwatch.StateConfirmed
	})
	if o := env.Order(usdtOrder.Ref); o.Status != domain.StatusAwaitingPayment {
		t.Fatalf("part-paid order is %s", o.Status)
	}

	node.mineSolid(standInTx{ID: txid(), Token: true, To: usdtIntent.Address, Amount: rest})
	step()
	waitActive(t, env, usdtOrder)
	if n := len(env.EventsOfKind(usdtOrder.Ref, domain.EventPaymentConfirmed)); n != 2 {
		t.Fatalf("USDT order: %d payment_confirmed events, want 2", n)
	}
	for _, p := range append(env.ChainPayments(trxIntent.ID), env.ChainPayments(usdtIntent.ID)...) {
		if p.State != chainwatch.StateConfirmed || p.Late {
			t.Fatalf("payment %+v", p)
		}
	}
}
