package evm_test

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/params"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
)

// TestOtherAssetToARequestAddressGoesToSupport: USDT sent to an ETH
// request's address and ETH sent to a USDT request's address are recorded
// (nothing dropped), counted toward nothing, never signalled, and put on
// the order's timeline for support.
func TestOtherAssetToARequestAddressGoesToSupport(t *testing.T) {
	f := newFixture(t, 0)
	f.step()
	eth, usdt := f.order("ETH"), f.order("USDT")
	f.sc.pay("USDT", eth.intent.Address, big.NewInt(5_000_000))                                       // 5 USDT
	f.sc.pay("ETH", usdt.intent.Address, new(big.Int).Div(big.NewInt(params.Ether), big.NewInt(100))) // 0.01 ETH
	f.mine(confirmations)

	for _, c := range []struct {
		p            paidOrder
		asset, units string
	}{{eth, "USDT", "5000000"}, {usdt, "ETH", "10000000000000000"}} {
		var rows []apptest.ChainPayment
		f.env.WaitFor(c.asset+" to a "+c.p.asset+" request's address recorded", func() bool {
			rows = f.env.ChainPayments(c.p.intent.ID)
			return len(rows) == 1 && rows[0].State == chainwatch.StateConfirmed
		})
		r := rows[0]
		if r.Asset != c.asset || r.AmountBase != c.units || r.ToSupport == nil || *r.ToSupport != "other_asset" ||
			r.AmountCents != 0 || r.SignaledState != nil {
			t.Fatalf("%s request: %+v", c.p.asset, r)
		}
		evs := f.env.EventsOfKind(c.p.order.Ref, "payment_to_support")
		if len(evs) != 1 || apptest.EventData(evs[0])["txid"] != r.TxID || apptest.EventData(evs[0])["reason"] != "other_asset" {
			t.Fatalf("%s request: support events %+v", c.p.asset, evs)
		}
		o := f.env.Order(c.p.order.Ref)
		if o.Status != domain.StatusAwaitingPayment || o.PaidCents != 0 {
			t.Fatalf("%s request: order %s paid %d", c.p.asset, o.Status, o.PaidCents)
		}
		if n := len(f.env.EventsOfKind(c.p.order.Ref, domain.EventPaymentSeen)); n != 0 {
			t.Fatalf("%s request: %d payment_seen events", c.p.asset, n)
		}
		// In support's queue, with no value until support states one.
		es, err := f.env.DB.ExceptionsOf(f.env.Ctx, c.p.order.Ref)
		if err != nil || len(es) != 1 || es[0].Reason != domain.ExceptionOtherAsset || !es[0].NeedsValue ||
			es[0].AmountCents != 0 || es[0].TxID != r.TxID || es[0].Asset != c.asset || es[0].AmountBase != c.units {
			t.Fatalf("%s request: queue %+v %v", c.p.asset, es, err)
		}
		if !queued(t, f.env, es[0].ID) {
			t.Fatalf("%s request: not in the open queue", c.p.asset)
		}
	}
	// Support values the USDT (5 USD) and closes the ETH as sent back.
	for i, c := range []struct {
		p     paidOrder
		cents int64
	}{{eth, 500}, {usdt, 0}} {
		e, _ := f.env.DB.ExceptionsOf(f.env.Ctx, c.p.order.Ref)
		v := domain.ExceptionValue{ExceptionID: e[0].ID, ActionID: int64(i + 1), Agent: "a", AmountCents: c.cents, Reason: "cours du jour"}
		if err := f.env.DB.ValueException(f.env.Ctx, v); err != nil {
			t.Fatal(err)
		}
		if err := f.env.DB.ValueException(f.env.Ctx, v); domain.ErrorCode(err) != domain.ECodeConflict {
			t.Fatalf("second valuation: %v", err)
		}
		e, _ = f.env.DB.ExceptionsOf(f.env.Ctx, c.p.order.Ref)
		rows := f.env.ChainPayments(c.p.intent.ID)
		if e[0].NeedsValue || e[0].RemainingCents() != c.cents || rows[0].AmountCents != c.cents || queued(t, f.env, e[0].ID) != (c.cents > 0) {
			t.Fatalf("valued at %d: %+v, payment %+v", c.cents, e[0], rows[0])
		}
	}
	// The requests still take their own asset.
	f.pay(eth, eth.amount())
	f.mine(confirmations)
	f.waitActive(eth, eth.order.TotalCents)
}

// queued reports whether the exception is in support's open queue.
func queued(t *testing.T, env *apptest.Env, id int64) bool {
	t.Helper()
	open, err := env.DB.OpenExceptions(env.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range open {
		if e.ID == id {
			return true
		}
	}
	return false
}

// TestReorgAfterConfirmationIsSignalled: a reorganisation of depth policy+2
// (go-ethereum's simulated backend, Fork) removes payments already confirmed
// and signalled: each is marked reverted after confirmation and the
// workflow receives payment-reverted with AfterConfirmation.
func TestReorgAfterConfirmationIsSignalled(t *testing.T) {
	f := newFixture(t, 0)
	f.step()
	fork := f.sc.head()
	var ps []paidOrder
	for _, a := range assets {
		p := f.order(a)
		f.pay(p, p.amount())
		ps = append(ps, p)
	}
	const depth = confirmations + 2
	f.mine(depth)
	for _, p := range ps {
		f.waitPaymentStates(p, chainwatch.StateConfirmed, 1)
		f.env.WaitFor(p.asset+" paid", func() bool { return len(f.env.EventsOfKind(p.order.Ref, domain.EventPaid)) == 1 })
	}
	if err := f.sc.sim.Fork(fork.Hash()); err != nil {
		t.Fatal(err)
	}
	f.sc.sim.Rollback() // leave the dropped transactions out of the new branch
	f.sc.mine(depth + 1)
	f.step()
	for _, p := range ps {
		f.waitPaymentStates(p, chainwatch.StateReverted, 1)
		r := f.payments(p, 1)[0]
		if !r.AfterConfirmation {
			t.Fatalf("%s: %+v not marked reverted after confirmation", p.asset, r)
		}
		f.env.WaitFor(p.asset+" reverted after confirmation on the timeline", func() bool {
			for _, ev := range f.env.EventsOfKind(p.order.Ref, domain.EventPaymentReverted) {
				if apptest.EventData(ev)["after_confirmation"] == true {
					return true
				}
			}
			return false
		})
	}
}
