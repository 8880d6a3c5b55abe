package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/wfclient"
	"github.com/kernodeck/kernodeck/workflows"
)

// runID is the latest run of a workflow.
func (e *env) runID(workflowID string) string {
	e.t.Helper()
	d, err := e.tc.DescribeWorkflow(context.Background(), workflowID, "")
	if err != nil {
		return ""
	}
	return d.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// burst sends n extra confirmed payments of 100 cents at once.
func (e *env) burst(workflowID, prefix string, n int) {
	e.t.Helper()
	for i := range n {
		e.payment(workflowID, workflows.SignalPaymentConfirmed, btc(fmt.Sprintf("%s%03d", prefix, i), 100, false))
	}
}

// TestRentalContinuesAsNewCarryingEverything: an active rental whose
// history passes its bound (60 events here) continues as new: every extra
// payment is queued once, the status query and a support extension work on
// the new run, and the rental still ends and is torn down.
func TestRentalContinuesAsNewCarryingEverything(t *testing.T) {
	e := newEnv(t)
	acc := e.account("continue@example.com")
	const day = 4 * time.Second
	o := e.startOrderDays(acc, 3, workflows.RentalConfig{UnpaidTimeout: time.Hour, ProvisioningAttempts: 1,
		Day: day, MaxHistory: 60, ReminderOffsets: []time.Duration{day}})
	wid := workflows.RentalWorkflowID(o.Ref)
	var first string
	e.waitFor("first run", func() bool { first = e.runID(wid); return first != "" })
	e.paid(wid, btc("cn01", o.TotalCents, false))
	active := e.waitOrder(o.Ref, domain.StatusActive)

	e.burst(wid, "cnx", 30)
	e.waitQueued(o.Ref, 30)
	e.waitFor("continued as new", func() bool { return e.runID(wid) != first })
	e.burst(wid, "cny", 10)
	e.waitQueued(o.Ref, 40)
	// The new run knows what the old one counted: a re-sent payment adds
	// nothing (the next one is queued alone).
	e.payment(wid, workflows.SignalPaymentConfirmed, btc("cnx000", 100, false))
	e.payment(wid, workflows.SignalPaymentConfirmed, btc("cnz000", 100, false))
	e.waitQueued(o.Ref, 41)

	e.support("orders/"+o.Ref+"/extend", map[string]any{"days": 1, "reason": "geste commercial"})
	e.waitFor("extended on the new run", func() bool {
		got := e.order(o.Ref)
		return got.PeriodEnd != nil && got.PeriodEnd.Sub(*active.PeriodEnd) == day
	})
	v, err := e.tc.QueryWorkflow(context.Background(), wid, "", workflows.QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st workflows.RentalStatus
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	if st.Status != domain.StatusActive || len(st.PaymentsConfirmed) != 1 || st.PeriodEnd.IsZero() {
		t.Fatalf("query on the new run: %+v (want active, the paying payment, the period)", st)
	}
	e.waitOrder(o.Ref, domain.StatusEnded)
	e.waitFor("workflow closed", func() bool { return e.closed(wid) })
	var dup int
	if err := e.db.Get(&dup, `SELECT count(*) FROM payment_exceptions WHERE target_ref = $1 GROUP BY payment_key HAVING count(*) > 1`, o.Ref); err == nil {
		t.Fatalf("a payment queued twice")
	}
	n := len(historyOf(t, e.tc, wid).Events)
	t.Logf("last run: %d history events", n)
	replayHistory(t, e.tc, wid, "rental_continued_as_new.json")
}

// TestTopUpContinuesAsNewWhileListening: a credited top-up keeps listening
// for late payments; a burst of them passes its history bound and it
// continues as new, every payment queued once, those sent after the
// continuation included; three top-ups in a row. Before vDrain's
// listener, a payment whose signal came in the workflow task where the
// run decided to continue was held by a blocked selector, out of its
// channel's count, and the run ended without it (about one top-up in
// four when two such runs shared the machine).
func TestTopUpContinuesAsNewWhileListening(t *testing.T) {
	e := newEnv(t)
	acc := e.account("continue-topup@example.com")
	ctx := context.Background()
	for round := range 3 {
		tu, err := e.db.CreateTopUp(ctx, acc, 10000)
		if err != nil {
			t.Fatal(err)
		}
		in := workflows.NewTopUpInput(tu, time.Hour)
		in.MaxHistory = 40
		if err := (&wfclient.Client{Temporal: e.tc}).StartTopUp(ctx, in); err != nil {
			t.Fatal(err)
		}
		wid := workflows.TopUpWorkflowID(tu.Ref)
		tx := func(s string) string { return fmt.Sprintf("r%d%s", round, s) }
		var first string
		e.waitFor("first run", func() bool { first = e.runID(wid); return first != "" })
		e.paid(wid, btc(tx("ct01"), 10000, false))
		e.waitTopUp(tu.Ref, domain.TopUpCredited)
		e.burst(wid, tx("ctx"), 30)
		e.waitQueued(tu.Ref, 30)
		e.waitFor("continued as new", func() bool { return e.runID(wid) != first })
		e.burst(wid, tx("cty"), 5)
		e.waitQueued(tu.Ref, 35)
		e.payment(wid, workflows.SignalPaymentConfirmed, btc(tx("ctx000"), 100, false))
		e.payment(wid, workflows.SignalPaymentConfirmed, btc(tx("ctz000"), 100, false))
		e.waitQueued(tu.Ref, 36)
		if got, want := e.balance(acc), int64(10000*(round+1)); got != want {
			t.Fatalf("balance %d, want %d: credited once each", got, want)
		}
	}
}

// TestRentalContinuesAsNewWhileWaiting: a rental continues as new while
// awaiting its payment (a burst of late payments) and while waiting for
// support after a provisioning failure (a burst of extra payments); each
// new run picks up where the old one waited: the order is then paid, and
// support's retry provisions it.
func TestRentalContinuesAsNewWhileWaiting(t *testing.T) {
	var flaky *flakyProvisioner
	e := newEnv(t, withFlaky(&flaky))
	acc := e.account("continue-wait@example.com")
	cfg := workflows.RentalConfig{UnpaidTimeout: time.Hour, ProvisioningAttempts: 1, MaxHistory: 40}

	o := e.startOrder(acc, cfg)
	wid := workflows.RentalWorkflowID(o.Ref)
	first := e.runID(wid)
	for i := range 30 {
		e.payment(wid, workflows.SignalPaymentConfirmed, btc(fmt.Sprintf("cwl%03d", i), 10, true))
	}
	e.waitQueued(o.Ref, 30)
	e.waitFor("continued as new awaiting payment", func() bool { return e.runID(wid) != first })
	e.paid(wid, btc("cw01", o.TotalCents, false))
	e.waitOrder(o.Ref, domain.StatusActive)

	flaky.failing.Store(true)
	o = e.startOrder(acc, cfg)
	wid = workflows.RentalWorkflowID(o.Ref)
	e.paid(wid, btc("cw02", o.TotalCents, false))
	e.waitOrder(o.Ref, domain.StatusProvisioningFailed)
	first = e.runID(wid)
	e.burst(wid, "cwx", 30)
	e.waitQueued(o.Ref, 30)
	e.waitFor("continued as new in provisioning_failed", func() bool { return e.runID(wid) != first })
	flaky.failing.Store(false)
	e.support("orders/"+o.Ref+"/retry-provisioning", map[string]any{"reason": "machine revenue"})
	e.waitOrder(o.Ref, domain.StatusActive)
	e.settled(wid) // the run may just have continued as new: its first task done
	replayHistory(t, e.tc, wid, "rental_continued_provisioning_failed.json")
}
