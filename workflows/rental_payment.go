package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// A rental's payment phase: the watchers' signals, the balance payment
// and support's attribution, until the order is paid (or expires).

// refreshPaymentStatus moves between awaiting_payment and payment_detected
// after a payment came or went; it returns the new status, "" if unchanged.
func (r *rental) refreshPaymentStatus(ctx workflow.Context) string {
	if !r.unpaid() {
		return ""
	}
	want := domain.StatusAwaitingPayment
	if len(r.Payments.Pending) > 0 {
		want = domain.StatusPaymentDetected
	}
	if want == r.Status.Status {
		return ""
	}
	r.transition(ctx, Phase(want))
	return want
}

func (r *rental) ledger() *paymentLedger { return r.Payments }

func (r *rental) targetKind() string { return domain.TargetOrder }

func (r *rental) ref() string { return r.in.OrderRef }

func (r *rental) listenPayments(ctx workflow.Context) {
	listenPayments(ctx, r.v, r.mu, &r.signalsBusy, r)
}

func (r *rental) onSeen(ctx workflow.Context, p PaymentEvent) error {
	if stale, err := r.Payments.ordered(ctx, r.v, p, r.revertConfirmed); stale || err != nil {
		return err
	}
	key := p.Key()
	eventKey, ok := r.Payments.seen(key, p.Late)
	if !ok {
		return nil
	}
	r.sa.notePayment(ctx, p)
	ev := activities.OrderEvent{Key: eventKey, Kind: domain.EventPaymentSeen, Data: paymentData(p)}
	switch {
	case p.Late:
		ev.Message = "Paiement détecté après l'échéance de la demande de paiement : il sera examiné par le support."
	case r.unpaid():
		r.Status.PaymentsSeen = append(r.Status.PaymentsSeen, key)
		ev.Message = fmt.Sprintf("Paiement détecté sur le réseau %s : en attente de confirmation.", p.Network)
		ev.Status = r.refreshPaymentStatus(ctx)
	default:
		ev.Message = "Paiement supplémentaire détecté alors que la commande n'attend plus de paiement : il sera examiné par le support."
	}
	return r.record(ctx, ev)
}

func (r *rental) onReverted(ctx workflow.Context, p PaymentEvent) error {
	key := p.Key()
	if p.AfterConfirmation && r.v >= vReversalOrder && p.Reversals > 0 {
		counted := r.Payments.Counted[key]
		stale, err := r.Payments.ordered(ctx, r.v, p, r.revertConfirmed)
		if stale || err != nil || counted {
			return err
		}
		// Never counted here (its confirmation was not delivered): the
		// pending payment is dropped below.
	} else if r.Payments.Counted[key] && r.v >= vReorgDust {
		return r.revertConfirmed(ctx, p)
	}
	if r.Payments.Counted[key] {
		// Confirmation policies make this unexpected; money may be missing,
		// so a human looks at it. Keyed on the payment: recorded once.
		workflow.GetLogger(ctx).Warn("confirmed payment reverted", "key", key)
		data := paymentData(p)
		data["after_confirmation"] = true
		return r.record(ctx, activities.OrderEvent{
			Key: domain.KeyRevertedConfirmed(key), Kind: domain.EventPaymentReverted, Data: data,
			Message: "Un paiement déjà confirmé a été annulé par le réseau : le support est prévenu.",
		})
	}
	eventKey, ok := r.Payments.reverted(key)
	if !ok {
		return nil
	}
	r.Status.PaymentsSeen = without(r.Status.PaymentsSeen, key)
	return r.record(ctx, activities.OrderEvent{
		Key: eventKey, Kind: domain.EventPaymentReverted, Data: paymentData(p),
		Message: "Paiement annulé par le réseau avant sa confirmation : il n'est pas compté.",
		Status:  r.refreshPaymentStatus(ctx),
	})
}

