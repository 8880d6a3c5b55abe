package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// What the payment intake (payee.go) asks of a top-up.

func (t *topUp) ledger() *paymentLedger   { return t.Payments }
func (t *topUp) targetKind() string       { return domain.TargetTopUp }
func (t *topUp) ref() string              { return t.in.TopUpRef }
func (t *topUp) actions() map[int64]bool  { return t.Actions }
func (t *topUp) due() int64               { return t.in.AmountCents - t.Status.ReceivedCents }
func (t *topUp) paid() int64              { return t.Status.ReceivedCents }
func (t *topUp) status() string           { return t.Status.Status }
func (t *topUp) acceptsAttribution() bool { return t.awaiting() }

// write: a top-up's events all carry what it received (record).
func (t *topUp) write(ctx workflow.Context, e payEvent) error {
	if e.Status == "" || e.Status == t.Status.Status {
		e.Status = ""
		return t.record(ctx, e.topUp())
	}
	return t.transition(ctx, e.Status, e.topUp())
}

// noteSeen: a top-up keeps no list of the payments seen.
func (t *topUp) noteSeen(string, bool) {}

func (t *topUp) count(key string, cents int64) {
	t.Status.ReceivedCents += cents
	t.Status.PaymentsConfirmed = appendOnce(t.Status.PaymentsConfirmed, key)
}

func (t *topUp) keepCounted(c countedPayment) { t.Counted = addCounted(t.Counted, c) }

// covered: the main flow credits the balance (settle).
func (t *topUp) covered(workflow.Context, int64) { t.Due = true }

func (t *topUp) partialData(missing int64) map[string]any {
	return map[string]any{"missing_cents": missing, "received_cents": t.Status.ReceivedCents, "amount_cents": t.in.AmountCents}
}

// minedAgain: a credited top-up's payment mined again backs its credit
// again; before the credit it counts as any payment.
func (t *topUp) minedAgain(ctx workflow.Context, p *PaymentEvent, ekey string, ev *payEvent) (bool, error) {
	if _, ok := t.Remined[ev.Reversal.PaymentKey]; ok {
		return true, t.reminedCredited(ctx, *p, ekey, *ev)
	}
	return false, nil
}

// attributed: a top-up's attributions all count toward its amount.
func (t *topUp) attributed(*payEvent, int64, bool) {}

func (t *topUp) recordSupport(ctx workflow.Context, action string, id int64, agent, reason, message string, extra map[string]any) error {
	return t.record(ctx, supportEvent(action, id, agent, reason, message, extra).topUp())
}

func (t *topUp) startBatch() { t.tl.batch = true }

// flushBatch writes the batch's events in one local activity.
func (t *topUp) flushBatch(ctx workflow.Context) error {
	var a *activities.Activities
	err := t.tl.flush(ctx, t.v, a.RecordTopUpEvents)
	t.checkFull(ctx, t.maxHist)
	return err
}

func (t *topUp) validateAttribution(at Attribution) error { return validateAttribution(t, at) }

// attributePayment counts a payment support vouches for (payee.go).
func (t *topUp) attributePayment(ctx workflow.Context, at Attribution) error {
	return attributePayment(ctx, t, at)
}
