package solana

import (
	"context"
	"crypto/rand"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mr-tron/base58"
	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// The recorded mainnet response, unchanged: 1000000 lamports to 2b7iQq3P...
// (account 2, balance 0 -> 1000000).
func TestRecordedTransaction(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprint(w, recordedTransaction)
	}))
	defer srv.Close()
	c := &rpcClient{url: srv.URL, client: srv.Client()}
	tx, err := c.getTransaction(context.Background(), "5QMfuqThWSMMpLCRe3tk7qn7iSwWKfJV8EvD1ZPvyqAWa7Z2JftZ4rPq8YCxCwzSykX7dMkDB8RrovQMoL9ZZWKY")
	require.NoError(t, err)
	require.False(t, tx.failed())
	require.Equal(t, int64(185471096), tx.Slot)
	require.Equal(t, int64(1680146043), *tx.BlockTime)
	got, err := tx.received("2b7iQq3PbWwWTotRSDFNXT9DauU418aCHK4jcAzETUem")
	require.NoError(t, err)
	require.Equal(t, big.NewInt(1_000_000), got)
	// The sender lost the amount; the fee payer only the fee.
	got, err = tx.received("DT1mBDFsNBc1UXa25RdxNvnjL5Lro7su7gX1zpLyCmWe")
	require.NoError(t, err)
	require.Equal(t, big.NewInt(-1_000_000), got)
	got, err = tx.received("9bFNrXNb2WTx8fMHXCheaZqkLZ3YCCaiqTftHxeintHy")
	require.NoError(t, err)
	require.Nil(t, got, "not an account of the transaction")

	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprint(w, recordedSignatures)
	}))
	defer srv2.Close()
	c = &rpcClient{url: srv2.URL, client: srv2.Client()}
	sigs, err := c.signaturesForAddress(context.Background(), "7sYroAgRW6TmmXTHH7vwG2yZFUVhN7u8j8iArywLUcgs", "")
	require.NoError(t, err)
	require.Len(t, sigs, 1)
	require.Equal(t, int64(184930610), sigs[0].Slot)
	require.False(t, sigs[0].failed())
	require.Equal(t, "finalized", sigs[0].ConfirmationStatus)
}

// A v0 transaction whose recipient is loaded through an address lookup
// table (recorded from mainnet): jsonParsed lists that account after the
// static ones, in balance order, so the amount is still found.
func TestRecordedV0TransactionWithLookupTable(t *testing.T) {
	raw, err := os.ReadFile("testdata/getTransaction_v0.json")
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(raw)
	}))
	defer srv.Close()
	c := &rpcClient{url: srv.URL, client: srv.Client()}
	tx, err := c.getTransaction(context.Background(), "4LwygRtiF9ZCrbGKoh8MEzmxowaRHPaDc1nsinkv72uXU2cUCuZ8YskBBgsvbBEMZ5Pqpf6C6WcXtCkqAuLZand1")
	require.NoError(t, err)
	require.False(t, tx.failed())
	got, err := tx.received("buffaAJKmNLao65TDTUGq8oB9HgxkfPLGqPMFQapotJ")
	require.NoError(t, err)
	require.Equal(t, big.NewInt(1000), got)
	got, err = tx.received("web3xFMwEPrc92NeeXdAigni95NDnnd2NPuajTirao2")
	require.NoError(t, err)
	require.Equal(t, big.NewInt(-6000), got, "the amount and the fee")
}

func TestRPCError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprint(w, `{"jsonrpc":"2.0","error":{"code":-32009,"message":"Slot 1 was skipped"},"id":1}`)
	}))
	defer srv.Close()
	c := &rpcClient{url: srv.URL, client: srv.Client()}
	_, err := c.finalizedSlot(context.Background())
	var rpcErr *RPCError
	require.ErrorAs(t, err, &rpcErr)
	require.Equal(t, -32009, rpcErr.Code)
}

type signals struct {
	mu    sync.Mutex
	calls []chainwatch.Pending
	fail  atomic.Bool
}

func (s *signals) Signal(_ context.Context, p chainwatch.Pending) error {
	if s.fail.Load() {
		return fmt.Errorf("temporal unavailable")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, p)
	return nil
}

// SignalDust records nothing: these tests send no dust.
func (s *signals) SignalDust(context.Context, chainwatch.DustPending) error { return nil }

func (s *signals) take() []chainwatch.Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.calls
	s.calls = nil
	return out
}

