package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/workflows"
)

// reverted sends a deep reorganisation's revert of a confirmed payment.
// reverted sends p's reversal after confirmation as the watcher does: the
// payment's generation goes up, and its later states carry it.
func (e *env) reverted(workflowID string, p *workflows.PaymentEvent) {
	p.Reversals++
	rp := *p
	rp.AfterConfirmation = true
	e.payment(workflowID, workflows.SignalPaymentReverted, rp)
}

// lastEvent is the newest timeline event of kind on ref ("" if none).
func (e *env) lastEvent(ref, kind string) string {
	var msg []string
	_ = e.db.Select(&msg, `SELECT message FROM timeline_events WHERE ref = $1 AND kind = $2 ORDER BY id DESC LIMIT 1`, ref, kind)
	if len(msg) == 0 {
		return ""
	}
	return msg[0]
}

// partlyPaidOrder starts a new customer's order and counts a confirmed
// payment of 10 USD (txid) toward it.
func (e *env) partlyPaidOrder(email, txid string) (domain.Order, string, workflows.PaymentEvent) {
	e.t.Helper()
	o := e.startOrder(e.account(email), workflows.RentalConfig{UnpaidTimeout: time.Hour, ProvisioningAttempts: 1})
	wid := workflows.RentalWorkflowID(o.Ref)
	p := btc(txid, 1000, false)
	e.paid(wid, p)
	e.waitFor("partial counted", func() bool { return e.order(o.Ref).PaidCents == 1000 })
	return o, wid, p
}

// exceptionsOf reads every queued row of ref (open or not) from the store.
func (e *env) exceptionsOf(ref string) []domain.Exception {
	e.t.Helper()
	xs, err := e.db.ExceptionsOf(context.Background(), ref)
	if err != nil {
		e.t.Fatal(err)
	}
	return xs
}

// moneyOf checks issue 10's rule on one target: received on chain =
// counted + refunded + still queued - shortfall of reverted payments.
func (e *env) moneyOf(ref string, received, counted int64) {
	e.t.Helper()
	var refunded, queued, shortfall int64
	for _, x := range e.exceptionsOf(ref) {
		refunded += x.RefundedCents
		queued += x.RemainingCents()
		shortfall += x.ShortfallCents
	}
	var orderRefunds int64
	_ = e.db.Get(&orderRefunds, `SELECT COALESCE((SELECT refunded_cents FROM orders WHERE ref = $1), 0)`, ref)
	refunded += orderRefunds
	if got := counted + refunded + queued - shortfall; got != received {
		e.t.Fatalf("%s: received %d, counted %d + refunded %d + queued %d - shortfall %d = %d",
			ref, received, counted, refunded, queued, shortfall, got)
	}
}

// TestRevertAfterConfirmationBeforeProvisioning: a confirmed partial
// payment removed by a deep reorganisation is uncounted, the order awaits
// payment again (its timeline says so, nothing queued); the same
// transaction mined again counts once; the rest pays the order.
func TestRevertAfterConfirmationBeforeProvisioning(t *testing.T) {
	e := newEnv(t)
	o, wid, p := e.partlyPaidOrder("reorg-before@example.com", "re01")

	e.reverted(wid, &p)
	e.waitFor("payment uncounted", func() bool {
		got := e.order(o.Ref)
		return got.PaidCents == 0 && got.Status == domain.StatusAwaitingPayment
	})
	if msg := e.lastEvent(o.Ref, domain.EventPaymentReverted); !strings.Contains(msg, "attend de nouveau son paiement") {
		t.Fatalf("timeline: %q", msg)
	}
	if xs := e.exceptionsOf(o.Ref); len(xs) != 0 {
		t.Fatalf("queued %+v: nothing was paid out of it", xs)
	}

	// Mined again: counted again, once (a re-sent confirmation adds nothing).
	e.paid(wid, p)
	e.payment(wid, workflows.SignalPaymentConfirmed, p)
	e.waitFor("counted again", func() bool { return e.order(o.Ref).PaidCents == 1000 })
	e.paid(wid, btc("re02", o.TotalCents-1000, false))
	got := e.waitOrder(o.Ref, domain.StatusActive)
	if got.PaidCents != o.TotalCents {
		t.Fatalf("paid %d of %d", got.PaidCents, o.TotalCents)
	}
	e.moneyOf(o.Ref, o.TotalCents, got.PaidCents-got.RefundedCents)
	e.support("orders/"+o.Ref+"/end-early", map[string]any{"reason": "fin du test"})
	e.waitOrder(o.Ref, domain.StatusEnded)
	replayHistory(t, e.tc, wid, "rental_reverted_before_provisioning.json")
}

