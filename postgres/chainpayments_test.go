package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/rates"
)

// seedRequest stores an order's request of 36262 base units of asset for
// 23.57 USD on network, paid at address, with its deadline and watch end.
func seedRequest(t *testing.T, db *postgres.DB, id, ref string, acc int64, network, asset, address string, index int,
	deadline, watchUntil time.Time) {
	t.Helper()
	if _, err := db.Exec(`INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals,
		amount_base, usd_cents, rate, rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until, request_key)
		VALUES ($1, 'order', $2, $3, $4, $5, 8, 36262, 2357, 65000, 'test', now(), $6, $7, 'x:y', $8, $9, 'intent:1')`,
		id, ref, acc, asset, network, address, index, deadline, watchUntil); err != nil {
		t.Fatal(err)
	}
}

// unsignaled is what the watcher would signal now, by txid.
func unsignaled(t *testing.T, db *postgres.DB, network string) map[string]chainwatch.Pending {
	t.Helper()
	ps, err := db.Unsignaled(context.Background(), network, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]chainwatch.Pending{}
	for _, p := range ps {
		out[p.TxID] = p
	}
	return out
}

// A request paid in three parts is worth exactly its cents: each part is
// valued at what the running total adds (785 + 786 + 786), not on its own
// (785 each, 2 cents lost). Dust and a payment in another asset to the
// same address stay out of that running total.
func TestSplitPaymentWorthTheRequestsCents(t *testing.T) {
	ctx, db, _, _ := leasedIntent(t, "split@example.com", "PI-SPLIT", "bc1qsplit", 910)
	part := func(txid string, amount int64, h int64) chainwatch.Seen {
		return chainwatch.Seen{TxID: txid, Asset: "BTC", Address: "bc1qsplit", Amount: big.NewInt(amount),
			BlockHeight: h, BlockHash: fmt.Sprint("h", h), BlockTime: time.Now()}
	}
	dust := part("dust", 100, 60)
	dust.Dust = true
	other := part("other", 5000, 60)
	other.Asset = "LTC"
	first := []chainwatch.Seen{dust, other, part("p1", 12087, 60), part("p2", 12087, 60)}
	if err := db.RecordBlock(ctx, "bitcoin", "w", 60, "h60", first); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordBlock(ctx, "bitcoin", "w", 61, "h61", []chainwatch.Seen{part("p3", 12088, 61)}); err != nil {
		t.Fatal(err)
	}
	got := unsignaled(t, db, "bitcoin")
	var sum int64
	for txid, want := range map[string]int64{"p1": 785, "p2": 786, "p3": 786} {
		if got[txid].AmountCents != want {
			t.Errorf("%s valued at %d cents, want %d", txid, got[txid].AmountCents, want)
		}
		sum += got[txid].AmountCents
	}
	if sum != 2357 || len(got) != 3 {
		t.Fatalf("signalled %+v: %d cents, want the request's 2357 from its 3 parts", got, sum)
	}
}

// late is set when the payment's block is after the request's deadline
// (strictly), or, seen in the mempool with no block, when it is seen after
// it; a late payment is still valued and signalled, so the workflow can
// hand it to support.
func TestLateFlagFromTheBlockTime(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, "lateflag@example.com")
	deadline := time.Now().Add(time.Hour).Truncate(time.Second)
	seedRequest(t, db, "PI-LATEFLAG", seedOrder(t, db, acc, 1), acc, "bitcoin", "BTC", "bc1qlateflag", 920, deadline, deadline.Add(24*time.Hour))
	past := time.Now().Add(-time.Minute).Truncate(time.Second)
	seedRequest(t, db, "PI-LATEPOOL", seedOrder(t, db, acc, 1), acc, "litecoin", "LTC", "ltc1qlatepool", 921, past, past.Add(24*time.Hour))
	for _, n := range []string{"bitcoin", "litecoin"} {
		if ok, err := db.AcquireLease(ctx, n, "w", time.Minute); err != nil || !ok {
			t.Fatalf("lease %s: %v %v", n, ok, err)
		}
	}
	pay := func(txid string, at time.Time, h int64) chainwatch.Seen {
		return chainwatch.Seen{TxID: txid, Asset: "BTC", Address: "bc1qlateflag", Amount: big.NewInt(1000),
			BlockHeight: h, BlockHash: fmt.Sprint("h", h), BlockTime: at}
	}
	block := []chainwatch.Seen{pay("before", deadline.Add(-time.Second), 70), pay("at", deadline, 70), pay("after", deadline.Add(time.Second), 70)}
	if err := db.RecordBlock(ctx, "bitcoin", "w", 70, "h70", block); err != nil {
		t.Fatal(err)
	}
	pool := []chainwatch.Seen{{TxID: "pool", Asset: "LTC", Address: "ltc1qlatepool", Amount: big.NewInt(1000)}}
	if err := db.RecordMempool(ctx, "litecoin", "w", pool); err != nil {
		t.Fatal(err)
	}
	got := unsignaled(t, db, "bitcoin")
	for txid, p := range unsignaled(t, db, "litecoin") {
		got[txid] = p
	}
	for txid, late := range map[string]bool{"before": false, "at": false, "after": true, "pool": true} {
		p, ok := got[txid]
		if !ok || p.Late != late || p.AmountCents <= 0 {
			t.Errorf("%s: signalled %v %+v, want late=%v and valued", txid, ok, p, late)
		}
	}
}

