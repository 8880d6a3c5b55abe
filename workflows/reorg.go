package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// Payments removed by a deep reorganisation after their confirmation, and
// dust summaries (vReorgDust). The money rule they keep: received on chain =
// counted + refunded + still queued - shortfall of the reverted payments'
// flags (see domain.ExceptionReverted).

// revertConfirmed uncounts a confirmed payment the chain no longer holds.
// Before provisioning starts, the order awaits payment again (with a fresh
// payment window); once it started, the order keeps running and the
// payment is flagged for support in the exception queue. Its queued
// remainders (over, late, extra) are voided in the same transition. The
// caller holds mu.
func (r *rental) revertConfirmed(ctx workflow.Context, p PaymentEvent) error {
	ekey := r.Payments.uncount(p.Key())
	r.Status.PaymentsConfirmed = without(r.Status.PaymentsConfirmed, p.Key())
	kept, uncounted, counted := takeCounted(r.Counted, ekey)
	r.Counted = kept
	owedBefore := min(r.refundable(), 0)
	r.Status.PaidCents -= uncounted
	r.Over -= uncounted - counted // its excess leaves the queue with it
	// Refunded beyond what is still counted: paid out on the strength of it.
	shortfall := owedBefore - min(r.refundable(), 0)
	workflow.GetLogger(ctx).Warn("confirmed payment reverted", "key", ekey, "uncounted_cents", uncounted)

	data := paymentData(p)
	data["after_confirmation"], data["uncounted_cents"] = true, uncounted
	ev := activities.OrderEvent{
		Key: domain.KeyRevertedConfirmed(ekey), Kind: domain.EventPaymentReverted, Data: data,
		PaidCents: ptrTo(r.Status.PaidCents), Reversal: &domain.Reversal{PaymentKey: ekey},
	}
	if shortfall > 0 && r.v >= vRefundShortfall {
		// Refunds paid out on it are support's to recover, not owed
		// again by the order: what is due stays the total less what
		// remains counted.
		r.Shortfalls[ekey] += shortfall
		r.Status.ShortfallCents += shortfall
		ev.ShortfallCents = ptrTo(r.Status.ShortfallCents)
		data["shortfall_cents"] = shortfall
	}
	var to Phase // the phase it moves to, if any
	flag := func() {
		ev.Exceptions = []domain.NewException{{Reason: domain.ExceptionReverted, PaymentKey: ekey, Network: p.Network,
			TxID: p.TxID, Asset: p.Asset, AmountBase: p.AmountBase, AmountCents: p.AmountCents, ShortfallCents: shortfall}}
	}
	switch {
	case uncounted == 0:
		// It was queued (late, extra), not counted: it leaves the queue.
		ev.Message = fmt.Sprintf("Un paiement confirmé (%s) transmis au support a été annulé par une réorganisation du réseau %s : il est retiré de la file du support.",
			usd(p.AmountCents), p.Network)
	case r.ProvisioningBegun && !r.phase().Closed():
		flag()
		ev.Message = fmt.Sprintf("Un paiement déjà confirmé (%s) a été annulé par une réorganisation profonde du réseau %s : il n'est plus compté pour la commande. Le support est prévenu et reviendra vers vous.",
			usd(p.AmountCents), p.Network)
	case !r.phase().Closed():
		// Provisioning has not started: the order awaits payment again,
		// with a full payment window from now.
		r.Status.PaymentMethod = ""
		to = awaitAgain(ctx, r.Payments, &r.PayUntil, r.cfg.UnpaidTimeout, PhaseAwaitingPayment, PhasePaymentDetected)
		missing := r.in.TotalCents - r.netPaid()
		data["missing_cents"], data["pay_until"] = missing, r.PayUntil
		ev.Message = fmt.Sprintf("Un paiement confirmé (%s) a été annulé par une réorganisation du réseau %s : il n'est plus compté. La commande attend de nouveau son paiement : il manque %s, à régler avant le %s.",
			usd(p.AmountCents), p.Network, usd(missing), frDate(r.PayUntil))
	default:
		ev.Message = fmt.Sprintf("Un paiement confirmé (%s) a été annulé par une réorganisation du réseau %s : il n'est plus compté.",
			usd(p.AmountCents), p.Network)
	}
	if shortfall > 0 && ev.Exceptions == nil {
		flag()
	}
	if to != "" {
		return r.transition(ctx, to, ev)
	}
	return r.record(ctx, ev)
}