// TestRefundedPartialReversedThenMinedAgain: a partial payment support
// refunded to the balance, then removed by a deep reorganisation. The
// refund is the order's shortfall, flagged for support and not owed again
// (the order still owes its total, not the total plus the refund); the
// payment mined again backs the refund (the flag closes by itself) and the
// rest pays the order. Recorded for the replay test (kernodeck-history v6).
func TestRefundedPartialReversedThenMinedAgain(t *testing.T) {
	e := newEnv(t)
	o, wid, p := e.partlyPaidOrder("reorg-refund@example.com", "rr01")
	e.support("orders/"+o.Ref+"/refund", map[string]any{"amount_cents": 1000, "reason": "remboursement demandé"})
	e.waitFor("partial refunded", func() bool { return e.order(o.Ref).RefundedCents == 1000 })

	e.reverted(wid, &p)
	e.waitFor("refund become shortfall", func() bool {
		got := e.order(o.Ref)
		return got.PaidCents == 0 && got.ShortfallCents == 1000 && got.Status == domain.StatusAwaitingPayment
	})
	xs := e.exceptionsOf(o.Ref)
	if len(xs) != 1 || xs[0].Reason != domain.ExceptionReverted || xs[0].ShortfallCents != 1000 {
		t.Fatalf("queue %+v: want one reverted flag with 1000 shortfall", xs)
	}
	e.moneyOf(o.Ref, 0, 0)

	// Mined again: it backs the refund, nothing is queued or owed twice.
	e.paid(wid, p)
	e.waitFor("refund backed again", func() bool {
		got := e.order(o.Ref)
		return got.PaidCents == 1000 && got.ShortfallCents == 0
	})
	if xs := e.exceptionsOf(o.Ref); len(xs) != 1 || xs[0].Resolution != domain.ResolutionRemined || xs[0].ShortfallCents != 0 {
		t.Fatalf("queue %+v: want the flag closed as remined", xs)
	}
	e.paid(wid, btc("rr02", o.TotalCents, false))
	got := e.waitOrder(o.Ref, domain.StatusActive)
	if got.PaidCents != 1000+o.TotalCents {
		t.Fatalf("paid %d, want %d", got.PaidCents, 1000+o.TotalCents)
	}
	e.moneyOf(o.Ref, 1000+o.TotalCents, o.TotalCents)
	e.support("orders/"+o.Ref+"/end-early", map[string]any{"reason": "fin du test"})
	e.waitOrder(o.Ref, domain.StatusEnded)
	replayHistory(t, e.tc, wid, "rental_refund_reverted_remined.json")
}