type row struct {
	TxID     string `db:"txid"`
	Index    int64  `db:"output_index"`
	Asset    string `db:"asset"`
	IntentID string `db:"intent_id"`
	Address  string `db:"address"`
	Amount   string `db:"amount_base"`
	Cents    int64  `db:"amount_cents"`
	Late     bool   `db:"late"`
	Height   int64  `db:"block_height"`
	State    string `db:"state"`
}

func rows(t *testing.T, db *postgres.DB) []row {
	t.Helper()
	var out []row
	require.NoError(t, db.SelectContext(context.Background(), &out, `SELECT txid, output_index, asset, intent_id,
		address, amount_base::text AS amount_base, amount_cents, late, block_height, state
		FROM chain_payments WHERE network = 'solana' ORDER BY block_height, txid`))
	return out
}

// shop is the shop's receiving address in these tests (any base58 key).
const shop = "2b7iQq3PbWwWTotRSDFNXT9DauU418aCHK4jcAzETUem"

type fixture struct {
	t       *testing.T
	ctx     context.Context
	db      *postgres.DB
	node    *solanaStandIn
	sig     *signals
	w       *Watcher
	account int64
	n       int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	acct, err := db.CreateAccount(ctx, domain.Account{FirstName: "Ada", LastName: "Lovelace", Email: "ada@example.com"}, "$argon2id$fake")
	require.NoError(t, err)
	f := &fixture{t: t, ctx: ctx, db: db, node: newSolanaStandIn(t, time.Now().UTC()), sig: &signals{}, account: acct.ID}
	f.w = f.watcher()
	return f
}

func (f *fixture) watcher() *Watcher {
	return &Watcher{RPCURL: f.node.srv.URL, Store: f.db, Signaler: f.sig, Holder: "test"}
}

func newReference(t *testing.T) string {
	var k [32]byte
	_, err := rand.Read(k[:])
	require.NoError(t, err)
	return base58.Encode(k[:])
}

// intent stores a SOL payment request of amount lamports worth cents.
func (f *fixture) intent(amount, cents int64, deadline time.Time) domain.Intent {
	f.t.Helper()
	f.n++
	ref := newReference(f.t)
	in := domain.Intent{
		ID: domain.NewRef("PI"), TargetKind: "order", TargetRef: fmt.Sprintf("OR-SOL-%d", f.n), AccountID: f.account,
		Asset: Asset, Network: Network, Decimals: 9, AmountBase: domain.NewBigInt(big.NewInt(amount)), USDCents: cents,
		Rate: "150", RateSource: "test", RateAt: time.Now(), Address: shop, ReferenceKey: &ref,
		Deadline: deadline, WatchUntil: deadline.Add(24 * time.Hour), Status: domain.IntentOpen,
	}
	out, err := f.db.InsertIntent(f.ctx, in, "req-"+in.ID, time.Now(), nil, func(domain.Intent) string { return "solana:" + shop })
	require.NoError(f.t, err)
	return out
}

func (f *fixture) step() {
	f.t.Helper()
	require.NoError(f.t, f.w.Step(f.ctx))
}

const tenUSD = 66_666_667 // lamports: 10 USD at 150 USD/SOL, rounded up

func TestSOLExactAmountConfirmed(t *testing.T) {
	f := newFixture(t)
	in := f.intent(tenUSD, 1000, time.Now().Add(time.Hour))
	pay := f.node.pay(*in.ReferenceKey, shop, tenUSD)
	f.step()
	require.Equal(t, []row{{TxID: pay.Sig, Asset: "SOL", IntentID: in.ID, Address: shop, Amount: "66666667",
		Cents: 1000, Height: pay.Slot, State: "confirmed"}}, rows(t, f.db))
	require.Equal(t, []chainwatch.Pending{{Network: "solana", TxID: pay.Sig, Asset: "SOL", IntentID: in.ID,
		TargetKind: "order", TargetRef: in.TargetRef, Address: shop, AmountBase: "66666667", AmountCents: 1000, State: "confirmed",
		StateVersion: 2}}, f.sig.take())

	f.step()
	require.Empty(t, f.sig.take(), "delivered once")
}

