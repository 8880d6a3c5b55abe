package tron

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// Address pairs published with Tron's own tools (see testdata/SOURCE.md).
func TestAddressConversion(t *testing.T) {
	for hexAddr, want := range map[string]string{
		"41a614f803b6fd780986a42c78ec9c7f77e6ded13c": "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", // USDT contract
		"41a2726afbecbd8e936000ed684cef5e2f5cf43008": "TQn9Y2khEsLJW1ChVWFMSMeRDow5KcbLSE",
	} {
		got, err := hexToAddress(hexAddr)
		require.NoError(t, err)
		require.Equal(t, want, got)
		back, err := ParseAddress(want)
		require.NoError(t, err)
		require.Equal(t, hexAddr[2:], fmt.Sprintf("%x", back))
		evm, err := ParseAddress("0x" + hexAddr[2:])
		require.NoError(t, err)
		require.Equal(t, back, evm)
	}
	_, err := ParseAddress("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u") // checksum broken
	require.Error(t, err)
	_, err = ParseAddress("42a614f803b6fd780986a42c78ec9c7f77e6ded13c")
	require.Error(t, err)
}

// verbatim serves the recorded responses unchanged.
func verbatim(t *testing.T) *Chain {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/walletsolidity/getnowblock":
			_, _ = fmt.Fprint(w, recordedNowBlock)
		case "/walletsolidity/getblockbynum":
			_, _ = fmt.Fprint(w, recordedBlock)
		case "/walletsolidity/gettransactioninfobyblocknum":
			_, _ = fmt.Fprint(w, recordedInfos)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{URL: srv.URL, Tokens: map[string]string{"USDT": usdtMainnet}})
	require.NoError(t, err)
	return c
}

// The recorded mainnet responses, unchanged, read as the watcher needs them.
func TestRecordedResponses(t *testing.T) {
	ctx := context.Background()
	c := verbatim(t)
	tip, err := c.Tip(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(47964392), tip)

	b, err := c.Block(ctx, 30864544)
	require.NoError(t, err)
	require.Equal(t, "0000000001d6f4a09f60c27befccff6fe3cc593b2d6c46cdc79d3fd4f55db859", b.Hash)
	require.Equal(t, "0000000001d6f49f615231bdeeddd8b563c746188d5e270a58afc87b059f29de", b.Parent)
	require.Equal(t, time.UnixMilli(1623055923000).UTC(), b.Time)
	require.Len(t, b.Outputs, 2)
	// The TRX transfer: 50 TRX to 4158c85b...
	trxTo, err := hexToAddress("4158c85b7b6a5118beb3b23c14fcb2f3551a81d79a")
	require.NoError(t, err)
	require.Equal(t, chainwatch.Output{TxID: "979e0823f455f3b67d65b351052f0265233f422792d31d5dbeb7c24737dd5556",
		Index: 0, Address: trxTo, Asset: "TRX", Amount: big.NewInt(50_000_000)}, b.Outputs[0])
	// The USDT transfer of the receipts: 0x1fb6e57f = 532079999 base units
	// (532.079999 USDT) to 0d070796...; the receipt without logs adds nothing.
	usdtTo := Address([20]byte(mustHex(t, "0d0707963952f2fba59dd06f2b425ace40b492fe")))
	require.Equal(t, chainwatch.Output{TxID: "0af79242191c6728b79e858a36a4b5c65e4e52b9fcee4dc5af30eac57b6d0953",
		Index: 0, Address: usdtTo, Asset: "USDT", Amount: big.NewInt(0x1fb6e57f)}, b.Outputs[1])
}

// signals records what the watcher delivers.
type signals struct {
	mu    sync.Mutex
	calls []chainwatch.Pending
	fail  atomic.Bool
	// failRefs are targets whose workflow refuses signals.
	failRefs map[string]bool
	dust     []chainwatch.DustPending
}

func (s *signals) Signal(_ context.Context, p chainwatch.Pending) error {
	if s.fail.Load() {
		return fmt.Errorf("temporal unavailable")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failRefs[p.TargetRef] {
		return fmt.Errorf("workflow %s: deadline exceeded", p.TargetRef)
	}
	s.calls = append(s.calls, p)
	return nil
}

func (s *signals) failFor(ref string, fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failRefs == nil {
		s.failRefs = map[string]bool{}
	}
	s.failRefs[ref] = fail
}

func (s *signals) SignalDust(_ context.Context, d chainwatch.DustPending) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dust = append(s.dust, d)
	return nil
}

