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

// valueFixture queues payments of USDT received at ETH requests'
// addresses (other_asset, needs_value), each on an order of its own.
type valueFixture struct {
	t   *testing.T
	ctx context.Context
	db  *postgres.DB
	acc int64
	n   int
}

func newValueFixture(t *testing.T) *valueFixture {
	t.Helper()
	ctx := context.Background()
	db := pgtest.NewDB(t)
	if ok, err := db.AcquireLease(ctx, "ethereum", "w", time.Minute); err != nil || !ok {
		t.Fatalf("lease %v %v", ok, err)
	}
	return &valueFixture{t: t, ctx: ctx, db: db, acc: seedAccount(t, db, "bound@example.com")}
}

// receive queues units base units of USDT received in a block dated at,
// and returns its queued row and order.
func (f *valueFixture) receive(units int64, at time.Time) (domain.Exception, string) {
	f.t.Helper()
	f.n++
	ref := seedOrder(f.t, f.db, f.acc, 1)
	until := time.Now().Add(time.Hour)
	address := fmt.Sprint("0xbound", f.n)
	seedRequest(f.t, f.db, fmt.Sprint("PI-BOUND", f.n), ref, f.acc, "ethereum", "ETH", address, 960+f.n, until, until.Add(24*time.Hour))
	h := int64(100 + f.n)
	seen := chainwatch.Seen{TxID: fmt.Sprint("bound", f.n), Asset: "USDT", Address: address, Amount: big.NewInt(units),
		BlockHeight: h, BlockHash: fmt.Sprint("h", h), BlockTime: at}
	if err := f.db.RecordBlock(f.ctx, "ethereum", "w", h, seen.BlockHash, []chainwatch.Seen{seen}); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.db.Confirm(f.ctx, "ethereum", "w", h); err != nil {
		f.t.Fatal(err)
	}
	es, err := f.db.ExceptionsOf(f.ctx, ref)
	if err != nil || len(es) != 1 || !es[0].NeedsValue {
		f.t.Fatalf("queue of %s: %+v %v", ref, es, err)
	}
	return es[0], ref
}

// rate records an observation of USDT at usd per unit.
func (f *valueFixture) rate(usd string, at time.Time) {
	f.t.Helper()
	if err := f.db.RecordRate(f.ctx, rates.Rate{Asset: "USDT", USDPerUnit: decimal.RequireFromString(usd), Source: "test", At: at}); err != nil {
		f.t.Fatal(err)
	}
}

// value asks support's value of e.
func (f *valueFixture) value(e domain.Exception, cents int64, approved bool) error {
	f.n++
	return f.db.ValueException(f.ctx, domain.ExceptionValue{ExceptionID: e.ID, ActionID: int64(f.n), Agent: "agent-a",
		AmountCents: cents, Reason: "cours du jour", Approved: approved})
}

// unchanged fails unless e (of order ref) still waits for its value: no
// value on the row nor on its chain payment, no support action on the
// timeline.
func (f *valueFixture) unchanged(e domain.Exception, ref string) {
	f.t.Helper()
	var needs bool
	var cents, paid int64
	if err := f.db.QueryRow(`SELECT needs_value, amount_cents FROM payment_exceptions WHERE id = $1`, e.ID).Scan(&needs, &cents); err != nil {
		f.t.Fatal(err)
	}
	if err := f.db.Get(&paid, `SELECT amount_cents FROM chain_payments WHERE network = 'ethereum' AND txid = $1`, e.TxID); err != nil {
		f.t.Fatal(err)
	}
	if !needs || cents != 0 || paid != 0 || len(f.actions(ref)) != 0 {
		f.t.Fatalf("refused value changed something: needs_value %v, %d cents, payment %d cents, events %+v", needs, cents, paid, f.actions(ref))
	}
}