func (r *rental) onConfirmed(ctx workflow.Context, p PaymentEvent) error {
	if stale, err := r.Payments.ordered(ctx, r.v, p, r.revertConfirmed); stale || err != nil {
		return err
	}
	key := p.Key()
	if !r.Payments.confirm(key) {
		return nil // already counted: a watcher re-sent it
	}
	r.Status.PaymentsSeen = without(r.Status.PaymentsSeen, key)
	r.sa.notePayment(ctx, p)
	data := paymentData(p)
	ekey := r.Payments.qkey(key)
	ev := activities.OrderEvent{Key: domain.KeyConfirmed(ekey), Kind: domain.EventPaymentConfirmed, Data: data}
	if gen := r.Payments.Gen[key]; gen > 0 {
		// Mined again after its reversal: this generation counts once.
		data["generation"] = gen
		ev.Reversal = &domain.Reversal{PaymentKey: genKey(key, gen-1), Remined: true}
		if p = r.backAgain(p, ekey, &ev); p.AmountCents <= 0 {
			return r.record(ctx, ev)
		}
		if r.owedAfterReversal() {
			return r.recount(ctx, p, ekey, ev)
		}
	}
	switch {
	case !r.unpaid():
		// Settled, cancelled or expired: the money is real and not counted;
		// it waits in support's queue to be refunded.
		data["to_support"] = true
		ev.Exceptions = []domain.NewException{newException(domain.ExceptionExtra, ekey, p, p.AmountCents)}
		ev.Message = fmt.Sprintf("Paiement supplémentaire confirmé (%s) alors que la commande n'attend plus de paiement : il est transmis au support, qui vous le remboursera sur votre solde.", usd(p.AmountCents))
		return r.record(ctx, ev)
	case p.Late:
		// Never provisioned automatically: support counts it toward the
		// order or refunds it to the balance.
		data["to_support"] = true
		ev.Exceptions = []domain.NewException{newException(domain.ExceptionLate, ekey, p, p.AmountCents)}
		ev.Message = fmt.Sprintf("Paiement confirmé après l'échéance de la demande de paiement (%s) : il est transmis au support, qui l'attribuera à votre commande ou le remboursera sur votre solde.", usd(p.AmountCents))
		ev.Status = r.refreshPaymentStatus(ctx)
		return r.record(ctx, ev)
	}
	r.Status.PaidCents += p.AmountCents
	r.Status.PaymentsConfirmed = appendOnce(r.Status.PaymentsConfirmed, key)
	return r.afterPaymentCounted(ctx, ekey, &p, ev, fmt.Sprintf("Paiement confirmé (%s).", usd(p.AmountCents)))
}

// afterPaymentCounted records a counted amount (ev) and either settles the
// order or records what is still missing. p is the received payment counted
// (nil for an attribution): what it brings above the total goes to support's
// queue. key is the payment's current key (qkey). The caller holds mu.
func (r *rental) afterPaymentCounted(ctx workflow.Context, key string, p *PaymentEvent, ev activities.OrderEvent, message string) error {
	qkey := key
	ev.PaidCents = ptrTo(r.Status.PaidCents)
	ev.Message = message
	missing := r.in.TotalCents - r.netPaid()
	if p != nil {
		r.Counted = addCounted(r.Counted, countedPayment{P: *p, Cents: p.AmountCents + min(missing, 0), QKey: qkeyIfGen(qkey, *p)})
	}
	if missing <= 0 {
		r.Paid = true
		r.Status.PaymentMethod = methodCrypto
		if r.SupportPaid {
			r.Status.PaymentMethod = methodSupport
		}
		if missing < 0 {
			ev.Data["overpaid_cents"] = -missing
			ev.Message += fmt.Sprintf(" Le montant reçu dépasse le total de %s : l'excédent est transmis au support, qui vous le remboursera sur votre solde.", usd(-missing))
			if p != nil {
				ev.Exceptions = append(ev.Exceptions, newException(domain.ExceptionOver, qkey, *p, -missing))
				r.Over += -missing
			}
		}
		// The "paid" event itself is written by the main flow (recordPaid).
		r.transition(ctx, PhasePaid)
		return r.record(ctx, ev)
	}
	ev.Status = r.refreshPaymentStatus(ctx)
	if err := r.record(ctx, ev); err != nil {
		return err
	}
	return r.record(ctx, activities.OrderEvent{
		Key:  domain.KeyPartial(key),
		Kind: domain.EventPaymentPartial,
		Message: fmt.Sprintf("Paiement partiel : il manque %s pour régler la commande. Complétez le paiement avant l'échéance de la demande de paiement.",
			usd(missing)),
		Data: map[string]any{"missing_cents": missing, "paid_cents": r.Status.PaidCents, "total_cents": r.in.TotalCents},
	})
}