func (s *signals) take() []chainwatch.Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.calls
	s.calls = nil
	return out
}

// row is a chain_payments row as the tests check it.
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
		FROM chain_payments WHERE network = 'tron' ORDER BY seen_at, txid, output_index`))
	return out
}

type fixture struct {
	t       *testing.T
	ctx     context.Context
	db      *postgres.DB
	node    *tronStandIn
	sig     *signals
	w       *chainwatch.Watcher
	account int64
	n       int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	acct, err := db.CreateAccount(ctx, domain.Account{FirstName: "Ada", LastName: "Lovelace", Email: "ada@example.com"}, "$argon2id$fake")
	require.NoError(t, err)
	f := &fixture{t: t, ctx: ctx, db: db, node: newTronStandIn(t, time.Now().UTC()), sig: &signals{}, account: acct.ID}
	f.w = f.watcher()
	return f
}

// watcher is a fresh watcher on the fixture's node and database (a restart
// makes another one).
func (f *fixture) watcher() *chainwatch.Watcher {
	c, err := New(Config{URL: f.node.srv.URL, Tokens: map[string]string{"USDT": usdtMainnet}})
	require.NoError(f.t, err)
	return &chainwatch.Watcher{Chain: c, Store: f.db, Signaler: f.sig, Policy: Policy, Holder: "test", Backfill: 5}
}

// intent stores a payment request of amount base units of asset on tron,
// worth cents, paid to a fresh address, due at deadline.
func (f *fixture) intent(asset string, amount, cents int64, deadline time.Time) domain.Intent {
	f.t.Helper()
	f.n++
	var raw [20]byte
	copy(raw[:], fmt.Sprintf("kernodeck-test-%05d", f.n))
	addr := Address(raw)
	in := domain.Intent{
		ID: domain.NewRef("PI"), TargetKind: "order", TargetRef: fmt.Sprintf("OR-TRON-%d", f.n), AccountID: f.account,
		Asset: asset, Network: Network, Decimals: 6, AmountBase: domain.NewBigInt(big.NewInt(amount)), USDCents: cents,
		Rate: "0.25", RateSource: "test", RateAt: time.Now(), Deadline: deadline, WatchUntil: deadline.Add(24 * time.Hour),
		Status: domain.IntentOpen,
	}
	if asset == "USDT" {
		c := usdtMainnet
		in.TokenContract = &c
	}
	out, err := f.db.InsertIntent(f.ctx, in, "req-"+in.ID, time.Now(),
		func(int64) (string, error) { return addr, nil }, func(domain.Intent) string { return addr })
	require.NoError(f.t, err)
	return out
}

func (f *fixture) step() {
	f.t.Helper()
	for {
		caughtUp, err := f.w.Step(f.ctx)
		require.NoError(f.t, err)
		if caughtUp {
			return
		}
	}
}

var txSeq atomic.Int64

func txid() string {
	return fmt.Sprintf("%064x", 0xabc000+txSeq.Add(1))
}

func trx(to string, amount int64) standInTx {
	return standInTx{ID: txid(), To: to, Amount: big.NewInt(amount)}
}

func usdt(to string, amount int64) standInTx {
	return standInTx{ID: txid(), Token: true, To: to, Amount: big.NewInt(amount)}
}

func TestTRXExactAmountConfirmed(t *testing.T) {
	f := newFixture(t)
	in := f.intent("TRX", 25_000_000, 1000, time.Now().Add(time.Hour))
	f.step()
	pay := trx(in.Address, 25_000_000)
	h := f.node.mineSolid(pay)
	f.step()

	require.Equal(t, []row{{TxID: pay.ID, Index: 0, Asset: "TRX", IntentID: in.ID, Address: in.Address,
		Amount: "25000000", Cents: 1000, Late: false, Height: h, State: "confirmed"}}, rows(t, f.db))
	require.Equal(t, []chainwatch.Pending{{Network: "tron", TxID: pay.ID, Index: 0, Asset: "TRX", IntentID: in.ID,
		TargetKind: "order", TargetRef: in.TargetRef, Address: in.Address, AmountBase: "25000000", AmountCents: 1000, State: "confirmed",
		StateVersion: 2}}, f.sig.take())

	// Stepping again (or a second watcher re-reading) changes nothing.
	f.node.mineSolid()
	f.step()
	require.Empty(t, f.sig.take())
	require.Len(t, rows(t, f.db), 1)
}

func TestUSDTUnderpaidThenRemainder(t *testing.T) {
	f := newFixture(t)
	in := f.intent("USDT", 10_000_000, 1000, time.Now().Add(time.Hour))
	f.step()
	first := usdt(in.Address, 4_000_000)
	h1 := f.node.mineSolid(first)
	f.step()
	got := f.sig.take()
	require.Len(t, got, 1)
	require.Equal(t, int64(400), got[0].AmountCents)
	require.Equal(t, "4000000", got[0].AmountBase)
	require.Equal(t, "confirmed", got[0].State)

	rest := usdt(in.Address, 6_000_000)
	h2 := f.node.mineSolid(rest)
	f.step()
	got = f.sig.take()
	require.Len(t, got, 1)
	require.Equal(t, int64(600), got[0].AmountCents)
	require.Equal(t, []row{
		{TxID: first.ID, Asset: "USDT", IntentID: in.ID, Address: in.Address, Amount: "4000000", Cents: 400, Height: h1, State: "confirmed"},
		{TxID: rest.ID, Asset: "USDT", IntentID: in.ID, Address: in.Address, Amount: "6000000", Cents: 600, Height: h2, State: "confirmed"},
	}, rows(t, f.db))
}

func TestTRXUnderpaidThenRemainder(t *testing.T) {
	f := newFixture(t)
	in := f.intent("TRX", 25_000_000, 1000, time.Now().Add(time.Hour))
	f.step()
	f.node.mineSolid(trx(in.Address, 5_000_000))
	f.node.mineSolid(trx(in.Address, 20_000_000))
	f.step()
	got := f.sig.take()
	require.Len(t, got, 2)
	require.Equal(t, int64(200), got[0].AmountCents)
	require.Equal(t, int64(800), got[1].AmountCents)
	for _, r := range rows(t, f.db) {
		require.Equal(t, "confirmed", r.State)
	}
}

func TestOverpaid(t *testing.T) {
	f := newFixture(t)
	trxIn := f.intent("TRX", 25_000_000, 1000, time.Now().Add(time.Hour))
	usdtIn := f.intent("USDT", 10_000_000, 1000, time.Now().Add(time.Hour))
	f.step()
	f.node.mineSolid(trx(trxIn.Address, 30_000_000), usdt(usdtIn.Address, 12_500_000))
	f.step()
	rs := rows(t, f.db)
	require.Len(t, rs, 2)
	byAsset := map[string]row{rs[0].Asset: rs[0], rs[1].Asset: rs[1]}
	// The USD value follows the request's rate: 1.2x and 1.25x its cents.
	require.Equal(t, int64(1200), byAsset["TRX"].Cents)
	require.Equal(t, "30000000", byAsset["TRX"].Amount)
	require.Equal(t, int64(1250), byAsset["USDT"].Cents)
	require.Equal(t, "12500000", byAsset["USDT"].Amount)
	got := f.sig.take()
	require.Len(t, got, 2)
	for _, p := range got {
		require.Equal(t, "confirmed", p.State)
		require.False(t, p.Late)
	}
}

func TestLatePayment(t *testing.T) {
	f := newFixture(t)
	// Due a minute before the stand-in's first block: every block is late,
	// and the address is still watched (watch_until is a day later).
	trxIn := f.intent("TRX", 25_000_000, 1000, f.node.start.Add(-time.Minute))
	usdtIn := f.intent("USDT", 10_000_000, 1000, f.node.start.Add(-time.Minute))
	f.step()
	f.node.mineSolid(trx(trxIn.Address, 25_000_000))
	f.node.mineSolid(usdt(usdtIn.Address, 10_000_000))
	f.step()
	rs := rows(t, f.db)
	require.Len(t, rs, 2)
	for _, r := range rs {
		require.True(t, r.Late, r.Asset)
		require.Equal(t, "confirmed", r.State)
	}
	got := f.sig.take()
	require.Len(t, got, 2)
	for _, p := range got {
		require.True(t, p.Late)
	}
}

func TestPaymentCountsOnlyOnceSolidified(t *testing.T) {
	f := newFixture(t)
	trxIn := f.intent("TRX", 25_000_000, 1000, time.Now().Add(time.Hour))
	usdtIn := f.intent("USDT", 10_000_000, 1000, time.Now().Add(time.Hour))
	f.step()
	// In a block the network has produced but not solidified yet.
	pay := f.node.mine(trx(trxIn.Address, 25_000_000), usdt(usdtIn.Address, 10_000_000))
	f.node.mine()
	f.step()
	require.Empty(t, rows(t, f.db), "an unsolidified block is not read")
	require.Empty(t, f.sig.take())

	f.node.solidify(pay)
	f.step()
	rs := rows(t, f.db)
	require.Len(t, rs, 2)
	for _, r := range rs {
		require.Equal(t, pay, r.Height)
		require.Equal(t, "confirmed", r.State)
	}
	require.Len(t, f.sig.take(), 2)
}

func TestIgnoresFailedForeignAndOtherTokens(t *testing.T) {
	f := newFixture(t)
	in := f.intent("TRX", 25_000_000, 1000, time.Now().Add(time.Hour))
	tok := f.intent("USDT", 10_000_000, 1000, time.Now().Add(time.Hour))
	f.step()
	failedTRX := trx(in.Address, 25_000_000)
	failedTRX.Failed = true
	failedUSDT := usdt(tok.Address, 10_000_000)
	failedUSDT.Failed = true
	otherToken := usdt(tok.Address, 10_000_000)
	copy(otherToken.Contract[:], "not-the-usdt-contract")
	stranger := trx(Address([20]byte{1, 2, 3}), 25_000_000)
	f.node.mineSolid(failedTRX, failedUSDT, otherToken, stranger)
	f.step()
	require.Empty(t, rows(t, f.db))
	require.Empty(t, f.sig.take())
}

// A watcher that stops and another that starts later miss nothing and count
// nothing twice; a signal that could not be delivered is sent again.
func TestRestartAndRedelivery(t *testing.T) {
	f := newFixture(t)
	in := f.intent("USDT", 10_000_000, 1000, time.Now().Add(time.Hour))
	f.step()
	f.sig.fail.Store(true)
	p1 := usdt(in.Address, 3_000_000)
	f.node.mineSolid(p1)
	_, err := f.w.Step(f.ctx)
	require.Error(t, err, "delivery failed")
	require.Len(t, rows(t, f.db), 1, "stored before signalling")

	// Down for a while; blocks go on.
	p2 := usdt(in.Address, 7_000_000)
	f.node.mineSolid()
	f.node.mineSolid(p2)
	f.node.mineSolid()
	f.sig.fail.Store(false)
	f.w = f.watcher()
	f.step()
	got := f.sig.take()
	require.Len(t, got, 2)
	require.Equal(t, p1.ID, got[0].TxID)
	require.Equal(t, p2.ID, got[1].TxID)
	require.Len(t, rows(t, f.db), 2)
}

func TestNoReceiptsIsAnErrorNotAnEmptyBlock(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/walletsolidity/getblockbynum":
			_, _ = fmt.Fprint(w, recordedBlock)
		case "/walletsolidity/gettransactioninfobyblocknum":
			_, _ = fmt.Fprint(w, "{}")
		}
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL, Tokens: map[string]string{"USDT": usdtMainnet}})
	require.NoError(t, err)
	_, err = c.Block(context.Background(), 30864544)
	require.ErrorIs(t, err, ErrBlockNotFound)

	_, err = c.Block(context.Background(), 30864545)
	require.ErrorContains(t, err, "asked block 30864545")
}

func TestErrorAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprint(w, `{"Error":"class java.lang.NullPointerException : null"}`)
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL})
	require.NoError(t, err)
	_, err = c.Tip(context.Background())
	require.ErrorContains(t, err, "NullPointerException")
	require.True(t, strings.Contains(err.Error(), "getnowblock"))
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	var b []byte
	_, err := fmt.Sscanf(s, "%x", &b)
	require.NoError(t, err)
	return b
}