func TestSOLUnderpaidThenRemainder(t *testing.T) {
	f := newFixture(t)
	in := f.intent(tenUSD, 1000, time.Now().Add(time.Hour))
	first := f.node.pay(*in.ReferenceKey, shop, 20_000_000)
	f.step()
	got := f.sig.take()
	require.Len(t, got, 1)
	require.Equal(t, int64(299), got[0].AmountCents) // floor(20000000 x 1000 / 66666667)
	rest := f.node.pay(*in.ReferenceKey, shop, tenUSD-20_000_000)
	f.step()
	got = f.sig.take()
	require.Len(t, got, 1)
	require.Equal(t, int64(701), got[0].AmountCents, "the parts add up to the request's cents")
	require.Equal(t, []row{
		{TxID: first.Sig, Asset: "SOL", IntentID: in.ID, Address: shop, Amount: "20000000", Cents: 299, Height: first.Slot, State: "confirmed"},
		{TxID: rest.Sig, Asset: "SOL", IntentID: in.ID, Address: shop, Amount: "46666667", Cents: 701, Height: rest.Slot, State: "confirmed"},
	}, rows(t, f.db))
}

func TestSOLOverpaid(t *testing.T) {
	f := newFixture(t)
	in := f.intent(tenUSD, 1000, time.Now().Add(time.Hour))
	f.node.pay(*in.ReferenceKey, shop, 100_000_000)
	f.step()
	rs := rows(t, f.db)
	require.Len(t, rs, 1)
	require.Equal(t, "100000000", rs[0].Amount)
	require.Equal(t, int64(1499), rs[0].Cents)
	require.Equal(t, "confirmed", rs[0].State)
	got := f.sig.take()
	require.Len(t, got, 1)
	require.Equal(t, int64(1499), got[0].AmountCents)
}

func TestSOLLate(t *testing.T) {
	f := newFixture(t)
	in := f.intent(tenUSD, 1000, f.node.start.Add(-time.Minute))
	f.node.pay(*in.ReferenceKey, shop, tenUSD)
	f.step()
	rs := rows(t, f.db)
	require.Len(t, rs, 1)
	require.True(t, rs[0].Late)
	require.Equal(t, "confirmed", rs[0].State)
	got := f.sig.take()
	require.Len(t, got, 1)
	require.True(t, got[0].Late)
}

// Each payment goes to the request whose reference it carries, though all
// pay the same address; failed transactions and unfinalized ones count
// nothing (yet).
func TestSOLReferencesFailuresAndFinality(t *testing.T) {
	f := newFixture(t)
	a := f.intent(tenUSD, 1000, time.Now().Add(time.Hour))
	b := f.intent(tenUSD+1, 1000, time.Now().Add(time.Hour))
	f.node.add(&solTx{Ref: *a.ReferenceKey, To: shop, Amount: tenUSD, Failed: true, Finalized: true})
	pending := f.node.add(&solTx{Ref: *b.ReferenceKey, To: shop, Amount: tenUSD + 1})
	f.step()
	require.Empty(t, rows(t, f.db))
	require.Empty(t, f.sig.take())

	f.node.finalize(pending)
	paid := f.node.pay(*a.ReferenceKey, shop, tenUSD)
	f.step()
	rs := rows(t, f.db)
	require.Len(t, rs, 2)
	require.Equal(t, b.ID, rs[0].IntentID)
	require.Equal(t, pending.Sig, rs[0].TxID)
	require.Equal(t, a.ID, rs[1].IntentID)
	require.Equal(t, paid.Sig, rs[1].TxID)
	require.Len(t, f.sig.take(), 2)
}

// A transaction the node lists but cannot serve yet is retried, not skipped;
// a restarted watcher reads every reference again and records nothing twice;
// a signal that failed is delivered later.
func TestSOLRetryRestartRedelivery(t *testing.T) {
	f := newFixture(t)
	in := f.intent(tenUSD, 1000, time.Now().Add(time.Hour))
	lagging := f.node.add(&solTx{Ref: *in.ReferenceKey, To: shop, Amount: 30_000_000, Finalized: true, Hidden: true})
	require.Error(t, f.w.Step(f.ctx))
	require.Empty(t, rows(t, f.db))

	f.node.reveal(lagging)
	f.sig.fail.Store(true)
	require.Error(t, f.w.Step(f.ctx), "delivery failed")
	require.Len(t, rows(t, f.db), 1, "stored before signalling")

	f.sig.fail.Store(false)
	rest := f.node.pay(*in.ReferenceKey, shop, tenUSD-30_000_000)
	f.w = f.watcher()
	f.step()
	got := f.sig.take()
	require.Len(t, got, 2)
	require.Equal(t, lagging.Sig, got[0].TxID)
	require.Equal(t, rest.Sig, got[1].TxID)
	require.Equal(t, int64(1000), got[0].AmountCents+got[1].AmountCents)
	require.Len(t, rows(t, f.db), 2)
}

