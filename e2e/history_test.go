package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/wfclient"
	"github.com/kernodeck/kernodeck/workflows"
)

// maxPlainRentalHistory is the bound of issue 13: a plain 30-day rental
// (created, paid, provisioned, two reminders, ended, torn down) fits in
// this many history events.
const maxPlainRentalHistory = 100

// startOrderDays stores an order of one RTX A5000 lot for days and starts
// its workflow with cfg.
func (e *env) startOrderDays(accountID int64, days int, cfg workflows.RentalConfig) domain.Order {
	e.t.Helper()
	o := e.createOrder(accountID, days)
	if err := (&wfclient.Client{Temporal: e.tc}).StartRental(context.Background(), workflows.NewRentalInput(o, cfg)); err != nil {
		e.t.Fatal(err)
	}
	return o
}

// createOrder stores an order of one RTX A5000 lot for days, without
// starting its workflow.
func (e *env) createOrder(accountID int64, days int) domain.Order {
	e.t.Helper()
	ctx := context.Background()
	item, err := e.db.CatalogItem(ctx, "rtx-a5000")
	if err != nil {
		e.t.Fatal(err)
	}
	q, err := domain.PriceQuote(item, domain.Configuration{Model: "rtx-a5000", Lots: 1, DurationDays: days, Preset: "python"})
	if err != nil {
		e.t.Fatal(err)
	}
	o, err := e.db.CreateOrder(ctx, accountID, q)
	if err != nil {
		e.t.Fatal(err)
	}
	return o
}

// TestThirtyDayRentalHistoryBound runs a whole plain 30-day rental on the
// real dev server, with real activities and a day shortened to 400 ms: paid
// by a chain watcher's signals, provisioned, two reminders (48 h and 6 h
// before the end, in shortened days), ended and torn down. Its history
// stays within maxPlainRentalHistory events.
func TestThirtyDayRentalHistoryBound(t *testing.T) {
	e := newEnv(t)
	acc := e.account("history@example.com")
	const day = 400 * time.Millisecond
	o := e.startOrderDays(acc, 30, workflows.RentalConfig{
		UnpaidTimeout: time.Hour, ProvisioningAttempts: 3, Day: day,
		ReminderOffsets: []time.Duration{2 * day, day / 4},
	})
	wid := workflows.RentalWorkflowID(o.Ref)
	e.paid(wid, workflows.PaymentEvent{Network: "bitcoin", Asset: "BTC", TxID: "hist01", AmountBase: "100000",
		AmountCents: o.TotalCents, IntentID: "PI-HISTORY"})
	e.waitOrder(o.Ref, domain.StatusActive)
	e.waitOrder(o.Ref, domain.StatusEnded)
	e.waitFor("workflow closed", func() bool { return e.closed(wid) })

	var reminders int
	if err := e.db.Get(&reminders, `SELECT count(*) FROM timeline_events WHERE ref = $1 AND kind = $2`,
		o.Ref, domain.EventReminderSent); err != nil || reminders != 2 {
		t.Fatalf("%d reminders (%v), want 2", reminders, err)
	}
	n := len(historyOf(t, e.tc, wid).Events)
	t.Logf("plain 30-day rental: %d history events", n)
	if n > maxPlainRentalHistory {
		t.Fatalf("plain 30-day rental: %d history events, want at most %d", n, maxPlainRentalHistory)
	}
	// From history version 9 (vLeanTasks; the first task from 10,
	// vStartInSync): one upsert of Kernodeck's search attributes per
	// workflow task, one timer at a time in the period, and the last status
	// upserted before the workflow closed.
	for i, task := range tasksOf(historyOf(t, e.tc, wid).Events) {
		if task.upserts > 1 || task.timers > 1 {
			t.Errorf("workflow task %d (event %d): %d search attribute upserts, %d timers started; want at most 1 of each",
				i, task.first, task.upserts, task.timers)
		}
	}
	if st := e.kdStatus(wid); st != string(domain.StatusEnded) {
		t.Errorf("KdStatus %q after the workflow closed, want %q", st, domain.StatusEnded)
	}
	replayHistory(t, e.tc, wid, "rental_30d_plain.json")
}

