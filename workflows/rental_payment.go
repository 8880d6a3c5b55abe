package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// A rental's payment phase: what the payment intake (payee.go) asks of an
// order, the balance payment and the payment window, until the order is
// paid (or expires).

// due is the total less what was paid, net of the refunds it still backs.
func (r *rental) due() int64 { return r.in.TotalCents - r.netPaid() }

// write records e as an order's event, with the order amounts it changes
// and the phase it moves to.
func (r *rental) write(ctx workflow.Context, e payEvent) error {
	if e.Status == "" || Phase(e.Status) == r.phase() {
		e.Status = ""
		return r.record(ctx, e.order())
	}
	return r.transition(ctx, Phase(e.Status), e.order())
}

// counts: the order's status keeps them all.
func (r *rental) counts() counts {
	return counts{paid: &r.Status.PaidCents, confirmed: &r.Status.PaymentsConfirmed, seen: &r.Status.PaymentsSeen,
		unbacked: &r.Status.UnbackedCents, attributed: &r.Attributed}
}

// covered: the order is paid. From vOneTransition the covering event
// carries the move (transition); the "paid" event, with the payment
// method and date, is written by the main flow (recordPaid).
func (r *rental) covered(ctx workflow.Context, excess int64) string {
	r.Status.PaymentMethod = methodCrypto
	if r.Attributed {
		r.Status.PaymentMethod = methodSupport
	}
	r.Over += excess
	if r.v < vOneTransition {
		r.movedBeforeVOneTransition(ctx)
		return ""
	}
	return string(PhasePaid)
}

// minedAgain: a payment mined again first backs the refunds its reversal
// left unbacked, then counts toward what the reversal left missing once
// provisioning started, or as any payment before.
func (r *rental) minedAgain(ctx workflow.Context, p *PaymentEvent, ekey string, ev *payEvent) (bool, error) {
	if *p = r.backAgain(*p, ekey, ev); p.AmountCents <= 0 {
		return true, r.write(ctx, *ev)
	}
	if r.owedAfterReversal() {
		return true, r.recount(ctx, *p, ekey, *ev)
	}
	return false, nil
}

func (r *rental) validateAttribution(at Attribution) error {
	return validateAttribution(&r.intakeRun, at)
}

func (r *rental) attributePayment(ctx workflow.Context, at Attribution) error {
	return attributePayment(ctx, &r.intakeRun, at)
}

// awaitPayment waits until the order is paid, cancelled or expired.
func (r *rental) awaitPayment(ctx workflow.Context) error {
	settled := func() bool { return !r.phase().Awaiting() }
	if r.v >= vReorgDust {
		// Until the end of the payment window, which a reverted payment
		// moves.
		for {
			until := r.PayUntil
			ok, err := r.sa.await(ctx, until.Sub(workflow.Now(ctx)), func() bool {
				return settled() || !r.PayUntil.Equal(until) || r.over(ctx)
			})
			if err != nil || settled() {
				return err
			}
			if r.full {
				return r.continueAsNew(ctx, waitPayment)
			}
			if !ok {
				break
			}
		}
	} else {
		ok, err := r.sa.await(ctx, r.cfg.UnpaidTimeout, settled)
		if err != nil || ok {
			return err
		}
	}
	if len(r.Payments.Pending) > 0 {
		// As payment gateways do, a payment seen on chain before the deadline
		// gets time to confirm (bounded by one more window).
		if _, err := r.sa.await(ctx, r.cfg.UnpaidTimeout, func() bool {
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
	msg := "Commande expirée : le paiement n'a pas été reçu dans le délai."
	queued := partialExceptions(r.Counted, r.refundedBacked())
	if len(queued) > 0 {
		var cents int64
		for _, q := range queued {
			cents += q.AmountCents
		}
		msg += fmt.Sprintf(" Le montant déjà reçu (%s) est transmis au support, qui vous le remboursera sur votre solde.", usd(cents))
	}
	return r.transition(ctx, PhaseExpired, activities.OrderEvent{
		Key: domain.KeyExpired, Kind: domain.EventExpired, Message: msg,
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
		if r.phase() != PhasePaid {
			return false, nil
		}
		r.ProvisioningBegun = true
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
		Status:        string(PhasePaid),
		PaidCents:     ptrTo(r.Status.PaidCents),
		PaymentMethod: r.Status.PaymentMethod,
		PaidAt:        &now,
	})
}

func errNotAwaitingPayment() error {
	return reject(domain.ECodeConflict, "La commande n'attend plus de paiement.")
}

func (r *rental) validatePayFromBalance(PayFromBalance) error {
	if r.debiting {
		return reject(domain.ECodeConflict, "Un paiement par solde est déjà en cours pour cette commande.")
	}
	if !r.awaiting() {
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
	// The activity marks the order paid and writes its "paid" event in the
	// same transaction as the debit: a refused debit moves nothing.
	r.debiting = true
	err := r.transitionOnWrite(ctx, PhasePaid, func(string) error {
		return workflow.ExecuteActivity(timelineCtx(ctx), a.PayOrderFromBalance, activities.PayFromBalanceInput{
			OrderRef: r.in.OrderRef, AccountID: r.in.AccountID, AmountCents: due, At: workflow.Now(ctx).UTC(),
			PaidCents: r.Status.PaidCents + due,
		}).Get(ctx, nil)
	})
	r.debiting = false
	if err != nil {
		return asRefusal(err, "Le paiement par solde n'a pas abouti. Réessayez plus tard.")
	}
	r.Status.PaidCents += due
	r.Status.PaymentMethod = methodBalance
	return nil
}