// awaitAgain gives a rental or a top-up whose payment a reversal uncounted
// a full payment window from now (never shorter than the one it had); it
// returns the phase it goes back to: awaiting payment, or "payment
// detected" while another payment is pending. Its transition writes it.
func awaitAgain[P Phase | TopUpPhase](ctx workflow.Context, l *paymentLedger, payUntil *time.Time, window time.Duration,
	awaiting, detected P) P {
	if until := workflow.Now(ctx).Add(window); until.After(*payUntil) {
		*payUntil = until
	}
	if len(l.Pending) > 0 {
		return detected
	}
	return awaiting
}

// owedAfterReversal: provisioning started and a reversal left the order
// short; a payment mined again then counts toward what is missing.
func (r *rental) owedAfterReversal() bool {
	return r.ProvisioningBegun && !r.phase().Closed() && r.netPaid() < r.in.TotalCents
}

// recount counts a payment mined again toward what its reversal left
// missing, once provisioning started (the order's status stays); what it
// brings above goes to support's queue. The caller holds mu.
func (r *rental) recount(ctx workflow.Context, p PaymentEvent, ekey string, ev payEvent) error {
	missing := r.in.TotalCents - r.netPaid()
	cents := min(p.AmountCents, missing)
	r.Status.PaidCents += p.AmountCents // received, as a first confirmation counts it
	r.Status.PaymentsConfirmed = appendOnce(r.Status.PaymentsConfirmed, p.Key())
	r.Counted = addCounted(r.Counted, countedPayment{P: p, Cents: cents, QKey: qkeyIfGen(ekey, p)})
	ev.PaidCents = ptrTo(r.Status.PaidCents)
	ev.Message = fmt.Sprintf("Le paiement annulé par la réorganisation du réseau est de nouveau confirmé (%s) : il est compté pour la commande.", usd(p.AmountCents))
	if over := p.AmountCents - cents; over > 0 {
		r.Over += over
		ev.Exceptions = []domain.NewException{newException(domain.ExceptionOver, ekey, p, over)}
		ev.Message += fmt.Sprintf(" L'excédent (%s) est transmis au support, qui vous le remboursera sur votre solde.", usd(over))
	}
	return r.write(ctx, ev)
}

// backAgain applies a payment mined again whose reversal left order
// refunds without backing (vRefundShortfall): that much of it counts again,
// already refunded, and the flag's shortfall drops by as much. It returns
// the rest of p, to count as any payment (AmountCents 0: nothing left).
// The caller holds mu.
func (r *rental) backAgain(p PaymentEvent, ekey string, ev *payEvent) PaymentEvent {
	s := min(r.Shortfalls[ev.Reversal.PaymentKey], p.AmountCents)
	if s <= 0 {
		return p
	}
	delete(r.Shortfalls, ev.Reversal.PaymentKey)
	r.Status.ShortfallCents -= s
	r.Status.PaidCents += s
	r.Status.PaymentsConfirmed = appendOnce(r.Status.PaymentsConfirmed, p.Key())
	back := p
	back.AmountCents = s
	r.Counted = addCounted(r.Counted, countedPayment{P: back, Cents: s, QKey: qkeyIfGen(ekey, p)})
	ev.Reversal.RecoveredCents = s
	ev.ShortfallCents, ev.PaidCents = ptrTo(r.Status.ShortfallCents), ptrTo(r.Status.PaidCents)
	ev.Data["recovered_cents"] = s
	ev.Message = fmt.Sprintf("Le paiement annulé par la réorganisation du réseau est de nouveau confirmé (%s) : le remboursement déjà versé sur votre solde est de nouveau couvert.",
		usd(p.AmountCents))
	p.AmountCents -= s
	return p
}

// dustEvent is the transition of a fresher dust summary: its total, kept
// up to date in one queued row per payment request (never provisioned
// automatically).
func dustEvent(s DustSummary) (key, message string, data map[string]any, exc domain.NewException) {
	message = fmt.Sprintf("Paiements de très faible montant reçus sur la demande de paiement %s : %d au total (%s %s, soit %s). Ils ne sont pas comptés automatiquement : le support peut les attribuer à votre dossier ou vous les rembourser sur votre solde.",
		s.IntentID, s.Outputs, s.AmountBase, s.Asset, usd(s.AmountCents))
	data = map[string]any{"intent_id": s.IntentID, "network": s.Network, "asset": s.Asset, "version": s.Version,
		"outputs": s.Outputs, "amount_base": s.AmountBase, "amount_cents": s.AmountCents}
	exc = domain.NewException{Reason: domain.ExceptionDust, PaymentKey: domain.DustKey(s.IntentID), Network: s.Network,
		Asset: s.Asset, AmountBase: s.AmountBase, AmountCents: s.AmountCents}
	return domain.KeyDust(s.IntentID, s.Version), message, data, exc
}

