package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
)

// What the payment intake (payee.go) asks of a top-up.

func (t *topUp) due() int64 { return t.in.AmountCents - t.Status.ReceivedCents }

// write: a top-up's events all carry what it received (record).
func (t *topUp) write(ctx workflow.Context, e payEvent) error {
	if e.Status == "" || TopUpPhase(e.Status) == t.phase() {
		e.Status = ""
		return t.record(ctx, e.topUp())
	}
	return t.transition(ctx, TopUpPhase(e.Status), e.topUp())
}

// counts: a top-up keeps no list of the payments seen, and its
// attributions all count toward its amount.
func (t *topUp) counts() counts {
	return counts{paid: &t.Status.ReceivedCents, confirmed: &t.Status.PaymentsConfirmed}
}

// covered: the main flow credits the balance (settle), which moves it.
func (t *topUp) covered(workflow.Context, int64) string {
	t.Due = true
	return ""
}

// minedAgain: a credited top-up's payment mined again backs its credit
// again; before the credit it counts as any payment.
func (t *topUp) minedAgain(ctx workflow.Context, p *PaymentEvent, ekey string, ev *payEvent) (bool, error) {
	if _, ok := t.Remined[ev.Reversal.PaymentKey]; ok {
		return true, t.reminedCredited(ctx, *p, ekey, *ev)
	}
	return false, nil
}

// flushBatch writes the batch's events in one local activity.
func (t *topUp) flushBatch(ctx workflow.Context) error {
	var a *activities.Activities
	err := t.sa.hold(func() error { return t.tl.flush(ctx, t.v, a.RecordTopUpEvents) })
	t.checkFull(ctx)
	return err
}

func (t *topUp) validateAttribution(at Attribution) error {
	return validateAttribution(&t.intakeRun, at)
}

// attributePayment counts a payment support vouches for (payee.go).
func (t *topUp) attributePayment(ctx workflow.Context, at Attribution) error {
	return attributePayment(ctx, &t.intakeRun, at)
}
