package evm_test

import (
	"context"
	"errors"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/chainwatch/evm"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/payments"
)

// confirmations is the Ethereum policy of these tests (the default one).
const confirmations = 12

var assets = []string{"ETH", "USDT", "USDC"}

// fixture is a simulated chain, the harness (Temporal dev server, worker,
// PostgreSQL) and an Ethereum watcher driven step by step.
type fixture struct {
	t       *testing.T
	sc      *simChain
	env     *apptest.Env
	der     *testDeriver
	watcher *chainwatch.Watcher
	account int64
}

func newFixture(t *testing.T, deadline time.Duration) *fixture {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the Temporal CLI and PostgreSQL (scripts/ensure-tools.sh)")
	}
	sc := newSimChain(t)
	der := newTestDeriver("kernodeck-evm-" + t.Name())
	env := apptest.New(t, apptest.Options{
		Networks: map[string]payments.Network{
			evm.Network: {Deriver: der, Tokens: sc.tokenConfig(true), ChainID: 1337},
		},
		Deadline: deadline,
	})
	ch, err := evm.New(env.Ctx, evm.Config{Client: sc.client, ChainID: 1337, Tokens: sc.tokenConfig(false)})
	if err != nil {
		t.Fatal(err)
	}
	w := env.Watcher(ch, confirmations)
	ch.SetWatched(evm.IndexFilter(w.Index()))
	return &fixture{t: t, sc: sc, env: env, der: der, watcher: w, account: env.NewAccount("payer-" + t.Name() + "@example.com")}
}

// step runs the watcher until it has caught up with the chain.
func (f *fixture) step() {
	f.t.Helper()
	for range 50 {
		caughtUp, err := f.watcher.Step(f.env.Ctx)
		if err != nil {
			f.t.Fatalf("watcher step: %v", err)
		}
		if caughtUp {
			return
		}
	}
	f.t.Fatal("watcher does not catch up")
}

// mine seals n blocks, then lets the watcher follow.
func (f *fixture) mine(n int) {
	f.t.Helper()
	f.sc.mine(n)
	f.step()
}

type paidOrder struct {
	asset  string
	order  domain.Order
	intent domain.Intent
}

func (p paidOrder) amount() *big.Int { return new(big.Int).Set(&p.intent.AmountBase.Int) }

// order creates an order and its payment request in asset through the
// workflow's create-payment-intent update.
func (f *fixture) order(asset string) paidOrder {
	f.t.Helper()
	o := f.env.NewOrder(f.account, 1)
	it, err := f.env.RequestOrderPayment(o.Ref, asset, evm.Network)
	if err != nil {
		f.t.Fatalf("payment request %s: %v", asset, err)
	}
	if it.Asset != asset || it.Network != evm.Network || it.USDCents != o.TotalCents || it.AmountBase.Sign() <= 0 {
		f.t.Fatalf("intent %+v for order of %d cents", it, o.TotalCents)
	}
	if asset != "ETH" && (it.TokenContract == nil || !common.IsHexAddress(*it.TokenContract) ||
		common.HexToAddress(*it.TokenContract) != f.sc.tokens[asset]) {
		f.t.Fatalf("%s intent token contract %v, want %s", asset, it.TokenContract, f.sc.tokens[asset].Hex())
	}
	return paidOrder{asset: asset, order: o, intent: it}
}

func (f *fixture) pay(p paidOrder, amount *big.Int) *types.Transaction {
	f.t.Helper()
	return f.sc.pay(p.asset, p.intent.Address, amount)
}

// payments returns an intent's chain_payments rows, checking their count.
func (f *fixture) payments(p paidOrder, n int) []apptest.ChainPayment {
	f.t.Helper()
	rows := f.env.ChainPayments(p.intent.ID)
	if len(rows) != n {
		f.t.Fatalf("%s: %d chain payments %+v, want %d", p.asset, len(rows), rows, n)
	}
	return rows
}