// A reference with more than a page of transactions is read through
// getSignaturesForAddress's before/until paging.
func TestSOLPaging(t *testing.T) {
	f := newFixture(t)
	in := f.intent(1_000_000_000, 15000, time.Now().Add(time.Hour))
	for range maxSignatures + 5 {
		f.node.pay(*in.ReferenceKey, shop, 1)
	}
	f.step()
	require.Len(t, rows(t, f.db), maxSignatures+5)
	require.Len(t, f.sig.take(), maxSignatures+5)
	last := f.node.pay(*in.ReferenceKey, shop, 7)
	f.step()
	got := f.sig.take()
	require.Len(t, got, 1)
	require.Equal(t, last.Sig, got[0].TxID)
}

// Run works while it holds Solana's lease: a second watcher stays idle, and
// the lease is given up when Run ends.
func TestSOLRunHoldsLease(t *testing.T) {
	f := newFixture(t)
	in := f.intent(tenUSD, 1000, time.Now().Add(time.Hour))
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	first := f.watcher()
	first.Holder, first.Poll = "first", 20*time.Millisecond
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	holder := func() string {
		var h []string
		require.NoError(t, f.db.SelectContext(f.ctx, &h, `SELECT holder FROM watcher_leases WHERE network = $1`, Network))
		return strings.Join(h, ",")
	}
	require.Eventually(t, func() bool { return holder() == "first" }, 10*time.Second, 20*time.Millisecond,
		"the first watcher takes the lease")

	second := f.watcher()
	second.Holder, second.Poll = "second", 20*time.Millisecond
	second.Signaler = &signals{}
	ctx2, cancel2 := context.WithCancel(f.ctx)
	done2 := make(chan error, 1)
	go func() { done2 <- second.Run(ctx2) }()

	pay := f.node.pay(*in.ReferenceKey, shop, tenUSD)
	require.Eventually(t, func() bool { return len(rows(t, f.db)) == 1 }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		f.sig.mu.Lock()
		defer f.sig.mu.Unlock()
		return len(f.sig.calls) == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, pay.Sig, f.sig.take()[0].TxID)
	cancel2()
	require.NoError(t, <-done2)
	require.Empty(t, second.Signaler.(*signals).take(), "the watcher without the lease did nothing")

	require.Equal(t, "first", holder())
	cancel()
	require.NoError(t, <-done)
	require.Empty(t, holder(), "released when Run ended")
}

// A watcher down for longer than a request's watch window (deadline + 24 h)
// still records the payment the request received in time: requests are
// loaded and dropped by the chain's time at the last checkpoint, not by
// the wall clock. Once the watcher has read past the window, the request
// is dropped.
func TestSOLWatcherDownLongerThanTheWatchWindow(t *testing.T) {
	f := newFixture(t)
	in := f.intent(tenUSD, 1000, f.node.start.Add(time.Hour))
	f.step()
	_, at, ok, err := f.db.Checkpoint(f.ctx, Network)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, f.node.start.Unix(), at.Unix(), "checkpoint at the chain's time")

	// The watcher stops; the customer pays on time; two days pass.
	paid := f.node.pay(*in.ReferenceKey, shop, tenUSD)
	f.node.advance(48 * time.Hour)
	later := func() time.Time { return time.Now().Add(48 * time.Hour) }

	f.w = f.watcher()
	f.w.Now = later
	f.step()
	require.Equal(t, []row{{TxID: paid.Sig, Asset: "SOL", IntentID: in.ID, Address: shop, Amount: "66666667",
		Cents: 1000, Height: paid.Slot, State: "confirmed"}}, rows(t, f.db), "recorded, on time")
	got := f.sig.take()
	require.Len(t, got, 1)
	require.False(t, got[0].Late)

	// Read through a slot past its window: the request is dropped, and the
	// checkpoint says how far.
	require.NotContains(t, f.w.intents, *in.ReferenceKey)
	_, at, _, err = f.db.Checkpoint(f.ctx, Network)
	require.NoError(t, err)
	require.True(t, at.After(in.WatchUntil), "checkpoint %s after the window's end %s", at, in.WatchUntil)
	restarted := f.watcher()
	restarted.Now = later
	require.NoError(t, restarted.Step(f.ctx))
	require.NotContains(t, restarted.intents, *in.ReferenceKey, "a restart loads only what was open at the checkpoint")
}