// TestRevertAfterConfirmationFlaggedForSupport: an overpaid order is
// active, support refunded part of the excess; a deep reorganisation then
// removes the payment. It is uncounted, the rest of the excess leaves the
// queue, and a "reverted" flag (not money: nothing to refund, shortfall =
// what was already refunded) shows in support's queue and on the order's
// timeline; the rental goes on. Mined again, it counts once more; support
// resolves the flag. The money rule holds at every step.
func TestRevertAfterConfirmationFlaggedForSupport(t *testing.T) {
	e := newEnv(t)
	acc := e.account("reorg-after@example.com")
	o := e.startOrder(acc, workflows.RentalConfig{UnpaidTimeout: time.Hour, ProvisioningAttempts: 1})
	wid := workflows.RentalWorkflowID(o.Ref)
	p := btc("rf01", 3000, false)
	over := 3000 - o.TotalCents
	e.paid(wid, p)
	e.waitOrder(o.Ref, domain.StatusActive)
	q := e.waitQueued(o.Ref, 1)
	if st, out := e.refundException(str(q[0]["id"]), 100); st != http.StatusOK {
		t.Fatalf("refund: %d %v", st, out)
	}
	e.moneyOf(o.Ref, 3000, o.TotalCents)

	e.reverted(wid, &p)
	e.waitFor("payment uncounted", func() bool { return e.order(o.Ref).PaidCents == 0 })
	if msg := e.lastEvent(o.Ref, domain.EventPaymentReverted); !strings.Contains(msg, "Le support est prévenu") {
		t.Fatalf("timeline: %q", msg)
	}
	q = e.waitQueued(o.Ref, 1)
	flag := q[0]
	if str(flag["reason"]) != domain.ExceptionReverted || str(flag["remaining_cents"]) != "0" || str(flag["shortfall_cents"]) != "100" {
		t.Fatalf("flag %v: want reverted, nothing remaining, shortfall 100", flag)
	}
	if st, out := e.refundException(str(flag["id"]), 0); st != http.StatusConflict {
		t.Fatalf("refund of a reverted flag: %d %v, want 409", st, out)
	}
	if got := e.order(o.Ref); got.Status != domain.StatusActive {
		t.Fatalf("status %s: the rental goes on", got.Status)
	}
	e.moneyOf(o.Ref, 0, 0)

	// Mined again: counted toward what its reversal left missing, once.
	e.paid(wid, p)
	e.payment(wid, workflows.SignalPaymentConfirmed, p)
	e.waitFor("counted again", func() bool { return e.order(o.Ref).PaidCents == 3000 })
	q = e.waitQueued(o.Ref, 2) // the flag (shortfall stays) and the new excess
	e.moneyOf(o.Ref, 3000, o.TotalCents)
	for _, x := range q {
		if str(x["reason"]) == domain.ExceptionOver && str(x["remaining_cents"]) != fmt.Sprint(over) {
			t.Fatalf("new excess %v, want %d", x, over)
		}
	}
	e.support("exceptions/"+str(flag["id"])+"/resolve", map[string]any{"reason": "perte acceptée, client prévenu"})
	e.waitQueued(o.Ref, 1)
	e.moneyOf(o.Ref, 3000, o.TotalCents)
	e.support("orders/"+o.Ref+"/end-early", map[string]any{"reason": "fin du test"})
	e.waitOrder(o.Ref, domain.StatusEnded)
	replayHistory(t, e.tc, wid, "rental_reverted_after_provisioning.json")
}

// TestTopUpRevertedAfterCredit: a credited top-up's payment removed by a
// deep reorganisation is flagged for support (shortfall = the amount) and
// its credit taken back from the balance, never silently kept; mined
// again, the flag closes by itself, the credit is given back, and nothing
// is credited or queued twice.
func TestTopUpRevertedAfterCredit(t *testing.T) {
	e := newEnv(t)
	acc := e.account("reorg-topup@example.com")
	tu := e.startTopUp(acc, 10000, time.Hour)
	wid := workflows.TopUpWorkflowID(tu.Ref)
	p := btc("rt01", 10000, false)
	e.paid(wid, p)
	e.waitTopUp(tu.Ref, domain.TopUpCredited)

	e.reverted(wid, &p)
	q := e.waitQueued(tu.Ref, 1)
	if str(q[0]["reason"]) != domain.ExceptionReverted || str(q[0]["shortfall_cents"]) != "10000" {
		t.Fatalf("flag %v", q[0])
	}
	if got := e.balance(acc); got != 0 {
		t.Fatalf("balance %d after the reversal, want the credit taken back", got)
	}
	e.paid(wid, p)
	e.waitQueued(tu.Ref, 0)
	xs := e.exceptionsOf(tu.Ref)
	if len(xs) != 1 || xs[0].Resolution != domain.ResolutionRemined || xs[0].ShortfallCents != 0 {
		t.Fatalf("rows %+v: want the flag resolved as remined", xs)
	}
	if got := e.balance(acc); got != 10000 {
		t.Fatalf("balance %d after the payment came back", got)
	}
}

