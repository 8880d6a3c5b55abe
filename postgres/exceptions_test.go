package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// A late payment goes to the exception queue with the transition that
// records it; late_cents is read back from the queue; a refund of it is one
// transition bounded by what remains; a partial refund leaves the rest.
func TestLatePaymentQueuedThenRefundedInParts(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, "late@example.com")
	ref := seedOrder(t, db, acc, 1)
	late := domain.NewException{Reason: domain.ExceptionLate, PaymentKey: "bitcoin:tx1:0", Network: "bitcoin",
		TxID: "tx1", Asset: "BTC", AmountBase: "36262", AmountCents: 2357}
	ev := domain.OrderEvent{OrderRef: ref, Key: domain.KeyConfirmed("bitcoin:tx1:0"), Kind: domain.EventPaymentConfirmed,
		Message: "late", At: time.Now(), Exceptions: []domain.NewException{late}}
	for range 2 { // a retried activity queues it once
		if err := db.RecordOrderEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	o, err := db.GetOrder(ctx, ref)
	if err != nil || o.LateCents != 2357 {
		t.Fatalf("late_cents read back = %d (%v)", o.LateCents, err)
	}
	open, err := db.OpenExceptions(ctx)
	if err != nil || len(open) != 1 || open[0].Email != "late@example.com" || open[0].TxID != "tx1" || open[0].RemainingCents() != 2357 {
		t.Fatalf("queue: %+v %v", open, err)
	}
	id := open[0].ID
	refund := func(key string, cents int64) error {
		return db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: ref, Key: key, Kind: domain.EventRefunded, Message: "r", At: time.Now(),
			Use:     &domain.ExceptionUse{ExceptionID: id, Cents: cents, Refund: true},
			Posting: &domain.Posting{Kind: domain.PostingRefund, AccountID: acc, Cents: cents}})
	}
	if err := refund(domain.KeyExceptionRefund(1), 1); err != nil {
		t.Fatal(err)
	}
	if err := refund(domain.KeyExceptionRefund(2), 2357); domain.ErrorCode(err) != domain.ECodeConflict {
		t.Fatalf("refund above what remains: %v", err)
	}
	if o, _ := db.GetOrder(ctx, ref); o.LateCents != 2356 {
		t.Fatalf("late_cents after 1 cent = %d", o.LateCents)
	}
	if err := refund(domain.KeyExceptionRefund(3), 2356); err != nil {
		t.Fatal(err)
	}
	b, _ := db.Balance(ctx, acc)
	if b.AvailableCents != 2357 {
		t.Fatalf("available = %d", b.AvailableCents)
	}
	if open, _ := db.OpenExceptions(ctx); len(open) != 0 {
		t.Fatalf("settled amount still queued: %+v", open)
	}
	if err := refund(domain.KeyExceptionRefund(4), 1); domain.ErrorCode(err) != domain.ECodeConflict {
		t.Fatalf("refund of a settled amount: %v", err)
	}
	if s := ledgerSum(t, db); s != 0 {
		t.Fatalf("ledger does not balance: %d", s)
	}
	found, err := db.Find(ctx, "tx1")
	if err != nil || len(found) != 1 || found[0].Ref != ref {
		t.Fatalf("find by txid: %+v %v", found, err)
	}
	found, _ = db.Find(ctx, "LATE@example.com")
	if len(found) != 1 || found[0].Matched != "email" {
		t.Fatalf("find by email: %+v", found)
	}
}