// TestFirstTaskUpsertsOnce starts a rental and a top-up with a payment
// that comes with their first workflow task, as on a busy server where the
// watcher's signal (or the checkout's payment request) reaches a workflow
// before a worker has run it: signal-with-start puts it there every time.
// That task moves the status, and still upserts the search attributes
// once, with the run's reference and the status it reached (history
// version 10, vStartInSync; at 9 the run's start upserted on its own).
func TestFirstTaskUpsertsOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acc := e.account("first-task@example.com")
	o := e.createOrder(acc, 3)
	tu, err := e.db.CreateTopUp(ctx, acc, 100_00)
	if err != nil {
		t.Fatal(err)
	}
	starts := []struct {
		wid, ref, wfType string
		in               any
		cents            int64
	}{
		{workflows.RentalWorkflowID(o.Ref), o.Ref, wfclient.RentalWorkflowType,
			workflows.NewRentalInput(o, workflows.RentalConfig{UnpaidTimeout: time.Hour}), o.TotalCents},
		{workflows.TopUpWorkflowID(tu.Ref), tu.Ref, wfclient.TopUpWorkflowType,
			workflows.NewTopUpInput(tu, time.Hour), tu.AmountCents},
	}
	for i, s := range starts {
		p := e.addressed(s.wid, workflows.PaymentEvent{Network: "bitcoin", Asset: "BTC",
			TxID: fmt.Sprintf("first%02d", i), AmountBase: "100000", AmountCents: s.cents})
		pgtest.Recorded(t, e.db, p.Claim())
		if _, err := e.tc.SignalWithStartWorkflow(ctx, s.wid, workflows.SignalPaymentSeen, p,
			client.StartWorkflowOptions{ID: s.wid, TaskQueue: workflows.TaskQueue}, s.wfType, s.in); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range starts {
		e.waitFor(s.wid+" KdStatus payment_detected", func() bool {
			return e.kdStatus(s.wid) == domain.StatusPaymentDetected
		})
		hist := historyOf(t, e.tc, s.wid)
		if ev := hist.Events[1]; ev.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
			t.Fatalf("%s: event 2 is %v, want the signal before the first workflow task", s.wid, ev.GetEventType())
		}
		tasks := tasksOf(hist.Events)
		if len(tasks) == 0 || tasks[0].upserts != 1 {
			t.Errorf("%s: first workflow task %+v, want 1 search attribute upsert", s.wid, tasks)
		}
		d, err := e.tc.DescribeWorkflow(ctx, s.wid, "")
		if err != nil {
			t.Fatal(err)
		}
		ref := d.RawResponse.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[workflows.SearchAttrRef]
		if got := strings.Trim(string(ref.GetData()), `"`); got != s.ref {
			t.Errorf("%s: KdRef %q, want %q", s.wid, got, s.ref)
		}
	}
}

// taskCommands is what one workflow task's completion recorded.
type taskCommands struct {
	first           int64 // its WorkflowTaskCompleted event
	upserts, timers int
}

// tasksOf groups a history's commands by the workflow task that made
// them. An upsert of the SDK's TemporalChangeVersion alone (GetVersion's)
// is not counted: only Kernodeck's attributes.
func tasksOf(events []*historypb.HistoryEvent) []taskCommands {
	var tasks []taskCommands
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			tasks = append(tasks, taskCommands{first: ev.GetEventId()})
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			fields := ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
			if _, sdk := fields["TemporalChangeVersion"]; !(sdk && len(fields) == 1) && len(tasks) > 0 {
				tasks[len(tasks)-1].upserts++
			}
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			if len(tasks) > 0 {
				tasks[len(tasks)-1].timers++
			}
		}
	}
	return tasks
}

// TestPaymentAloneHistoryCost measures what one payment arriving alone
// costs a rental's history: the watcher's "seen" (its block at the tip)
// handled, then its "confirmed" (a later block) handled, before the next
// payment is sent. Twenty partial payments while the order awaits payment
// (each moves the status to payment_detected and back: a search attribute
// upsert each way), then twenty extra payments to the active rental
// (queued for support). Each signal that arrives alone is its own batch:
// the signal, a workflow task (scheduled, started, completed), one
// local-activity marker for its check against what the watchers recorded
// (vDrain) and one for its timeline write.
func TestPaymentAloneHistoryCost(t *testing.T) {
	e := newEnv(t)
	acc := e.account("alone@example.com")
	o := e.startOrder(acc, workflows.RentalConfig{UnpaidTimeout: time.Hour, ProvisioningAttempts: 1})
	wid := workflows.RentalWorkflowID(o.Ref)
	const n = 20
	alone := func(prefix string, cents int64, handled func(i int) bool) int {
		before := len(historyOf(t, e.tc, wid).Events)
		for i := range n {
			p := btc(fmt.Sprintf("%s%02d", prefix, i), cents, false)
			e.payment(wid, workflows.SignalPaymentSeen, p)
			e.waitFor("seen written", func() bool {
				var k int
				_ = e.db.Get(&k, `SELECT count(*) FROM timeline_events WHERE ref = $1 AND kind = $2 AND data->>'txid' = $3`,
					o.Ref, domain.EventPaymentSeen, p.TxID)
				return k == 1
			})
			e.payment(wid, workflows.SignalPaymentConfirmed, p)
			e.waitFor("confirmation handled", func() bool { return handled(i) })
		}
		grew := len(historyOf(t, e.tc, wid).Events) - before
		t.Logf("%s: %d payments, each alone: history +%d events, %.1f per payment", prefix, n, grew, float64(grew)/n)
		return grew
	}
	partial := alone("partial", 100, func(i int) bool { return e.order(o.Ref).PaidCents == int64(100*(i+1)) })
	e.paid(wid, btc("rest", o.TotalCents-100*n, false))
	e.waitOrder(o.Ref, domain.StatusActive)
	extra := alone("extra", 100, func(i int) bool { return len(e.queueOf(o.Ref)) == i+1 })
	// Seen and confirmed alone: 2 × (signal + 3 workflow-task events + 2
	// markers: the check, the write); a partial payment also moves the
	// status twice (two search attribute upserts). A few more once: the
	// first payment names the asset and network.
	if extra > 12*n+2 || partial > 14*n+8 {
		t.Fatalf("history: +%d events for %d partial payments, +%d for %d extra ones", partial, n, extra, n)
	}
	e.support("orders/"+o.Ref+"/end-early", map[string]any{"reason": "fin du test"})
	e.waitOrder(o.Ref, domain.StatusEnded)
}