func (f *fixture) waitPaymentStates(p paidOrder, state string, n int) {
	f.t.Helper()
	f.env.WaitFor(p.asset+" payments "+state, func() bool {
		rows := f.env.ChainPayments(p.intent.ID)
		if len(rows) != n {
			return false
		}
		for _, r := range rows {
			if r.State != state || r.SignaledState == nil || *r.SignaledState != state {
				return false
			}
		}
		return true
	})
}

// waitActive waits until the order went through payment and provisioning
// to an active rental, paid exactly want cents.
func (f *fixture) waitActive(p paidOrder, paidCents int64) {
	f.t.Helper()
	f.env.WaitFor(p.asset+" provisioning", func() bool {
		return len(f.env.EventsOfKind(p.order.Ref, domain.EventProvisioningStep)) > 0
	})
	o := f.env.WaitOrderStatus(p.order.Ref, domain.StatusActive)
	if o.PaidCents != paidCents {
		f.t.Fatalf("%s: paid %d cents, want %d", p.asset, o.PaidCents, paidCents)
	}
	kinds := f.env.Kinds(p.order.Ref)
	// No payment_seen is required: a payment mined with all its
	// confirmations between two steps is signalled confirmed directly.
	for _, k := range []string{domain.EventPaymentConfirmed, domain.EventPaid,
		domain.EventProvisioningStep, domain.EventAccessAvailable} {
		if !slices.Contains(kinds, k) {
			f.t.Fatalf("%s: timeline %v lacks %s", p.asset, kinds, k)
		}
	}
	if i, j := slices.Index(kinds, domain.EventPaid), slices.Index(kinds, domain.EventProvisioningStep); i > j {
		f.t.Fatalf("%s: provisioning before payment: %v", p.asset, kinds)
	}
}

func sumAmounts(rows []apptest.ChainPayment) (*big.Int, int64) {
	sum, cents := new(big.Int), int64(0)
	for _, r := range rows {
		a, _ := new(big.Int).SetString(r.AmountBase, 10)
		sum.Add(sum, a)
		cents += r.AmountCents
	}
	return sum, cents
}