// revertConfirmed is the top-up's: before the credit, the payment is
// uncounted and the top-up awaits payment again; once credited, the
// balance keeps the credit and the payment is flagged for support with
// what it counted as shortfall (never silently kept). The caller holds mu.
func (t *topUp) revertConfirmed(ctx workflow.Context, p PaymentEvent) error {
	ekey := t.Payments.uncount(p.Key())
	t.Status.PaymentsConfirmed = without(t.Status.PaymentsConfirmed, p.Key())
	kept, received, counted := takeCounted(t.Counted, ekey)
	workflow.GetLogger(ctx).Warn("confirmed payment reverted", "key", ekey, "counted_cents", counted)
	data := paymentData(p)
	data["after_confirmation"] = true
	ev := activities.TopUpEvent{Key: domain.KeyRevertedConfirmed(ekey), Kind: domain.EventPaymentReverted, Data: data,
		Reversal: &domain.Reversal{PaymentKey: ekey}}
	var to TopUpPhase // the phase it moves to, if any
	switch {
	case counted == 0:
		ev.Message = fmt.Sprintf("Un paiement confirmé (%s) transmis au support a été annulé par une réorganisation du réseau %s : il est retiré de la file du support.",
			usd(p.AmountCents), p.Network)
	case t.phase() == TopUpPhaseCredited:
		// The credit stands: the counted part is the shortfall, until the
		// payment is mined again (remined) or support resolves it.
		t.Counted = kept
		t.Remined[ekey] = counted
		ev.Exceptions = []domain.NewException{{Reason: domain.ExceptionReverted, PaymentKey: ekey, Network: p.Network,
			TxID: p.TxID, Asset: p.Asset, AmountBase: p.AmountBase, AmountCents: p.AmountCents, ShortfallCents: counted}}
		data["shortfall_cents"] = counted
		ev.Message = fmt.Sprintf("Un paiement déjà confirmé (%s) a été annulé par une réorganisation profonde du réseau %s après le crédit de la recharge. Le support est prévenu et reviendra vers vous.",
			usd(p.AmountCents), p.Network)
	default:
		t.Counted = kept
		t.Status.ReceivedCents -= received
		if !t.closed() {
			t.Due = false
			to = awaitAgain(ctx, t.Payments, &t.PayUntil, t.timeout, TopUpPhaseAwaitingPayment, TopUpPhasePaymentDetected)
		}
		data["uncounted_cents"] = received
		ev.Message = fmt.Sprintf("Un paiement confirmé (%s) a été annulé par une réorganisation du réseau %s : il n'est plus compté pour la recharge.",
			usd(p.AmountCents), p.Network)
		if !t.closed() {
			ev.Message += fmt.Sprintf(" Elle attend de nouveau son paiement : il manque %s, à régler avant le %s.",
				usd(t.in.AmountCents-t.Status.ReceivedCents), frDate(t.PayUntil))
		}
	}
	if to != "" {
		return t.transition(ctx, to, ev)
	}
	return t.record(ctx, ev)
}

// reminedCredited closes the flag of a credited top-up's payment mined
// again: the credit is backed again, nothing is counted twice. The caller
// holds mu.
func (t *topUp) reminedCredited(ctx workflow.Context, p PaymentEvent, ekey string, ev payEvent) error {
	prev := ev.Reversal.PaymentKey
	ev.Reversal.RecoveredCents = t.Remined[prev]
	ev.Reversal.Restore = true
	delete(t.Remined, prev)
	t.Status.PaymentsConfirmed = append(t.Status.PaymentsConfirmed, p.Key())
	t.Counted = append(t.Counted, countedPayment{P: p, Cents: ev.Reversal.RecoveredCents, QKey: qkeyIfGen(ekey, p)})
	ev.Message = fmt.Sprintf("Le paiement annulé par la réorganisation du réseau est de nouveau confirmé (%s) : la recharge créditée est de nouveau couverte.", usd(p.AmountCents))
	return t.write(ctx, ev)
}

// takeCounted splits off the payment generation ekey: received is what
// it added to the paid (received) amount, excess included; counted is the
// part counted toward the total.
func takeCounted(list []countedPayment, ekey string) (kept []countedPayment, received, counted int64) {
	for _, c := range list {
		if c.qkey() == ekey {
			received += c.P.AmountCents
			counted += c.Cents
		} else {
			kept = append(kept, c)
		}
	}
	return kept, received, counted
}
