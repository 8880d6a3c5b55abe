package workflows

import (
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// TopUpWorkflow waits for a top-up's payment and credits the balance once.
// After crediting it keeps listening for one more payment window, so a
// payment still arriving on the intent is recorded for support, not lost.
func TopUpWorkflow(ctx workflow.Context, in TopUpInput) (TopUpStatus, error) {
	t := newTopUp(ctx, in)
	t.maxHistory = in.MaxHistory
	if t.maxHistory <= 0 {
		t.maxHistory = DefaultMaxHistory
	}
	if in.Carry != nil {
		t.restore(in.Carry)
	}
	if err := t.setup(ctx); err != nil {
		return t.Status, err
	}
	return t.run(ctx)
}

// TopUpState is a top-up's whole state, in one serializable value, passed
// as it is to the next run (continue-as-new); JSON names as the carry of
// earlier releases.
type TopUpState struct {
	runCarry
	Status TopUpStatus
	payeeState
	Due      bool      // received covers the amount: credit it (its status changes once credited)
	Intents  int       // payment requests asked for, part of their keys
	PayUntil time.Time // no payment request outlives it
	// ListenUntil ends a credited top-up's listening window.
	ListenUntil time.Time
	// Remined: a credited top-up's payments reverted after confirmation,
	// by generation key, with the credit they no longer back.
	Remined map[string]int64
}

// topUp is one TopUpWorkflow run; mu plays the same role as in rental.
type topUp struct {
	TopUpState
	intakeRun
	in      TopUpInput
	timeout time.Duration
	tl      timeline[activities.TopUpEvent] // a batch's events, for one write
}

func newTopUp(ctx workflow.Context, in TopUpInput) *topUp {
	timeout := in.PaymentTimeout
	if timeout <= 0 {
		timeout = DefaultTopUpTimeout
	}
	t := &topUp{
		TopUpState: TopUpState{
			Status:     TopUpStatus{TopUpRef: in.TopUpRef, Status: TopUpPhaseAwaitingPayment},
			PayUntil:   workflow.GetInfo(ctx).WorkflowStartTime.Add(timeout),
			payeeState: payeeState{Payments: newPaymentLedger(), Actions: map[int64]bool{}},
			Remined:    map[string]int64{},
		},
		in:      in,
		timeout: timeout,
	}
	t.intakeRun = newIntakeRun(ctx, in.MaxVersion, domain.TargetTopUp, in.TopUpRef, in.AmountCents, &t.payeeState, t)
	return t
}

func (t *topUp) setup(ctx workflow.Context) error {
	if err := t.sa.begin(ctx, string(t.phase()),
		saKeyRef.ValueSet(t.in.TopUpRef),
		saKeyCustomer.ValueSet(strconv.FormatInt(t.in.AccountID, 10)),
		saKeyKind.ValueSet("topup"),
	); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (TopUpStatus, error) {
		return t.Status, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateAttributePayment, updateCounted(&t.intakeRun, UpdateAttributePayment, t.attributePayment),
		workflow.UpdateHandlerOptions{Validator: notBusy(&t.works, t.validateAttribution)}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateCancel, updateCounted(&t.intakeRun, UpdateCancel, t.cancel),
		workflow.UpdateHandlerOptions{Validator: notBusy(&t.works, t.validateCancel)}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateCreatePaymentIntent, updateCountedR(&t.intakeRun, UpdateCreatePaymentIntent, t.createPaymentIntent),
		workflow.UpdateHandlerOptions{Validator: notBusyCtx(&t.works, t.validateCreateIntent)}); err != nil {
		return err
	}
	workflow.Go(ctx, func(ctx workflow.Context) { listenPayments(ctx, &t.intakeRun) })
	t.sa.sync(ctx)
	return nil
}

func (t *topUp) run(ctx workflow.Context) (TopUpStatus, error) {
	settled := func() bool { return t.Due || t.closed() }
	if t.in.Carry != nil && t.in.Carry.WaitPoint == waitCredited {
		return t.listen(ctx)
	}
	for {
		var ok bool
		var err error
		if t.v >= vReorgDust {
			// Until the end of the payment window, which a reverted
			// payment moves.
			until := t.PayUntil
			ok, err = t.sa.await(ctx, until.Sub(workflow.Now(ctx)), func() bool {
				return settled() || !t.PayUntil.Equal(until) || t.over(ctx)
			})
			if err == nil && !settled() && t.full {
				return t.Status, t.continueAsNew(ctx, waitPayment)
			}
			if err == nil && !ok && !t.PayUntil.Equal(until) {
				continue
			}
		} else {
			ok, err = t.sa.await(ctx, t.timeout, settled)
		}
		if err != nil {
			return t.Status, err
		}
		if !ok && len(t.Payments.Pending) > 0 {
			// A payment seen before the deadline gets time to confirm.
			if _, err := t.sa.await(ctx, t.timeout, func() bool {
				return settled() || len(t.Payments.Pending) == 0
			}); err != nil {
				return t.Status, err
			}
		}
		again, err := t.settle(ctx)
		if err != nil {
			return t.Status, err
		}
		if !again {
			break
		}
	}
	if err := t.applyExtension(ctx); err != nil {
		return t.Status, err
	}
	if t.v >= vContinueAsNew {
		t.ListenUntil = workflow.Now(ctx).Add(t.timeout)
		return t.listen(ctx)
	}
	if t.phase() == TopUpPhaseCredited {
		// Late or duplicate payments to this intent are still recorded.
		if err := workflow.Sleep(ctx, t.timeout); err != nil {
			return t.Status, err
		}
	}
	return t.finish(ctx)
}

// listen keeps a credited top-up listening until listenUntil, so late or
// duplicate payments to its request are still recorded; the run continues
// as new if its history passes its bound meanwhile.
func (t *topUp) listen(ctx workflow.Context) (TopUpStatus, error) {
	if t.phase() == TopUpPhaseCredited {
		if _, err := t.sa.await(ctx, t.ListenUntil.Sub(workflow.Now(ctx)), func() bool { return t.over(ctx) }); err != nil {
			return t.Status, err
		}
		if t.full && workflow.Now(ctx).Before(t.ListenUntil) {
			return t.Status, t.continueAsNew(ctx, waitCredited)
		}
	}
	return t.finish(ctx)
}

// finish lets running handlers complete (see the rental's).
func (t *topUp) finish(ctx workflow.Context) (TopUpStatus, error) {
	return t.Status, t.quiet(ctx, false)
}

// settle credits a covered top-up or expires an uncovered one; again is
// true when a reverted payment reopened its payment window meanwhile.
func (t *topUp) settle(ctx workflow.Context) (again bool, err error) {
	if err := t.mu.Lock(ctx); err != nil {
		return false, err
	}
	defer t.mu.Unlock()
	if t.closed() {
		return false, nil
	}
	if !t.Due && t.v >= vReorgDust && t.PayUntil.After(workflow.Now(ctx)) {
		return true, nil
	}
	if !t.Due {
		msg := "Recharge expirée : le paiement n'a pas été reçu dans le délai."
		queued := partialExceptions(t.Counted, 0)
		if len(queued) > 0 {
			var cents int64
			for _, q := range queued {
				cents += q.AmountCents
			}
			msg += fmt.Sprintf(" Le montant déjà reçu (%s) est transmis au support, qui vous le remboursera sur votre solde.", usd(cents))
		}
		return false, t.transition(ctx, TopUpPhaseExpired, activities.TopUpEvent{
			Key: domain.KeyExpired, Kind: domain.EventExpired, Message: msg,
			Data:       map[string]any{"received_cents": t.Status.ReceivedCents},
			Exceptions: queued,
		})
	}
	var a *activities.Activities
	now := workflow.Now(ctx).UTC()
	// The activity credits the balance, marks the top-up credited and writes
	// its event in one transaction, idempotently by top-up reference.
	return false, t.transitionOnWrite(ctx, TopUpPhaseCredited, func(string) error {
		if err := workflow.ExecuteActivity(timelineCtx(ctx), a.CreditTopUp, activities.CreditTopUpInput{
			TopUpRef: t.in.TopUpRef, AccountID: t.in.AccountID, AmountCents: t.in.AmountCents, At: now,
		}).Get(ctx, nil); err != nil {
			return err
		}
		t.Status.CreditedAt = now
		return nil
	})
}

// awaiting reports whether the top-up still accepts payments toward its amount.
func (t *topUp) awaiting() bool { return !t.Due && t.phase().Awaiting() }

// closed reports whether the top-up was cancelled or expired.
func (t *topUp) closed() bool { return t.phase().Closed() }

// record writes one timeline event; the caller holds mu.
func (t *topUp) record(ctx workflow.Context, ev activities.TopUpEvent) error {
	var a *activities.Activities
	ev.TopUpRef = t.in.TopUpRef
	ev.At = workflow.Now(ctx).UTC()
	received := t.Status.ReceivedCents
	ev.ReceivedCents = &received
	t.sa.settle(ctx)
	return t.sa.hold(func() error {
		return t.tl.write(ctx, t.v, t.batch, a.RecordTopUpEvent, a.RecordTopUpEvents, ev)
	})
}

func (t *topUp) validateCancel(req CancelRequest) error {
	if req.ActionID > 0 && t.Actions[req.ActionID] {
		return nil
	}
	// Only an untouched top-up: once money is on its way, support decides.
	if !t.awaiting() || t.phase() != TopUpPhaseAwaitingPayment || t.Status.ReceivedCents > 0 {
		return reject(domain.ECodeConflict, "La recharge ne peut plus être annulée : un paiement a déjà été détecté ou elle est close.")
	}
	return nil
}

func (t *topUp) cancel(ctx workflow.Context, req CancelRequest) error {
	if err := t.mu.Lock(ctx); err != nil {
		return errUnavailable()
	}
	defer t.mu.Unlock()
	if err := t.validateCancel(req); err != nil || (req.ActionID > 0 && t.Actions[req.ActionID]) {
		return err
	}
	if req.ActionID > 0 {
		if err := checkAction(ctx, t.v, UpdateCancel, req.Claim(t.in.TopUpRef)); err != nil {
			return err
		}
	}
	msg := "Recharge annulée."
	var evs []activities.TopUpEvent
	if req.ActionID > 0 {
		t.Actions[req.ActionID] = true
		msg = "Recharge annulée par le support."
		evs = append(evs, supportEvent(domain.ActionCancel, req.ActionID, req.Agent, req.Reason, msg, nil).topUp())
	}
	evs = append(evs, activities.TopUpEvent{
		Key: domain.KeyCancelled, Kind: domain.EventCancelled, Message: msg,
		Data: map[string]any{"by": req.By, "reason": req.Reason},
	})
	if err := t.transition(ctx, TopUpPhaseCancelled, evs...); err != nil {
		return errUnavailable()
	}
	return nil
}

// applyExtension asks, once the top-up of a rental extension is
// credited, the rental's workflow to apply it (vExtension): the
// extension's money is now on the balance, where it stays if the
// extension can no longer be applied (activities.ApplyPaidExtension).
func (t *topUp) applyExtension(ctx workflow.Context) error {
	if t.v < vExtension || t.in.ExtensionRef == "" || t.phase() != TopUpPhaseCredited {
		return nil
	}
	var a *activities.Activities
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         timelineRetry(),
	})
	return t.sa.get(ctx, workflow.ExecuteActivity(actx, a.ApplyPaidExtension, activities.ExtensionApply{
		ExtensionRef: t.in.ExtensionRef, OrderRef: t.in.OrderRef, AccountID: t.in.AccountID,
	}), nil)
}