// TestEthereumPayments pays real orders in ETH, USDT and USDC (ERC-20
// contracts deployed on go-ethereum's simulated chain) and follows each
// RentalWorkflow on a real Temporal dev server: exact payment after 12
// confirmations, underpayment completed later, overpayment, failed
// transactions, and a reorganisation before confirmation.
func TestEthereumPayments(t *testing.T) {
	f := newFixture(t, 0)
	f.step() // the cursor starts here

	t.Run("exact", func(t *testing.T) {
		f.t = t
		var ps []paidOrder
		for _, a := range assets {
			p := f.order(a)
			f.pay(p, p.amount())
			ps = append(ps, p)
		}
		f.mine(1)
		for _, p := range ps {
			f.env.WaitOrderStatus(p.order.Ref, domain.StatusPaymentDetected)
			f.waitPaymentStates(p, chainwatch.StateSeen, 1)
		}
		f.mine(confirmations - 2) // 11 confirmations: not yet
		for _, p := range ps {
			if rows := f.payments(p, 1); rows[0].State != chainwatch.StateSeen {
				t.Fatalf("%s confirmed after %d blocks: %+v", p.asset, confirmations-1, rows)
			}
			if o := f.env.Order(p.order.Ref); o.Status != domain.StatusPaymentDetected {
				t.Fatalf("%s order %s before confirmation", p.asset, o.Status)
			}
		}
		f.mine(1)
		for _, p := range ps {
			f.waitPaymentStates(p, chainwatch.StateConfirmed, 1)
			rows := f.payments(p, 1)
			if rows[0].AmountBase != p.amount().String() || rows[0].AmountCents != p.order.TotalCents || rows[0].Late {
				t.Fatalf("%s payment %+v, want %s base units = %d cents", p.asset, rows[0], p.amount(), p.order.TotalCents)
			}
			if (p.asset == "ETH") != (rows[0].Index == evm.NativeIndex) || rows[0].Index > evm.NativeIndex {
				t.Fatalf("%s index %d (native value: %d, token: its log index)", p.asset, rows[0].Index, evm.NativeIndex)
			}
			f.waitActive(p, p.order.TotalCents)
		}
	})

	t.Run("underpaid then remainder", func(t *testing.T) {
		f.t = t
		var ps []paidOrder
		for _, a := range assets {
			p := f.order(a)
			part := new(big.Int).Div(p.amount(), big.NewInt(3))
			f.pay(p, part)
			ps = append(ps, p)
		}
		f.mine(confirmations)
		for _, p := range ps {
			f.waitPaymentStates(p, chainwatch.StateConfirmed, 1)
			f.env.WaitFor(p.asset+" partial payment", func() bool {
				return len(f.env.EventsOfKind(p.order.Ref, domain.EventPaymentPartial)) == 1
			})
			o := f.env.WaitOrderStatus(p.order.Ref, domain.StatusAwaitingPayment)
			if o.PaidCents <= 0 || o.PaidCents >= o.TotalCents {
				t.Fatalf("%s: paid %d of %d cents", p.asset, o.PaidCents, o.TotalCents)
			}
			rest := new(big.Int).Sub(p.amount(), new(big.Int).Div(p.amount(), big.NewInt(3)))
			f.pay(p, rest)
		}
		f.mine(confirmations)
		for _, p := range ps {
			f.waitPaymentStates(p, chainwatch.StateConfirmed, 2)
			sum, cents := sumAmounts(f.payments(p, 2))
			if sum.Cmp(p.amount()) != 0 || cents != p.order.TotalCents {
				t.Fatalf("%s: parts sum to %s base units, %d cents; want %s, %d", p.asset, sum, cents, p.amount(), p.order.TotalCents)
			}
			f.waitActive(p, p.order.TotalCents)
		}
	})

	t.Run("overpaid", func(t *testing.T) {
		f.t = t
		var ps []paidOrder
		for _, a := range assets {
			p := f.order(a)
			f.pay(p, new(big.Int).Mul(p.amount(), big.NewInt(2)))
			ps = append(ps, p)
		}
		f.mine(confirmations)
		for _, p := range ps {
			f.waitActive(p, 2*p.order.TotalCents)
			evs := f.env.EventsOfKind(p.order.Ref, domain.EventPaymentConfirmed)
			if len(evs) != 1 {
				t.Fatalf("%s: %d payment_confirmed events", p.asset, len(evs))
			}
			if got := apptest.EventData(evs[0])["overpaid_cents"]; got != float64(p.order.TotalCents) {
				t.Fatalf("%s: overpaid_cents %v, want %d (data %s)", p.asset, got, p.order.TotalCents, evs[0].Data)
			}
		}
	})

	t.Run("failed transactions", func(t *testing.T) {
		f.t = t
		// A second payer with ETH for gas but no tokens: its token
		// transfers of the exact amount revert.
		poor := f.sc.fundedAccount(big.NewInt(params.Ether))
		f.der.enqueue(revertingAddr.Hex()) // the ETH request's address rejects value
		var ps []paidOrder
		var failed []*types.Transaction
		for _, a := range assets {
			p := f.order(a)
			if a == "ETH" {
				if p.intent.Address != revertingAddr.Hex() {
					t.Fatalf("ETH intent address %s", p.intent.Address)
				}
				failed = append(failed, f.sc.send(&revertingAddr, p.amount(), nil, 100_000))
			} else {
				failed = append(failed, poor.payToken(a, common.HexToAddress(p.intent.Address), p.amount(), 100_000))
			}
			ps = append(ps, p)
		}
		f.mine(confirmations)
		for _, tx := range failed {
			if r := f.sc.receipt(tx); r.Status != types.ReceiptStatusFailed {
				t.Fatalf("tx %s did not fail", tx.Hash().Hex())
			}
		}
		for _, p := range ps {
			f.payments(p, 0)
			if o := f.env.Order(p.order.Ref); o.Status != domain.StatusAwaitingPayment || o.PaidCents != 0 {
				t.Fatalf("%s: failed transaction counted: order %s, %d cents", p.asset, o.Status, o.PaidCents)
			}
		}
		// The token requests are then paid for real: counted once.
		for _, p := range ps[1:] {
			f.pay(p, p.amount())
		}
		f.mine(confirmations)
		for _, p := range ps[1:] {
			f.waitActive(p, p.order.TotalCents)
			f.payments(p, 1)
		}
		f.payments(ps[0], 0)
	})

	t.Run("reorg before confirmation", func(t *testing.T) {
		f.t = t
		var ps []paidOrder
		var txs []*types.Transaction
		fork := f.sc.head()
		for _, a := range assets {
			p := f.order(a)
			txs = append(txs, f.pay(p, p.amount()))
			ps = append(ps, p)
		}
		f.mine(1)
		for _, p := range ps {
			f.env.WaitOrderStatus(p.order.Ref, domain.StatusPaymentDetected)
			f.waitPaymentStates(p, chainwatch.StateSeen, 1)
		}
		// A longer branch from the block before the payments, without
		// them, becomes the chain.
		if err := f.sc.sim.Fork(fork.Hash()); err != nil {
			t.Fatal(err)
		}
		f.sc.sim.Rollback() // the pool took the dropped transactions back: leave them out
		f.sc.mine(2)
		for _, tx := range txs {
			if _, err := f.sc.client.TransactionReceipt(f.sc.ctx, tx.Hash()); !errors.Is(err, ethereum.NotFound) {
				t.Fatalf("tx %s still on the chain after the fork: %v", tx.Hash().Hex(), err)
			}
		}
		f.step()
		for _, p := range ps {
			f.waitPaymentStates(p, chainwatch.StateReverted, 1)
			f.env.WaitOrderStatus(p.order.Ref, domain.StatusAwaitingPayment)
			if n := len(f.env.EventsOfKind(p.order.Ref, domain.EventPaymentReverted)); n != 1 {
				t.Fatalf("%s: %d payment_reverted events", p.asset, n)
			}
		}
		// The same transactions are mined again: seen again, counted once.
		for _, tx := range txs {
			f.sc.resend(tx)
		}
		f.mine(1)
		for _, p := range ps {
			f.waitPaymentStates(p, chainwatch.StateSeen, 1)
			f.env.WaitOrderStatus(p.order.Ref, domain.StatusPaymentDetected)
		}
		f.mine(confirmations - 1)
		for i, p := range ps {
			f.waitPaymentStates(p, chainwatch.StateConfirmed, 1)
			f.waitActive(p, p.order.TotalCents)
			rows := f.payments(p, 1)
			if rows[0].TxID != txs[i].Hash().Hex() || rows[0].AmountCents != p.order.TotalCents {
				t.Fatalf("%s: payment %+v", p.asset, rows[0])
			}
			if n := len(f.env.EventsOfKind(p.order.Ref, domain.EventPaymentConfirmed)); n != 1 {
				t.Fatalf("%s: %d payment_confirmed events", p.asset, n)
			}
		}
	})
}