// TestDustAndBurstsKeepHistorySmall: dust summaries keep one queued row per
// payment request at the latest version (older and repeated ones write
// nothing), the order is never paid by dust; then 40 extra payments sent
// at once to the active rental are all queued for support with far fewer
// history events than one activity each.
func TestDustAndBurstsKeepHistorySmall(t *testing.T) {
	e := newEnv(t)
	acc := e.account("dust@example.com")
	o := e.startOrder(acc, workflows.RentalConfig{UnpaidTimeout: time.Hour, ProvisioningAttempts: 1})
	wid := workflows.RentalWorkflowID(o.Ref)
	dust := func(version, outputs, cents int64) {
		id, address := e.testRequest(wid, "BTC", "bitcoin")
		d := workflows.DustSummary{
			Addressed: domain.Addressed{Target: wid}, IntentID: id, Address: address,
			Network: "bitcoin", Asset: "BTC", Version: version, Outputs: outputs,
			AmountBase: fmt.Sprint(outputs * 300), AmountCents: cents}
		pgtest.Recorded(t, e.db, d.Claim())
		if err := e.tc.SignalWorkflow(context.Background(), wid, "", workflows.SignalPaymentDust, d); err != nil {
			t.Fatal(err)
		}
	}
	dust(1, 10, 50)
	dust(3, 3000, 15000)
	dust(2, 20, 100) // older: ignored
	dust(3, 3000, 15000)
	e.waitFor("dust queued", func() bool {
		q := e.queueOf(o.Ref)
		return len(q) == 1 && str(q[0]["amount_cents"]) == "15000"
	})
	var dustEvents int
	if err := e.db.Get(&dustEvents, `SELECT count(*) FROM timeline_events WHERE ref = $1 AND kind = $2`,
		o.Ref, domain.EventPaymentDust); err != nil || dustEvents > 2 {
		t.Fatalf("%d dust events (%v): at most one per fresher summary", dustEvents, err)
	}
	if got := e.order(o.Ref); got.PaidCents != 0 || got.Status != domain.StatusAwaitingPayment {
		t.Fatalf("order %s paid %d: dust never pays", got.Status, got.PaidCents)
	}

	e.paid(wid, btc("du01", o.TotalCents, false))
	e.waitOrder(o.Ref, domain.StatusActive)
	before := len(historyOf(t, e.tc, wid).Events)
	const burst = 40
	for i := range burst {
		e.payment(wid, workflows.SignalPaymentConfirmed, btc(fmt.Sprintf("burst%02d", i), 100, false))
	}
	e.waitQueued(o.Ref, 1+burst)
	grew := len(historyOf(t, e.tc, wid).Events) - before
	t.Logf("%d extra payments: history +%d events (%d signals)", burst, grew, burst)
	// Each signal is one event; how many batches they make depends on
	// timing. At worst each is its own batch: a workflow task (3 events)
	// and one local-activity marker, 5 per signal, against 14-22 before
	// batching.
	if grew > 5*burst {
		t.Fatalf("history grew by %d events for %d signals", grew, burst)
	}
	e.support("orders/"+o.Ref+"/end-early", map[string]any{"reason": "fin du test"})
	e.waitOrder(o.Ref, domain.StatusEnded)
	replayHistory(t, e.tc, wid, "rental_dust_burst.json")
}