// A payment carrying the reference of a request no longer watched (its
// window closed, the watcher dropped it) is recorded for that request and
// put aside for support, never counted and never ignored.
func TestSOLPaymentToARequestNoLongerWatchedGoesToSupport(t *testing.T) {
	f := newFixture(t)
	acc := f.account
	o := seedOrderFor(t, f, acc)
	in := f.intent(tenUSD, 1000, f.node.start.Add(-25*time.Hour)) // window closed an hour ago
	_, err := f.db.Exec(`UPDATE payment_intents SET target_ref = $1 WHERE id = $2`, o, in.ID)
	require.NoError(t, err)
	f.step()
	require.NotContains(t, f.w.intents, *in.ReferenceKey, "not watched")

	paid := f.node.pay(*in.ReferenceKey, shop, tenUSD)
	f.step()
	var got []struct {
		TxID      string  `db:"txid"`
		IntentID  string  `db:"intent_id"`
		ToSupport *string `db:"to_support"`
		State     string  `db:"state"`
	}
	require.NoError(t, f.db.Select(&got, `SELECT txid, intent_id, to_support, state FROM chain_payments WHERE network = 'solana'`))
	require.Len(t, got, 1)
	require.Equal(t, paid.Sig, got[0].TxID)
	require.Equal(t, in.ID, got[0].IntentID)
	require.NotNil(t, got[0].ToSupport)
	require.Equal(t, "not_watched", *got[0].ToSupport)
	require.Empty(t, f.sig.take(), "never signalled")
	es, err := f.db.ExceptionsOf(f.ctx, o)
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, domain.ExceptionNotWatched, es[0].Reason)
	require.Equal(t, int64(1000), es[0].RemainingCents())
}

// seedOrderFor stores an unpaid order of the fixture's account (support's
// queue rows name an order).
func seedOrderFor(t *testing.T, f *fixture, account int64) string {
	t.Helper()
	ref := domain.NewRef(domain.OrderRefPrefix)
	_, err := f.db.Exec(`INSERT INTO orders (ref, account_id, gpu_model, lots, gpus_per_lot, total_gpus,
		duration_days, preset, lot_cents, total_cents, status, workflow_id)
		VALUES ($1, $2, 'rtx-a5000', 1, 1, 1, 3, 'python', 1000, 1000, 'awaiting_payment', 'rental-' || $1)`, ref, account)
	require.NoError(t, err)
	return ref
}

// A block time far ahead of the clock (a node answering garbage) moves no
// checkpoint: no request is dropped on it.
func TestSOLBlockTimeAheadOfTheClockIgnored(t *testing.T) {
	f := newFixture(t)
	in := f.intent(tenUSD, 1000, time.Now().Add(time.Hour))
	f.step()
	_, before, _, err := f.db.Checkpoint(f.ctx, Network)
	require.NoError(t, err)
	f.node.advance(10 * 365 * 24 * time.Hour)
	f.step()
	_, at, _, err := f.db.Checkpoint(f.ctx, Network)
	require.NoError(t, err)
	require.True(t, at.Equal(before), "checkpoint moved to %s", at)
	require.Contains(t, f.w.intents, *in.ReferenceKey, "still watched")
}

// A node without the finalized slot's block time (getBlockTime's "block
// not available") does not stop the watcher: payments are read and
// delivered as usual, and the checkpoint stays where it was (so no request
// is dropped on a time the watcher does not know).
func TestSOLNoBlockTimeKeepsReadingWithoutCheckpoint(t *testing.T) {
	f := newFixture(t)
	f.step()
	_, before, ok, err := f.db.Checkpoint(f.ctx, Network)
	require.NoError(t, err)
	require.True(t, ok)

	f.node.mu.Lock()
	f.node.noBlockTime = true
	f.node.mu.Unlock()
	in := f.intent(tenUSD, 1000, time.Now().Add(time.Hour))
	f.node.pay(*in.ReferenceKey, shop, tenUSD)
	f.node.advance(48 * time.Hour)
	f.step()
	require.Len(t, f.sig.take(), 1, "read and delivered")
	_, at, _, err := f.db.Checkpoint(f.ctx, Network)
	require.NoError(t, err)
	require.True(t, at.Equal(before), "checkpoint moved to %s without a block time", at)
	require.Contains(t, f.w.intents, *in.ReferenceKey, "still watched")
}