// TestEthereumWatcherRestart: payments seen by one watcher are confirmed by
// another one started later (a restart, or a failover after the lease),
// running on its own (Run, polling), from the persisted cursor: nothing
// missed, nothing doubled.
func TestEthereumWatcherRestart(t *testing.T) {
	f := newFixture(t, 0)
	f.step()
	var ps []paidOrder
	for _, a := range assets {
		p := f.order(a)
		f.pay(p, p.amount())
		ps = append(ps, p)
	}
	f.mine(1)
	for _, p := range ps {
		f.waitPaymentStates(p, chainwatch.StateSeen, 1)
	}
	f.sc.mine(3) // blocks the first watcher never reads

	ch, err := evm.New(f.env.Ctx, evm.Config{Client: f.sc.client, ChainID: 1337, Tokens: f.sc.tokenConfig(false)})
	if err != nil {
		t.Fatal(err)
	}
	w := f.env.Watcher(ch, confirmations)
	w.Holder = "watchtest-restarted"
	ch.SetWatched(evm.IndexFilter(w.Index()))
	ctx, cancel := context.WithCancel(f.env.Ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	f.env.WaitFor("the lease", func() bool { return f.env.LeaseHolder(evm.Network) == w.Holder })
	for range confirmations - 4 {
		f.sc.mine(1)
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range ps {
		f.waitPaymentStates(p, chainwatch.StateConfirmed, 1)
		f.waitActive(p, p.order.TotalCents)
		f.payments(p, 1)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h := f.env.LeaseHolder(evm.Network); h != "" {
		t.Fatalf("lease still held by %q after Run returned", h)
	}
}

// TestEthereumLatePayments pays ETH, USDT and USDC requests after their
// (short) deadline: recorded as late, confirmed, handed to support, and the
// orders are never provisioned automatically.
func TestEthereumLatePayments(t *testing.T) {
	const deadline = 3 * time.Second
	f := newFixture(t, deadline)
	f.step()
	var ps []paidOrder
	for _, a := range assets {
		ps = append(ps, f.order(a))
	}
	last := ps[len(ps)-1].intent.Deadline
	// Block times are whole seconds: wait past the deadline's second.
	time.Sleep(time.Until(last.Truncate(time.Second).Add(time.Second + 100*time.Millisecond)))
	for _, p := range ps {
		f.pay(p, p.amount())
	}
	f.mine(1)
	if bt := time.Unix(int64(f.sc.head().Time), 0); !bt.After(last) {
		t.Fatalf("block time %s not after the deadline %s", bt, last)
	}
	f.mine(confirmations - 1)
	for _, p := range ps {
		f.waitPaymentStates(p, chainwatch.StateConfirmed, 1)
		rows := f.payments(p, 1)
		if !rows[0].Late {
			t.Fatalf("%s: payment after the deadline not late: %+v", p.asset, rows[0])
		}
		f.env.WaitFor(p.asset+" late confirmation on the timeline", func() bool {
			return len(f.env.EventsOfKind(p.order.Ref, domain.EventPaymentConfirmed)) == 1
		})
		ev := f.env.EventsOfKind(p.order.Ref, domain.EventPaymentConfirmed)[0]
		if d := apptest.EventData(ev); d["to_support"] != true || d["late"] != true || d["txid"] != rows[0].TxID {
			t.Fatalf("%s: late confirmation data %s", p.asset, ev.Data)
		}
	}
	// Whatever the late payments led to is written once their workflows
	// have nothing left to do.
	for _, p := range ps {
		f.env.WaitSettled(domain.RentalWorkflowID(p.order.Ref))
		o := f.env.Order(p.order.Ref)
		kinds := f.env.Kinds(p.order.Ref)
		if o.Status != domain.StatusAwaitingPayment || o.PaidCents != 0 ||
			slices.Contains(kinds, domain.EventPaid) || slices.Contains(kinds, domain.EventProvisioningStep) {
			t.Fatalf("%s: late payment provisioned: order %s, %d cents, timeline %v", p.asset, o.Status, o.PaidCents, kinds)
		}
	}
}

// fundedAccount is a new key holding value (ETH only), sharing the chain.
func (c *simChain) fundedAccount(value *big.Int) *simChain {
	c.t.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		c.t.Fatal(err)
	}
	other := *c
	other.key, other.from, other.nextNonce = key, crypto.PubkeyToAddress(key.PublicKey), 0
	c.send(&other.from, value, nil, 0)
	c.commit()
	return &other
}
