package utxo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/chainwatch/utxo"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/payments"
)

// fixture is one harness (Temporal dev server, worker, fresh database,
// payments service deriving from a fresh watch-only account) on one node.
type fixture struct {
	t       *testing.T
	e       *apptest.Env
	n       node
	chain   *utxo.Chain
	network string
	asset   string
	account int64
}

func newFixture(t *testing.T, n node, opts apptest.Options) *fixture {
	t.Helper()
	cfg := n.cfg()
	opts.Networks = map[string]payments.Network{cfg.Network: {Deriver: newAccount(t, n.hdNetwork())}}
	e := apptest.New(t, opts)
	chain := newChain(t, cfg)
	asset := map[string]string{"bitcoin": "BTC", "litecoin": "LTC"}[cfg.Network]
	return &fixture{t: t, e: e, n: n, chain: chain, network: cfg.Network, asset: asset,
		account: e.NewAccount(fmt.Sprintf("payer-%s@example.com", strings.ToLower(t.Name())))}
}

// runWatcher runs an in-process watcher until the test ends.
func (f *fixture) runWatcher(holder string, configure ...func(*chainwatch.Watcher)) *chainwatch.Watcher {
	f.t.Helper()
	w := f.e.Watcher(f.chain, f.n.policy())
	w.Holder, w.Mempool = holder, f.chain
	for _, c := range configure {
		c(w)
	}
	ctx, cancel := context.WithCancel(f.e.Ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			f.t.Errorf("watcher %s: %v", holder, err)
		}
	}()
	f.t.Cleanup(func() { cancel(); wg.Wait() })
	return w
}

// order creates an order and its payment request through the workflow.
func (f *fixture) order() (domain.Order, domain.Intent) {
	f.t.Helper()
	o := f.e.NewOrder(f.account, 1)
	in, err := f.e.RequestOrderPayment(o.Ref, f.asset, f.network)
	if err != nil {
		f.t.Fatalf("payment request for %s: %v", o.Ref, err)
	}
	if in.Address == "" || in.AmountBase.Sign() <= 0 || in.USDCents != o.TotalCents {
		f.t.Fatalf("intent %+v for order of %d cents", in, o.TotalCents)
	}
	return o, in
}

// confirmRest mines the blocks that bring a transaction mined in the last
// block to the policy's confirmations.
func (f *fixture) confirmRest() { f.n.mine(int(f.n.policy()) - 1) }

// waitPayments waits until the intent's chain_payments satisfy cond.
func (f *fixture) waitPayments(what, intentID string, cond func([]apptest.ChainPayment) bool) []apptest.ChainPayment {
	f.t.Helper()
	var got []apptest.ChainPayment
	f.e.WaitFor(what, func() bool {
		got = f.e.ChainPayments(intentID)
		return cond(got)
	})
	return got
}

func onePayment(state string) func([]apptest.ChainPayment) bool {
	return func(ps []apptest.ChainPayment) bool {
		return len(ps) == 1 && ps[0].State == state && ps[0].SignaledState != nil && *ps[0].SignaledState == state
	}
}

// count is the number of timeline events of kind on ref.
func (f *fixture) count(ref, kind string) int { return len(f.e.EventsOfKind(ref, kind)) }

// inOrder checks that the timeline holds these kinds in this order (other
// events may come between).
func (f *fixture) inOrder(ref string, kinds ...string) {
	f.t.Helper()
	all := f.e.Kinds(ref)
	i := 0
	for _, k := range all {
		if i < len(kinds) && k == kinds[i] {
			i++
		}
	}
	if i < len(kinds) {
		f.t.Fatalf("timeline of %s is %v, want %v in this order", ref, all, kinds)
	}
}

// checkBlockAgainstRaw compares the Chain's decoding of a live block with
// the node's serialized block, so every block a test pays in also checks
// the JSON decoding on the real node.
func (f *fixture) checkBlockAgainstRaw(hash string) {
	f.t.Helper()
	raw, err := f.n.call("getblock", hash, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	var rawHex string
	if err := json.Unmarshal(raw, &rawHex); err != nil {
		f.t.Fatal(err)
	}
	hr, err := f.n.call("getblockheader", hash, true)
	if err != nil {
		f.t.Fatal(err)
	}
	var hdr struct {
		Height int64 `json:"height"`
	}
	if err := json.Unmarshal(hr, &hdr); err != nil {
		f.t.Fatal(err)
	}
	height := hdr.Height
	b, err := f.chain.Block(f.e.Ctx, height)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := sameOutputs(b.Outputs, outputsFromRawBlock(f.t, rawHex, f.network, f.asset)); err != nil {
		f.t.Fatalf("block %s: %v", hash, err)
	}
}

func amountOf(in domain.Intent) int64 { return in.AmountBase.Int64() }

func sumCents(ps []apptest.ChainPayment) int64 {
	var s int64
	for _, p := range ps {
		s += p.AmountCents
	}
	return s
}