// awaitPayment waits until the order is paid, cancelled or expired.
func (r *rental) awaitPayment(ctx workflow.Context) error {
	settled := func() bool { return r.Paid || r.Done }
	if r.v >= vReorgDust {
		// Until the end of the payment window, which a reverted payment
		// moves.
		for {
			until := r.PayUntil
			ok, err := awaitOrTimeout(ctx, until.Sub(workflow.Now(ctx)), func() bool {
				return settled() || !r.PayUntil.Equal(until) || r.full
			})
			if err != nil || settled() {
				return err
			}
			if r.full {
				return r.continueAsNew(ctx, phasePayment)
			}
			if !ok {
				break
			}
		}
	} else {
		ok, err := awaitOrTimeout(ctx, r.cfg.UnpaidTimeout, settled)
		if err != nil || ok {
			return err
		}
	}
	if len(r.Payments.Pending) > 0 {
		// As payment gateways do, a payment seen on chain before the deadline
		// gets time to confirm (bounded by one more window).
		if _, err := awaitOrTimeout(ctx, r.cfg.UnpaidTimeout, func() bool {
			return settled() || len(r.Payments.Pending) == 0
		}); err != nil {
			return err
		}
	}
	if err := r.mu.Lock(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	if settled() {
		return nil
	}
	r.Done = true
	r.transition(ctx, PhaseExpired)
	msg := "Commande expirée : le paiement n'a pas été reçu dans le délai."
	queued := partialExceptions(r.Counted, r.refundedBacked())
	if len(queued) > 0 {
		var cents int64
		for _, q := range queued {
			cents += q.AmountCents
		}
		msg += fmt.Sprintf(" Le montant déjà reçu (%s) est transmis au support, qui vous le remboursera sur votre solde.", usd(cents))
	}
	return r.record(ctx, activities.OrderEvent{
		Key: domain.KeyExpired, Kind: domain.EventExpired, Status: domain.StatusExpired, Message: msg,
		Data:       map[string]any{"paid_cents": r.Status.PaidCents, "refunded_cents": r.Status.RefundedCents},
		Exceptions: queued,
	})
}

// recordPaid writes the "paid" event, except for a balance payment whose
// debit transaction already wrote it. From then on provisioning has
// started; paid is false if a reversal made the order unpaid first.
func (r *rental) recordPaid(ctx workflow.Context) (paid bool, err error) {
	if err := r.mu.Lock(ctx); err != nil {
		return false, err
	}
	defer r.mu.Unlock()
	if r.v >= vReorgDust {
		if !r.Paid {
			return false, nil
		}
		r.ProvStarted = true
	}
	if r.Status.PaymentMethod == methodBalance {
		return true, nil
	}
	now := workflow.Now(ctx).UTC()
	// Written with the first provisioning step's event, which follows.
	return true, r.writeLater(ctx, activities.OrderEvent{
		Key:           domain.KeyPaid,
		Kind:          domain.EventPaid,
		Message:       fmt.Sprintf("Commande réglée (%s). La préparation de la machine commence.", usd(r.Status.PaidCents)),
		Data:          map[string]any{"paid_cents": r.Status.PaidCents, "total_cents": r.in.TotalCents, "method": r.Status.PaymentMethod},
		Status:        domain.StatusPaid,
		PaidCents:     ptrTo(r.Status.PaidCents),
		PaymentMethod: r.Status.PaymentMethod,
		PaidAt:        &now,
	})
}

func errNotAwaitingPayment() error {
	return reject(domain.ECodeConflict, "La commande n'attend plus de paiement.")
}

func (r *rental) validatePayFromBalance(PayFromBalance) error {
	if r.balanceBusy {
		return reject(domain.ECodeConflict, "Un paiement par solde est déjà en cours pour cette commande.")
	}
	if !r.unpaid() {
		return errNotAwaitingPayment()
	}
	return nil
}

// payFromBalance's argument carries only its address (checked by
// InboundInterceptor); histories from before it had none.
func (r *rental) payFromBalance(ctx workflow.Context, req PayFromBalance) error {
	if err := r.mu.Lock(ctx); err != nil {
		return errUnavailable()
	}
	defer r.mu.Unlock()
	if err := r.validatePayFromBalance(req); err != nil {
		return err
	}
	var a *activities.Activities
	due := r.in.TotalCents - r.netPaid()
	// Retried like any ledger write: if the database is down the caller times
	// out, but the debit, once accepted, is carried through exactly once.
	r.balanceBusy = true
	err := workflow.ExecuteActivity(timelineCtx(ctx), a.PayOrderFromBalance, activities.PayFromBalanceInput{
		OrderRef: r.in.OrderRef, AccountID: r.in.AccountID, AmountCents: due, At: workflow.Now(ctx).UTC(),
		PaidCents: r.Status.PaidCents + due,
	}).Get(ctx, nil)
	r.balanceBusy = false
	if err != nil {
		return asRefusal(err, "Le paiement par solde n'a pas abouti. Réessayez plus tard.")
	}
	// The activity marked the order paid and wrote its "paid" event in the
	// same transaction as the debit: only the workflow state changes here.
	r.Status.PaidCents += due
	r.Status.PaymentMethod = methodBalance
	r.Paid = true
	r.transition(ctx, PhasePaid)
	return nil
}

func (r *rental) validateAttribution(at Attribution) error {
	if err := at.Validate(); err != nil {
		return refusal(err)
	}
	if r.Actions[at.ActionID] {
		return nil
	}
	if r.balanceBusy || !r.unpaid() {
		return errNotAwaitingPayment()
	}
	due := r.in.TotalCents - r.netPaid()
	return refusal(domain.CheckAttribution(at.AmountCents, due))
}

// attributePayment counts a payment support vouches for. Naming a queued
// amount (ExceptionID) counts that received money, at most what is due, the
// rest staying queued; otherwise the amount (at most what is due) is
// counted without being refundable.
func (r *rental) attributePayment(ctx workflow.Context, at Attribution) error {
	if err := r.mu.Lock(ctx); err != nil {
		return errUnavailable()
	}
	defer r.mu.Unlock()
	if err := r.validateAttribution(at); err != nil || r.Actions[at.ActionID] {
		return err
	}
	if err := checkAction(ctx, r.v, UpdateAttributePayment, at.Claim(r.in.OrderRef)); err != nil {
		return err
	}
	due := r.in.TotalCents - r.netPaid()
	amount := at.AmountCents
	if amount == 0 {
		amount = due
	}
	key := domain.KeyAttribution(at.ActionID)
	ev := activities.OrderEvent{
		Key: domain.KeyConfirmed(key), Kind: domain.EventPaymentConfirmed,
		Data: map[string]any{"key": key, "amount_cents": amount, "attributed_by": at.Agent},
	}
	var counted *countedPayment
	if at.ExceptionID > 0 {
		c, use, err := countException(ctx, r.v, at, r.in.OrderRef, due, ev.Data)
		if err != nil {
			return err
		}
		ev.Use = use
		amount, counted = c.Cents, &c
	} else {
		r.Status.UnbackedCents += amount
		ev.UnbackedCents = ptrTo(r.Status.UnbackedCents)
	}
	r.Actions[at.ActionID] = true
	r.Payments.confirm(key)
	r.SupportPaid = true
	r.Status.PaidCents += amount
	r.Status.PaymentsConfirmed = append(r.Status.PaymentsConfirmed, key)
	if err := r.recordSupport(ctx, domain.ActionAttributePayment, at.ActionID, at.Agent, at.Reason,
		fmt.Sprintf("Le support a attribué un paiement de %s à la commande.", usd(amount)),
		map[string]any{"amount_cents": amount}); err != nil {
		return errUnavailable()
	}
	if counted != nil {
		// Counted like a received payment (refundable, back to the queue
		// if the order expires), never above what is due: no excess.
		r.Counted = addCounted(r.Counted, *counted)
	}
	if err := r.afterPaymentCounted(ctx, key, nil, ev, fmt.Sprintf("Paiement attribué par le support (%s).", usd(amount))); err != nil {
		return asRefusal(err, "L'attribution n'a pas abouti. Réessayez plus tard.")
	}
	return nil
}
