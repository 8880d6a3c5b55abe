package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// Support's and the customer's actions on a rental that close it or move
// money: cancellation and refunds (the audit helper too).

// recordSupport writes the audit entry of a support action.
func (r *rental) recordSupport(ctx workflow.Context, action string, id int64, agent, reason, message string, extra map[string]any) error {
	return r.record(ctx, supportEvent(action, id, agent, reason, message, extra).order())
}

func (r *rental) validateCancel(req CancelRequest) error {
	if req.ActionID > 0 && r.Actions[req.ActionID] {
		return nil
	}
	if r.stalled() && req.ActionID > 0 && !r.RetryAsked && !r.closingRefund {
		// Support's way to close an order whose machine cannot be prepared,
		// or that waits for one, and that holds no received money (paid by
		// an attribution alone): otherwise a refund of what is refundable
		// closes it.
		if r.refundable() > 0 {
			return reject(domain.ECodeConflict, "Un montant reçu reste remboursable : remboursez-le pour clore la commande.")
		}
		return nil
	}
	switch {
	case !r.awaiting():
		return reject(domain.ECodeConflict, "La commande ne peut plus être annulée : elle n'est plus en attente de paiement.")
	case r.debiting:
		return reject(domain.ECodeConflict, "Un paiement par solde est en cours : la commande ne peut pas être annulée.")
	case len(r.Payments.Pending) > 0:
		return reject(domain.ECodeConflict, "Un paiement est en cours de confirmation : la commande ne peut pas être annulée. Contactez le support.")
	case r.netPaid() > 0:
		return reject(domain.ECodeConflict, "Un paiement partiel a déjà été reçu : la commande ne peut pas être annulée. Contactez le support.")
	}
	return nil
}

func (r *rental) cancel(ctx workflow.Context, req CancelRequest) error {
	if err := r.mu.Lock(ctx); err != nil {
		return errUnavailable()
	}
	defer r.mu.Unlock()
	if err := r.validateCancel(req); err != nil || (req.ActionID > 0 && r.Actions[req.ActionID]) {
		return err
	}
	if req.ActionID > 0 {
		if err := checkAction(ctx, r.v, UpdateCancel, req.Claim(r.in.OrderRef)); err != nil {
			return err
		}
	}
	if r.phase() == PhaseProvisioningFailed {
		// Whatever the failed attempt reserved is given back first (an
		// order in line gets its machine released by the main flow, once
		// it is written closed: takeMachine).
		var a *activities.Activities
		if err := workflow.ExecuteActivity(handlerMachineCtx(ctx, r.v), a.ReleaseCapacity, r.in.OrderRef).Get(ctx, nil); err != nil {
			return errUnavailable()
		}
	}
	msg := "Commande annulée."
	var evs []activities.OrderEvent
	if req.ActionID > 0 {
		r.Actions[req.ActionID] = true
		msg = "Commande annulée par le support."
		evs = append(evs, supportEvent(domain.ActionCancel, req.ActionID, req.Agent, req.Reason, msg, nil).order())
	}
	evs = append(evs, activities.OrderEvent{
		Key: domain.KeyCancelled, Kind: domain.EventCancelled, Message: msg,
		Data: map[string]any{"by": req.By, "reason": req.Reason},
	})
	if err := r.transition(ctx, PhaseCancelled, evs...); err != nil {
		return errUnavailable()
	}
	return nil
}

// refundable is the order's counted money that came in (not attributed
// without a payment, not the excess queued for support) and was not
// refunded yet.
func (r *rental) refundable() int64 {
	if r.OverRefundable {
		return r.Status.PaidCents - r.Status.UnbackedCents - r.refundedBacked()
	}
	return r.Status.PaidCents - r.Status.UnbackedCents - r.Over - r.refundedBacked()
}

func (r *rental) validateRefund(rf Refund) error {
	if err := rf.Validate(); err != nil {
		return refusal(err)
	}
	if r.Actions[rf.ActionID] {
		return nil
	}
	if r.phase().Closed() || r.closingRefund {
		return reject(domain.ECodeConflict, "La commande est close : un montant reçu en attente se rembourse depuis la file du support.")
	}
	if domain.ByCustomer(rf.Agent) && (r.phase() != PhaseWaitingForMachine || rf.AmountCents != r.refundable()) {
		// The customer takes back all of it, from the line only.
		return reject(domain.ECodeConflict, "La commande n'attend pas de machine : son montant ne peut pas être repris sur le solde.")
	}
	return refusal(domain.CheckRefund(rf.AmountCents, r.refundable()))
}

// stalled reports whether the paid rental waits for support
// (provisioning failed) or for a machine (in line): a refund of all that
// is refundable closes it.
func (r *rental) stalled() bool {
	return r.phase() == PhaseProvisioningFailed || r.phase() == PhaseWaitingForMachine
}