// actions are the support actions on ref's timeline.
func (f *valueFixture) actions(ref string) []domain.TimelineEvent {
	f.t.Helper()
	tl, err := f.db.Timeline(f.ctx, ref, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []domain.TimelineEvent
	for _, ev := range tl {
		if ev.Kind == domain.EventSupportAction {
			out = append(out, ev)
		}
	}
	return out
}

// valued fails unless e was valued at cents.
func (f *valueFixture) valued(e domain.Exception, ref string, cents int64) {
	f.t.Helper()
	es, err := f.db.ExceptionsOf(f.ctx, ref)
	if err != nil || len(es) != 1 || es[0].NeedsValue || es[0].AmountCents != cents || len(f.actions(ref)) != 1 {
		f.t.Fatalf("valued at %d cents: %+v %v, events %+v", cents, es, err, f.actions(ref))
	}
}

// Support's value of a payment in another asset is bounded by its amount
// at the rate observed when it came in, ± 2 %: 5 USDT at 1 USD are worth
// 4.90 to 5.10 USD, edges included. Outside, refused with
// value_out_of_bounds and a French message giving the range and the rate,
// and nothing changes. 1 base unit of USDT is not worth 1,000,000 USD.
func TestValueBoundedByTheRateAtReception(t *testing.T) {
	f := newValueFixture(t)
	now := time.Now()
	f.rate("1", now.Add(-10*time.Minute))
	top, topRef := f.receive(5_000_000, now.Add(-5*time.Minute))
	bottom, bottomRef := f.receive(5_000_000, now.Add(-5*time.Minute))
	dust, dustRef := f.receive(1, now.Add(-5*time.Minute))

	b, err := f.db.ValueBound(f.ctx, top.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Known || b.MinCents != 490 || b.MaxCents != 510 || b.Rate != "1" || b.RateSource != "test" || b.Asset != "USDT" ||
		b.Decimals != 6 || b.Tolerance != "0.02" || !b.ObservedAt.Round(time.Second).Equal(now.Add(-10*time.Minute).Round(time.Second)) {
		t.Fatalf("bound: %+v", b)
	}

	for _, c := range []struct {
		e     domain.Exception
		ref   string
		cents int64
	}{{top, topRef, 511}, {bottom, bottomRef, 489}, {dust, dustRef, 100_000_000}} {
		err := f.value(c.e, c.cents, false)
		if domain.ErrorCode(err) != domain.ECodeValueOutOfBounds {
			t.Fatalf("%d cents: %v, want %s", c.cents, err, domain.ECodeValueOutOfBounds)
		}
		f.unchanged(c.e, c.ref)
	}
	err = f.value(top, 511, false)
	for _, want := range []string{"5.000000 USDT", "de 4.90 à 5.10 USD", "au cours de 1 USD par USDT", "tolérance 2 %", "pas 5.11 USD", "Rien n'a été modifié"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	// Not even approved by a second agent: approval does not lift a known bound.
	if err := f.value(dust, 100_000_000, true); domain.ErrorCode(err) != domain.ECodeValueOutOfBounds {
		t.Fatalf("approved 1 base unit at 1,000,000 USD: %v", err)
	}
	f.unchanged(dust, dustRef)

	if err := f.value(top, 510, false); err != nil {
		t.Fatalf("just inside, at the top: %v", err)
	}
	f.valued(top, topRef, 510)
	if err := f.value(bottom, 490, false); err != nil {
		t.Fatalf("just inside, at the bottom: %v", err)
	}
	f.valued(bottom, bottomRef, 490)
	var data map[string]any
	if err := json.Unmarshal(f.actions(topRef)[0].Data, &data); err != nil || data["rate_usd_per_unit"] != "1" {
		t.Fatalf("timeline data %v %v: want the rate used", data, err)
	}
	if err := f.value(dust, 1, false); err != nil {
		t.Fatalf("1 base unit at 1 cent: %v", err)
	}
}

// The rate that bounds a value is the observation nearest to the
// payment's reception (its block's time, when earlier than when the
// watcher saw it), within an hour on either side; the tolerance is
// configurable.
func TestValueBoundTakesTheNearestRate(t *testing.T) {
	f := newValueFixture(t)
	received := time.Now().Add(-3 * time.Hour)
	f.rate("100", received.Add(-61*time.Minute)) // out of the window
	f.rate("1", received.Add(-50*time.Minute))
	f.rate("2", received.Add(10*time.Minute)) // nearest
	f.rate("3", received.Add(30*time.Minute))
	f.rate("1", time.Now()) // when the watcher saw it: not the reception
	e, ref := f.receive(5_000_000, received)
	b, err := f.db.ValueBound(f.ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Known || b.Rate != "2" || b.MinCents != 980 || b.MaxCents != 1020 || !b.ReceivedAt.Round(time.Second).Equal(received.Round(time.Second)) {
		t.Fatalf("bound: %+v", b)
	}
	if err := f.value(e, 500, false); domain.ErrorCode(err) != domain.ECodeValueOutOfBounds || !strings.Contains(err.Error(), "au cours de 2 USD par USDT") {
		t.Fatalf("value at another rate: %v", err)
	}
	f.unchanged(e, ref)
	f.db.SetValueTolerance(decimal.RequireFromString("0.05"))
	if b, err := f.db.ValueBound(f.ctx, e.ID); err != nil || b.MinCents != 950 || b.MaxCents != 1050 || b.Tolerance != "0.05" {
		t.Fatalf("bound at 5 %%: %+v %v", b, err)
	}
	if err := f.value(e, 1040, false); err != nil {
		t.Fatal(err)
	}
	f.valued(e, ref, 1040)
}

// With no rate of the asset observed within an hour of the payment's
// reception, the value is unbounded: refused (value_unbounded, nothing
// changes) unless a second agent approved it. Sent back on chain (0)
// needs no rate.
func TestValueWithoutRateNeedsApproval(t *testing.T) {
	f := newValueFixture(t)
	received := time.Now().Add(-3 * time.Hour)
	f.rate("1", received.Add(-61*time.Minute))
	f.rate("1", received.Add(61*time.Minute))
	e, ref := f.receive(5_000_000, received)
	back, backRef := f.receive(5_000_000, received)
	b, err := f.db.ValueBound(f.ctx, e.ID)
	if err != nil || b.Known || b.Rate != "" || b.MaxCents != 0 {
		t.Fatalf("bound without rate: %+v %v", b, err)
	}
	err = f.value(e, 500, false)
	if domain.ErrorCode(err) != domain.ECodeValueUnbounded || !strings.Contains(err.Error(), "approuvée par un second agent") {
		t.Fatalf("unapproved value without rate: %v, want %s", err, domain.ECodeValueUnbounded)
	}
	f.unchanged(e, ref)
	if err := f.value(e, 500, true); err != nil {
		t.Fatalf("approved: %v", err)
	}
	f.valued(e, ref, 500)
	var data map[string]any
	if err := json.Unmarshal(f.actions(ref)[0].Data, &data); err != nil || data["approved"] != true {
		t.Fatalf("timeline data %v %v: want approved", data, err)
	}
	if err := f.value(back, 0, false); err != nil {
		t.Fatalf("sent back on chain without rate: %v", err)
	}
	f.valued(back, backRef, 0)
}