// Support values an amount received in another asset once: the queued
// amount and its chain payment take the value, the timeline says who and
// why; a second value is refused and changes nothing; a value of 0 closes
// the amount (sent back on chain). What is not in the queue, or not a
// valid value, is refused.
func TestValueExceptionOnce(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, "value@example.com")
	until := time.Now().Add(time.Hour)
	refs := []string{seedOrder(t, db, acc, 1), seedOrder(t, db, acc, 1)}
	for i, ref := range refs {
		seedRequest(t, db, fmt.Sprint("PI-VALUE", i), ref, acc, "ethereum", "ETH", fmt.Sprint("0xvalue", i), 930+i, until, until.Add(24*time.Hour))
	}
	if ok, err := db.AcquireLease(ctx, "ethereum", "w", time.Minute); err != nil || !ok {
		t.Fatalf("lease %v %v", ok, err)
	}
	var usdt []chainwatch.Seen
	for i := range refs {
		usdt = append(usdt, chainwatch.Seen{TxID: fmt.Sprint("usdt", i), Asset: "USDT", Address: fmt.Sprint("0xvalue", i),
			Amount: big.NewInt(5_000_000), BlockHeight: 80, BlockHash: "h80", BlockTime: time.Now()})
	}
	if err := db.RecordBlock(ctx, "ethereum", "w", 80, "h80", usdt); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Confirm(ctx, "ethereum", "w", 80); err != nil {
		t.Fatal(err)
	}
	queued := func(ref string) domain.Exception {
		t.Helper()
		es, err := db.ExceptionsOf(ctx, ref)
		if err != nil || len(es) != 1 || es[0].Reason != domain.ExceptionOtherAsset {
			t.Fatalf("queue of %s: %+v %v", ref, es, err)
		}
		return es[0]
	}
	open := func(id int64) bool {
		t.Helper()
		es, err := db.OpenExceptions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.ID == id {
				return true
			}
		}
		return false
	}
	settled := func(id int64) bool {
		t.Helper()
		var done bool
		if err := db.Get(&done, `SELECT settled_at IS NOT NULL FROM payment_exceptions WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		return done
	}
	paymentCents := func(txid string) int64 {
		t.Helper()
		var c int64
		if err := db.Get(&c, `SELECT amount_cents FROM chain_payments WHERE network = 'ethereum' AND txid = $1`, txid); err != nil {
			t.Fatal(err)
		}
		return c
	}
	valued, sentBack := queued(refs[0]), queued(refs[1])
	if !valued.NeedsValue || valued.AmountCents != 0 || !open(valued.ID) {
		t.Fatalf("before any value: %+v", valued)
	}

	for _, bad := range []domain.ExceptionValue{
		{ExceptionID: valued.ID, ActionID: 1, AmountCents: -1},
		{ExceptionID: valued.ID, ActionID: 0, AmountCents: 500},
		{ExceptionID: 0, ActionID: 1, AmountCents: 500},
	} {
		if err := db.ValueException(ctx, bad); domain.ErrorCode(err) != domain.ECodeInvalid {
			t.Errorf("%+v: %v, want %s", bad, err, domain.ECodeInvalid)
		}
	}
	if err := db.ValueException(ctx, domain.ExceptionValue{ExceptionID: 1 << 40, ActionID: 1, AmountCents: 500}); domain.ErrorCode(err) != domain.ECodeNotFound {
		t.Errorf("unknown amount: %v, want %s", err, domain.ECodeNotFound)
	}

	// 5 USDT at the rate observed when they came in: 5.00 USD.
	if err := db.RecordRate(ctx, rates.Rate{Asset: "USDT", USDPerUnit: decimal.NewFromInt(1), Source: "test", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	v := domain.ExceptionValue{ExceptionID: valued.ID, ActionID: 7, Agent: "agent-a", AmountCents: 500, Reason: "cours du jour"}
	if err := db.ValueException(ctx, v); err != nil {
		t.Fatal(err)
	}
	again := v
	again.ActionID, again.AmountCents = 8, 100_000_00
	if err := db.ValueException(ctx, again); domain.ErrorCode(err) != domain.ECodeConflict {
		t.Fatalf("second value: %v, want %s", err, domain.ECodeConflict)
	}
	e := queued(refs[0])
	if e.NeedsValue || e.AmountCents != 500 || e.RemainingCents() != 500 || !open(e.ID) || settled(e.ID) || paymentCents("usdt0") != 500 {
		t.Fatalf("valued at 500 cents: %+v, payment %d cents", e, paymentCents("usdt0"))
	}
	var actions []domain.TimelineEvent
	tl, err := db.Timeline(ctx, refs[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range tl {
		if ev.Kind == domain.EventSupportAction {
			actions = append(actions, ev)
		}
	}
	var data map[string]any
	if len(actions) == 1 {
		if err := json.Unmarshal(actions[0].Data, &data); err != nil {
			t.Fatal(err)
		}
	}
	if len(actions) != 1 || !strings.Contains(actions[0].Message, "5.00 USD") || data["agent"] != "agent-a" ||
		data["amount_cents"] != 500.0 || data["action_id"] != 7.0 || data["reason"] != "cours du jour" {
		t.Fatalf("timeline's support actions: %+v", actions)
	}

	if err := db.ValueException(ctx, domain.ExceptionValue{ExceptionID: sentBack.ID, ActionID: 9, Agent: "agent-a", Reason: "renvoyé"}); err != nil {
		t.Fatal(err)
	}
	if e := queued(refs[1]); e.NeedsValue || e.RemainingCents() != 0 || open(e.ID) || !settled(e.ID) || paymentCents("usdt1") != 0 {
		t.Fatalf("sent back: %+v, open %v, settled %v, payment %d cents", e, open(e.ID), settled(e.ID), paymentCents("usdt1"))
	}
	if s := ledgerSum(t, db); s != 0 {
		t.Fatalf("ledger does not balance: %d", s)
	}
}