// refund credits an amount of the order's counted money to the balance, in
// one transition (event, refunded amount, ledger posting, and the status
// when it closes the order). In provisioning_failed, refunding all that is
// refundable closes the order (the machine is released, the workflow ends);
// a smaller refund leaves the rest refundable.
func (r *rental) refund(ctx workflow.Context, rf Refund) error {
	if err := r.mu.Lock(ctx); err != nil {
		return errUnavailable()
	}
	defer r.mu.Unlock()
	if r.Actions[rf.ActionID] {
		return nil
	}
	if workflow.GetVersion(ctx, "refund-transition", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return r.refundV0(ctx, rf)
	}
	r.OverRefundable = workflow.GetVersion(ctx, "refund-over", workflow.DefaultVersion, 1) == workflow.DefaultVersion
	if err := r.validateRefund(rf); err != nil {
		return err
	}
	if err := checkAction(ctx, r.v, UpdateRefund, rf.Claim(r.in.OrderRef)); err != nil {
		return err
	}
	var a *activities.Activities
	r.Actions[rf.ActionID] = true
	r.closingRefund = r.stalled() && rf.AmountCents == r.refundable()
	said := fmt.Sprintf("Le support a remboursé %s sur le solde.", usd(rf.AmountCents))
	if domain.ByCustomer(rf.Agent) {
		said = fmt.Sprintf("Vous avez repris %s sur votre solde : la commande quitte la file d'attente.", usd(rf.AmountCents))
	}
	if err := r.recordSupport(ctx, domain.ActionRefund, rf.ActionID, rf.Agent, rf.Reason, said,
		map[string]any{"amount_cents": rf.AmountCents}); err != nil {
		r.Actions[rf.ActionID], r.closingRefund = false, false
		return errUnavailable()
	}
	if r.closingRefund && r.phase() == PhaseProvisioningFailed {
		// Whatever the failed attempt reserved is given back first.
		if err := workflow.ExecuteActivity(handlerMachineCtx(ctx, r.v), a.ReleaseCapacity, r.in.OrderRef).Get(ctx, nil); err != nil {
			// Nothing refunded: the same action may be sent again.
			r.Actions[rf.ActionID], r.closingRefund = false, false
			return errUnavailable()
		}
	}
	refunded := r.Status.RefundedCents + rf.AmountCents
	ev := activities.OrderEvent{
		Key: domain.KeyRefund(rf.ActionID), Kind: domain.EventRefunded,
		Message:       fmt.Sprintf("Remboursement de %s crédité sur votre solde.", usd(rf.AmountCents)),
		Data:          map[string]any{"amount_cents": rf.AmountCents, "refunded_cents": refunded, "agent": rf.Agent, "reason": rf.Reason},
		RefundedCents: &refunded,
		Posting:       &domain.Posting{Kind: domain.PostingRefund, AccountID: r.in.AccountID, Cents: rf.AmountCents, Memo: rf.Reason},
	}
	var err error
	if r.closingRefund {
		ev.Message += " La commande est close."
		// Its event carries the status, recorded first: a refund refused
		// moves nothing.
		err = r.transitionOnWrite(ctx, PhaseRefunded, func(status string) error {
			ev.Status = status
			return r.record(ctx, ev)
		})
	} else {
		err = r.record(ctx, ev)
	}
	if err != nil {
		r.Actions[rf.ActionID], r.closingRefund = false, false
		return asRefusal(err, "Le remboursement n'a pas abouti. Réessayez plus tard.")
	}
	r.Status.RefundedCents = refunded
	r.closingRefund = false
	return nil
}

// refundV0 replays refunds of rentals started before refunds became one
// transition: the ledger activity, then the event.
func (r *rental) refundV0(ctx workflow.Context, rf Refund) error {
	var a *activities.Activities
	r.Actions[rf.ActionID] = true
	r.closingRefund = r.phase() == PhaseProvisioningFailed
	if err := r.recordSupport(ctx, domain.ActionRefund, rf.ActionID, rf.Agent, rf.Reason,
		fmt.Sprintf("Le support a remboursé %s sur le solde.", usd(rf.AmountCents)),
		map[string]any{"amount_cents": rf.AmountCents}); err != nil {
		r.Actions[rf.ActionID], r.closingRefund = false, false
		return errUnavailable()
	}
	now := workflow.Now(ctx).UTC()
	if err := workflow.ExecuteActivity(timelineCtx(ctx), a.RefundToBalance, activities.RefundInput{
		Ref: r.in.OrderRef, AccountID: r.in.AccountID, AmountCents: rf.AmountCents,
		ActionID: rf.ActionID, Agent: rf.Agent, Reason: rf.Reason, At: now,
	}).Get(ctx, nil); err != nil {
		r.Actions[rf.ActionID], r.closingRefund = false, false
		return asRefusal(err, "Le remboursement n'a pas abouti. Réessayez plus tard.")
	}
	r.Status.RefundedCents += rf.AmountCents
	ev := activities.OrderEvent{
		Key: domain.KeyRefund(rf.ActionID), Kind: domain.EventRefunded,
		Message: fmt.Sprintf("Remboursement de %s crédité sur votre solde.", usd(rf.AmountCents)),
		Data:    map[string]any{"amount_cents": rf.AmountCents, "refunded_cents": r.Status.RefundedCents, "agent": rf.Agent, "reason": rf.Reason},
	}
	var err error
	if r.closingRefund {
		if err := workflow.ExecuteActivity(machineCtx(ctx, 0), a.ReleaseCapacity, r.in.OrderRef).Get(ctx, nil); err != nil {
			return errUnavailable()
		}
		r.closingRefund = false
		ev.Message += " La commande est close."
		err = r.transition(ctx, PhaseRefunded, ev)
	} else {
		err = r.record(ctx, ev)
	}
	if err != nil {
		return errUnavailable()
	}
	return nil
}