// A payment state re-sent after the workflow closed (its acknowledgement
// was lost) is not queued when the workflow had recorded the payment: it
// was counted already. One the workflow never saw is queued once.
func TestAfterCloseRedeliveryOfACountedPaymentNotQueued(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, "redeliver@example.com")
	ref := seedOrder(t, db, acc, 1)
	seedIntent(t, db, "PI-REDELIVER", ref, acc, "bc1qredeliver", 901)
	counted := chainwatch.Pending{Network: "bitcoin", TxID: "counted1", Index: 0, Asset: "BTC", IntentID: "PI-REDELIVER",
		TargetKind: "order", TargetRef: ref, AmountBase: "36262", AmountCents: 2357, State: chainwatch.StateConfirmed}
	if err := db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: ref, Key: domain.KeyConfirmed(domain.PaymentKey("bitcoin", "counted1", 0)),
		Kind: domain.EventPaymentConfirmed, Message: "ok", At: time.Now(), PaidCents: &counted.AmountCents}); err != nil {
		t.Fatal(err)
	}
	unseen := counted
	unseen.TxID = "unseen1"
	// Counted, removed by a deep reorganisation, mined and counted again
	// (the workflow keys its second life key~1).
	again := counted
	again.TxID = "again1"
	apk := domain.PaymentKey("bitcoin", "again1", 0)
	for _, key := range []string{domain.KeyConfirmed(apk), domain.KeyRevertedConfirmed(apk), domain.KeyConfirmed(apk + "~1")} {
		if err := db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: ref, Key: key, Kind: domain.EventPaymentConfirmed,
			Message: "ok", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		for _, p := range []chainwatch.Pending{counted, unseen, again} {
			if err := db.MarkUndeliverable(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	es, err := db.ExceptionsOf(ctx, ref)
	if err != nil || len(es) != 1 || es[0].TxID != "unseen1" || es[0].Reason != domain.ExceptionAfterClose || es[0].AmountCents != 2357 {
		t.Fatalf("queued: %+v %v", es, err)
	}
}

// seedIntent stores a 23.57 USD bitcoin request of an order (36262 sat),
// valid an hour, watched a day more.
func seedIntent(t *testing.T, db *postgres.DB, id, ref string, acc int64, address string, index int) {
	t.Helper()
	if _, err := db.Exec(`INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals,
		amount_base, usd_cents, rate, rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until, request_key)
		VALUES ($1, 'order', $2, $3, 'BTC', 'bitcoin', 8, 36262, 2357, 65000, 'test', now(), $4, $5,
			'bitcoin:x', now() + interval '1 hour', now() + interval '25 hours', 'intent:1')`, id, ref, acc, address, index); err != nil {
		t.Fatal(err)
	}
}

// leasedIntent seeds an account, its order and the order's bitcoin request
// (seedIntent), and takes bitcoin's lease as "w", as a watcher holds it
// for the store's chain writes.
func leasedIntent(t *testing.T, email, intentID, address string, index int) (context.Context, *postgres.DB, int64, string) {
	t.Helper()
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, email)
	ref := seedOrder(t, db, acc, 1)
	seedIntent(t, db, intentID, ref, acc, address, index)
	if ok, err := db.AcquireLease(ctx, "bitcoin", "w", time.Minute); err != nil || !ok {
		t.Fatalf("lease %v %v", ok, err)
	}
	return ctx, db, acc, ref
}

// The store the chain watchers need (postgres itself imports domain only).
var _ chainwatch.Store = (*postgres.DB)(nil)

// closedSignaler answers as Temporal does for a closed workflow.
type closedSignaler struct{}

func (closedSignaler) Signal(context.Context, chainwatch.Pending) error {
	return chainwatch.ErrWorkflowClosed
}
func (closedSignaler) SignalDust(context.Context, chainwatch.DustPending) error {
	return chainwatch.ErrWorkflowClosed
}

// Dust confirmed after the target's workflow closed goes to support's queue
// (it used to stay in chain_payments, queued by nobody), once, at its
// running total.
func TestDustAfterCloseQueued(t *testing.T) {
	ctx, db, _, ref := leasedIntent(t, "dust@example.com", "PI-DUST", "bc1qdust", 902)
	for i, amount := range []int64{400, 500} {
		h := int64(10 + i)
		seen := chainwatch.Seen{TxID: "dust1", Index: int64(i), Asset: "BTC", Address: "bc1qdust", Amount: big.NewInt(amount),
			Dust: true, BlockHeight: h, BlockHash: fmt.Sprint("h", h), BlockTime: time.Now()}
		if err := db.RecordBlock(ctx, "bitcoin", "w", h, seen.BlockHash, []chainwatch.Seen{seen}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Confirm(ctx, "bitcoin", "w", h); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := chainwatch.Reconcile(ctx, "bitcoin", db, closedSignaler{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	es, err := db.ExceptionsOf(ctx, ref)
	// 900 satoshi at 2357 cents per 36262: 58 cents.
	if err != nil || len(es) != 1 || es[0].Reason != domain.ExceptionDust || es[0].AmountCents != 58 || es[0].AmountBase != "900" {
		t.Fatalf("queued: %+v %v", es, err)
	}
}

// A reorganisation below confirmed dust takes it out of its request's
// summary (the rewind used to fail on the summary's check, stopping the
// watcher at every such reorganisation).
func TestRewindOfConfirmedDust(t *testing.T) {
	ctx, db, _, _ := leasedIntent(t, "rewind@example.com", "PI-REWIND", "bc1qrewind", 903)
	seen := chainwatch.Seen{TxID: "dust2", Asset: "BTC", Address: "bc1qrewind", Amount: big.NewInt(700),
		Dust: true, BlockHeight: 20, BlockHash: "h20", BlockTime: time.Now()}
	if err := db.RecordBlock(ctx, "bitcoin", "w", 20, "h20", []chainwatch.Seen{seen}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Confirm(ctx, "bitcoin", "w", 20); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Rewind(ctx, "bitcoin", "w", 19); err != nil || n != 1 {
		t.Fatalf("rewind: %d %v", n, err)
	}
	var outputs, base int64
	if err := db.QueryRow(`SELECT outputs, amount_base FROM chain_dust_summaries WHERE intent_id = 'PI-REWIND'`).Scan(&outputs, &base); err != nil || outputs != 0 || base != 0 {
		t.Fatalf("summary after the rewind: %d outputs, %d base (%v)", outputs, base, err)
	}
}

// A payment put aside for support (paid after its request's watch window)
// and partly refunded, then removed by a reorganisation: its row has
// nothing left to refund and the refund is flagged as shortfall (the row
// stayed refundable for money the chain no longer held; invariant seed
// 173). Mined again, the row is queued as it was and the flag closes.
func TestPaymentToSupportReversedThenMinedAgain(t *testing.T) {
	ctx, db, acc, ref := leasedIntent(t, "aside@example.com", "PI-ASIDE", "bc1qaside", 904)
	mine := func() {
		t.Helper()
		seen := chainwatch.Seen{TxID: "aside1", Asset: "BTC", Address: "bc1qaside", Amount: big.NewInt(36262),
			BlockHeight: 30, BlockHash: "h30", BlockTime: time.Now().Add(26 * time.Hour)}
		if err := db.RecordBlock(ctx, "bitcoin", "w", 30, "h30", []chainwatch.Seen{seen}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Confirm(ctx, "bitcoin", "w", 30); err != nil {
			t.Fatal(err)
		}
	}
	queue := func() (row, flag domain.Exception) {
		t.Helper()
		es, err := db.ExceptionsOf(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			switch e.Reason {
			case domain.ExceptionNotWatched:
				row = e
			case domain.ExceptionReverted:
				flag = e
			default:
				t.Fatalf("unexpected row %+v", e)
			}
		}
		return row, flag
	}
	mine()
	row, _ := queue()
	if row.RemainingCents() != 2357 {
		t.Fatalf("queued %+v, want 2357 cents", row)
	}
	if err := db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: ref, Key: domain.KeyExceptionRefund(1), Kind: domain.EventRefunded,
		Message: "r", At: time.Now(), Use: &domain.ExceptionUse{ExceptionID: row.ID, Cents: 1000, Refund: true},
		Posting: &domain.Posting{Kind: domain.PostingRefund, AccountID: acc, Cents: 1000}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Rewind(ctx, "bitcoin", "w", 29); err != nil {
		t.Fatal(err)
	}
	row, flag := queue()
	if row.RemainingCents() != 0 || flag.ShortfallCents != 1000 || flag.ResolvedAt != nil {
		t.Fatalf("after the reorganisation: row %+v, flag %+v; want nothing refundable and 1000 shortfall", row, flag)
	}
	var msgs []string
	if err := db.Select(&msgs, `SELECT message FROM timeline_events WHERE ref = $1 AND kind = $2`, ref, domain.EventPaymentReverted); err != nil ||
		len(msgs) != 1 || !strings.Contains(msgs[0], "0.00036262 BTC") {
		t.Fatalf("reversal events %q (%v), want one saying 0.00036262 BTC", msgs, err)
	}
	mine()
	row, flag = queue()
	if row.RemainingCents() != 1357 || flag.ShortfallCents != 0 || flag.Resolution != domain.ResolutionRemined {
		t.Fatalf("mined again: row %+v, flag %+v; want 1357 refundable, flag closed", row, flag)
	}
}

// A block that adds a confirmation to a mined, not yet confirmed payment
// wakes the live page of the order it pays (no timeline entry comes with
// it): "x sur N" moves on at once, not at the stream's next poll.
func TestNewBlockWakesTheOrdersOfUnconfirmedPayments(t *testing.T) {
	ctx, db, _, ref := leasedIntent(t, "blocks@example.com", "PI-BLOCKS", "bc1qblocks", 904)
	seen := chainwatch.Seen{TxID: "conf1", Asset: "BTC", Address: "bc1qblocks", Amount: big.NewInt(36262),
		BlockHeight: 30, BlockHash: "h30", BlockTime: time.Now()}
	if err := db.RecordBlock(ctx, "bitcoin", "w", 30, "h30", []chainwatch.Seen{seen}); err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := db.NewTimelineListener(slog.Default())
	go func() { _ = l.Run(lctx) }()
	ch, unsub := l.Subscribe(ref)
	defer unsub()
	// The listener connects asynchronously: add blocks until one wakes it.
	deadline := time.After(10 * time.Second)
	for h := int64(31); ; h++ {
		if err := db.RecordBlock(ctx, "bitcoin", "w", h, fmt.Sprint("h", h), nil); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
			return
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("no wake-up on a new block")
		}
	}
}
