package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/domain"
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
	if err := (&wfclient.Client{Temporal: e.tc}).StartRental(ctx, workflows.NewRentalInput(o, cfg)); err != nil {
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
	replayHistory(t, e.tc, wid, "rental_30d_plain.json")
}
