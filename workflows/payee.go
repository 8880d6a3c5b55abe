package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// The payment intake's handlers, once for rentals and top-ups: a payment
// seen, confirmed or reverted, a dust summary, an attribution by support,
// and the counting that follows. What rentals and top-ups share is the
// intake's (intakeRun, payeeState); what differs (what is still due, what
// "covered" starts, how a reorganisation is undone, the words) is asked of
// the payee.

// payee is what differs between a rental and a top-up for the intake.
type payee interface {
	// awaiting reports whether payments still count toward its amount.
	awaiting() bool
	// due is what the payments must still cover (negative: over).
	due() int64
	// counts are where it keeps what the intake counts.
	counts() counts
	// write records e as the payee's own timeline event, through its
	// transition if e moves its status; the caller holds mu.
	write(ctx workflow.Context, e payEvent) error
	// covered: the amount is covered, excess above it queued for support;
	// it returns the status the covering event moves the payee to ("":
	// none).
	covered(ctx workflow.Context, excess int64) string
	// minedAgain handles a confirmation whose earlier generation a
	// reorganisation removed; done: nothing is left to count (p is what
	// is left otherwise).
	minedAgain(ctx workflow.Context, p *PaymentEvent, ekey string, ev *payEvent) (done bool, err error)
	// revertConfirmed uncounts a confirmed payment the chain no longer
	// holds (reorg.go).
	revertConfirmed(ctx workflow.Context, p PaymentEvent) error
	// flushBatch writes the events kept since the batch started, in one
	// local activity.
	flushBatch(ctx workflow.Context) error
}

// counts are where a payee keeps what the intake counts, in its status
// (nil: it keeps none).
type counts struct {
	paid       *int64    // counted so far: PaidCents, ReceivedCents
	confirmed  *[]string // the payment keys counted
	seen       *[]string // the payment keys awaiting confirmation
	unbacked   *int64    // attributed by support without a received payment
	attributed *bool     // an attribution by support took part in the payment
}

// count adds cents to what was received, for the payment (or attribution)
// key; it returns the amount counted so far.
func (c counts) count(key string, cents int64) int64 {
	*c.paid += cents
	*c.confirmed = appendOnce(*c.confirmed, key)
	return *c.paid
}

// noteSeen keeps or drops a payment in the list of those awaiting
// confirmation toward the amount.
func (c counts) noteSeen(key string, pending bool) {
	switch {
	case c.seen == nil:
	case pending:
		*c.seen = append(*c.seen, key)
	default:
		*c.seen = without(*c.seen, key)
	}
}

// attribute notes support's part in the payment; unbacked: it names no
// received payment.
func (c counts) attribute(ev *payEvent, cents int64, unbacked bool) {
	if c.attributed != nil {
		*c.attributed = true
	}
	if unbacked && c.unbacked != nil {
		*c.unbacked += cents
		ev.UnbackedCents = ptrTo(*c.unbacked)
	}
}

// payeeText is what the customer reads that names the order or the
// top-up (%s: an amount in USD).
type payeeText struct {
	// paid and amount name the amount counted so far and the payee's
	// amount in a partial payment's data.
	paid, amount   string
	notAwaiting    string
	seenExtra      string
	extraConfirmed string
	lateConfirmed  string
	over           string
	partial        string
	attributed     string
}

// payeeTexts are the words of each kind of payee.
var payeeTexts = map[string]*payeeText{
	domain.TargetOrder: {
		paid:           "paid_cents",
		amount:         "total_cents",
		notAwaiting:    "La commande n'attend plus de paiement.",
		seenExtra:      "Paiement supplémentaire détecté alors que la commande n'attend plus de paiement : il sera examiné par le support.",
		extraConfirmed: "Paiement supplémentaire confirmé (%s) alors que la commande n'attend plus de paiement : il est transmis au support, qui vous le remboursera sur votre solde.",
		lateConfirmed:  "Paiement confirmé après l'échéance de la demande de paiement (%s) : il est transmis au support, qui l'attribuera à votre commande ou le remboursera sur votre solde.",
		over:           " Le montant reçu dépasse le total de %s : l'excédent est transmis au support, qui vous le remboursera sur votre solde.",
		partial:        "Paiement partiel : il manque %s pour régler la commande. Complétez le paiement avant l'échéance de la demande de paiement.",
		attributed:     "Le support a attribué un paiement de %s à la commande.",
	},
	domain.TargetTopUp: {
		paid:           "received_cents",
		amount:         "amount_cents",
		notAwaiting:    "La recharge n'attend plus de paiement.",
		seenExtra:      "Paiement supplémentaire détecté alors que la recharge n'attend plus de paiement : il sera examiné par le support.",
		extraConfirmed: "Paiement supplémentaire confirmé (%s) alors que la recharge n'attend plus de paiement : il n'est pas crédité ; le support vous le remboursera sur votre solde.",
		lateConfirmed:  "Paiement confirmé après l'échéance de la demande de paiement (%s) : il est transmis au support, qui l'attribuera à votre recharge ou vous le remboursera sur votre solde.",
		over:           " Le montant reçu dépasse la recharge de %s : l'excédent est transmis au support, qui vous le remboursera sur votre solde.",
		partial:        "Paiement partiel : il manque %s pour créditer la recharge. Complétez le paiement avant l'échéance de la demande de paiement.",
		attributed:     "Le support a attribué un paiement de %s à la recharge.",
	},
}

// payEvent is a transition the intake writes, mapped to the payee's event
// (activities.OrderEvent, activities.TopUpEvent) by its write.
type payEvent struct {
	Key, Kind, Message string
	Data               map[string]any
	// Status is the status the event moves to, through the payee's
	// transition; "" or the current status: unchanged (none written).
	Status     string
	Exceptions []domain.NewException
	Use        *domain.ExceptionUse
	Reversal   *domain.Reversal
	// The order's amounts this event changes (nil: unchanged); a top-up's
	// events always carry what it received.
	PaidCents, ShortfallCents, UnbackedCents *int64
}

func (e payEvent) order() activities.OrderEvent {
	return activities.OrderEvent{Key: e.Key, Kind: e.Kind, Message: e.Message, Data: e.Data, Status: e.Status,
		PaidCents: e.PaidCents, ShortfallCents: e.ShortfallCents, UnbackedCents: e.UnbackedCents,
		Exceptions: e.Exceptions, Use: e.Use, Reversal: e.Reversal}
}

func (e payEvent) topUp() activities.TopUpEvent {
	return activities.TopUpEvent{Key: e.Key, Kind: e.Kind, Message: e.Message, Data: e.Data, Status: e.Status,
		Exceptions: e.Exceptions, Use: e.Use, Reversal: e.Reversal}
}

// paymentStatus is the status an awaiting payee is in after a payment came
// or went: awaiting_payment or payment_detected ("": not awaiting).
func paymentStatus(run *intakeRun) string {
	if !run.p.awaiting() {
		return ""
	}
	pending := len(run.st.Payments.Pending) > 0
	switch {
	case run.kind == domain.TargetTopUp && pending:
		return string(TopUpPhasePaymentDetected)
	case run.kind == domain.TargetTopUp:
		return string(TopUpPhaseAwaitingPayment)
	case pending:
		return string(PhasePaymentDetected)
	}
	return string(PhaseAwaitingPayment)
}

// supportEvent is the audit entry of a support action.
func supportEvent(action string, id int64, agent, reason, message string, extra map[string]any) payEvent {
	data := supportData(action, id, agent, reason)
	for k, v := range extra {
		data[k] = v
	}
	return payEvent{Key: domain.KeySupport(id, action), Kind: domain.EventSupportAction, Message: message, Data: data}
}

func onSeen(ctx workflow.Context, run *intakeRun, p PaymentEvent) error {
	l, t := run.st.Payments, run.p
	if stale, err := l.ordered(ctx, run.v, p, t.revertConfirmed); stale || err != nil {
		return err
	}
	key := p.Key()
	eventKey, ok := l.seen(key, p.Late)
	if !ok {
		return nil
	}
	run.sa.notePayment(ctx, p)
	ev := payEvent{Key: eventKey, Kind: domain.EventPaymentSeen, Data: paymentData(p)}
	switch {
	case p.Late:
		ev.Message = "Paiement détecté après l'échéance de la demande de paiement : il sera examiné par le support."
	case t.awaiting():
		t.counts().noteSeen(key, true)
		ev.Message = fmt.Sprintf("Paiement détecté sur le réseau %s : en attente de confirmation.", p.Network)
		ev.Status = paymentStatus(run)
	default:
		ev.Message = run.texts().seenExtra
	}
	return t.write(ctx, ev)
}

func onReverted(ctx workflow.Context, run *intakeRun, p PaymentEvent) error {
	l, t, v := run.st.Payments, run.p, run.v
	key := p.Key()
	if p.AfterConfirmation && v >= vReversalOrder && p.Reversals > 0 {
		counted := l.Counted[key]
		stale, err := l.ordered(ctx, v, p, t.revertConfirmed)
		if stale || err != nil || counted {
			return err
		}
		// Never counted here (its confirmation was not delivered): the
		// pending payment is dropped below.
	} else if l.Counted[key] && v >= vReorgDust {
		return t.revertConfirmed(ctx, p)
	}
	if l.Counted[key] {
		// Confirmation policies make this unexpected; money may be missing,
		// so a human looks at it. Keyed on the payment: recorded once.
		workflow.GetLogger(ctx).Warn("confirmed payment reverted", "key", key)
		data := paymentData(p)
		data["after_confirmation"] = true
		return t.write(ctx, payEvent{
			Key: domain.KeyRevertedConfirmed(key), Kind: domain.EventPaymentReverted, Data: data,
			Message: "Un paiement déjà confirmé a été annulé par le réseau : le support est prévenu.",
		})
	}
	eventKey, ok := l.reverted(key)
	if !ok {
		return nil
	}
	t.counts().noteSeen(key, false)
	return t.write(ctx, payEvent{
		Key: eventKey, Kind: domain.EventPaymentReverted, Data: paymentData(p),
		Message: "Paiement annulé par le réseau avant sa confirmation : il n'est pas compté.",
		Status:  paymentStatus(run),
	})
}

func onConfirmed(ctx workflow.Context, run *intakeRun, p PaymentEvent) error {
	l, t := run.st.Payments, run.p
	if stale, err := l.ordered(ctx, run.v, p, t.revertConfirmed); stale || err != nil {
		return err
	}
	key := p.Key()
	if !l.confirm(key) {
		return nil // already counted: a watcher re-sent it
	}
	t.counts().noteSeen(key, false)
	run.sa.notePayment(ctx, p)
	data := paymentData(p)
	ekey := l.qkey(key)
	ev := payEvent{Key: domain.KeyConfirmed(ekey), Kind: domain.EventPaymentConfirmed, Data: data}
	if gen := l.Gen[key]; gen > 0 {
		// Mined again after its reversal: this generation counts once.
		data["generation"] = gen
		ev.Reversal = &domain.Reversal{PaymentKey: genKey(key, gen-1), Remined: true}
		if done, err := t.minedAgain(ctx, &p, ekey, &ev); done {
			return err
		}
	}
	switch {
	case !t.awaiting():
		// Settled, cancelled or expired: the money is real and not
		// counted; it waits in support's queue to be refunded.
		data["to_support"] = true
		ev.Exceptions = []domain.NewException{newException(domain.ExceptionExtra, ekey, p, p.AmountCents)}
		ev.Message = fmt.Sprintf(run.texts().extraConfirmed, usd(p.AmountCents))
		return t.write(ctx, ev)
	case p.Late:
		// Never counted automatically: support counts it toward the
		// order or top-up, or refunds it to the balance.
		data["to_support"] = true
		ev.Exceptions = []domain.NewException{newException(domain.ExceptionLate, ekey, p, p.AmountCents)}
		ev.Message = fmt.Sprintf(run.texts().lateConfirmed, usd(p.AmountCents))
		ev.Status = paymentStatus(run)
		return t.write(ctx, ev)
	}
	return counted(ctx, run, ekey, &p, p.AmountCents, ev, fmt.Sprintf("Paiement confirmé (%s).", usd(p.AmountCents)))
}

// counted counts cents (a confirmed payment p, or an attribution when p is
// nil) and records ev; then the amount is covered or what is still missing
// is recorded. What p brings above the amount goes to support's queue.
// qkey is the payment's current key (paymentLedger.qkey). The caller holds
// mu.
func counted(ctx workflow.Context, run *intakeRun, qkey string, p *PaymentEvent, cents int64, ev payEvent, message string) error {
	t := run.p
	key := qkey
	if p != nil {
		key = p.Key()
	}
	ev.PaidCents = ptrTo(t.counts().count(key, cents))
	ev.Message = message
	missing := t.due()
	if p != nil {
		run.st.Counted = addCounted(run.st.Counted, countedPayment{P: *p, Cents: cents + min(missing, 0), QKey: qkeyIfGen(qkey, *p)})
	}
	if missing <= 0 {
		var excess int64
		if missing < 0 {
			ev.Data["overpaid_cents"] = -missing
			ev.Message += fmt.Sprintf(run.texts().over, usd(-missing))
			if p != nil {
				ev.Exceptions = append(ev.Exceptions, newException(domain.ExceptionOver, qkey, *p, -missing))
				excess = -missing
			}
		}
		ev.Status = t.covered(ctx, excess)
		return t.write(ctx, ev)
	}
	ev.Status = paymentStatus(run)
	if err := t.write(ctx, ev); err != nil {
		return err
	}
	return t.write(ctx, payEvent{
		Key:     domain.KeyPartial(qkey),
		Kind:    domain.EventPaymentPartial,
		Message: fmt.Sprintf(run.texts().partial, usd(missing)),
		Data: map[string]any{"missing_cents": missing, run.texts().paid: *t.counts().paid,
			run.texts().amount: run.amount},
	})
}

func onDust(ctx workflow.Context, run *intakeRun, s DustSummary) error {
	if !run.st.Payments.dustFresh(s) {
		return nil // older or repeated: the newer total is already kept
	}
	key, msg, data, exc := dustEvent(s)
	return run.p.write(ctx, payEvent{Key: key, Kind: domain.EventPaymentDust, Message: msg, Data: data,
		Exceptions: []domain.NewException{exc}})
}

func validateAttribution(run *intakeRun, at Attribution) error {
	if err := at.Validate(); err != nil {
		return refusal(err)
	}
	if run.st.Actions[at.ActionID] {
		return nil
	}
	if run.debiting || !run.p.awaiting() {
		return reject(domain.ECodeConflict, run.texts().notAwaiting)
	}
	return refusal(domain.CheckAttribution(at.AmountCents, run.p.due()))
}

// attributePayment counts a payment support vouches for. Naming a queued
// amount (ExceptionID) counts that received money, at most what is due, the
// rest staying queued; otherwise the amount (at most what is due) is
// counted without being refundable.
func attributePayment(ctx workflow.Context, run *intakeRun, at Attribution) error {
	t := run.p
	if err := run.mu.Lock(ctx); err != nil {
		return errUnavailable()
	}
	defer run.mu.Unlock()
	if err := validateAttribution(run, at); err != nil || run.st.Actions[at.ActionID] {
		return err
	}
	if err := checkAction(ctx, run.v, UpdateAttributePayment, at.Claim(run.ref)); err != nil {
		return err
	}
	due := t.due()
	amount := at.AmountCents
	if amount == 0 {
		amount = due
	}
	key := domain.KeyAttribution(at.ActionID)
	ev := payEvent{
		Key: domain.KeyConfirmed(key), Kind: domain.EventPaymentConfirmed,
		Data: map[string]any{"key": key, "amount_cents": amount, "attributed_by": at.Agent},
	}
	if at.ExceptionID > 0 {
		// Counted like a received payment (refundable, back to the queue
		// if the target expires), never above what is due: no excess.
		c, use, err := countException(ctx, run.v, at, run.ref, due, ev.Data)
		if err != nil {
			return err
		}
		ev.Use = use
		amount = c.Cents
		run.st.Counted = addCounted(run.st.Counted, c)
	}
	t.counts().attribute(&ev, amount, at.ExceptionID <= 0)
	run.st.Actions[at.ActionID] = true
	run.st.Payments.confirm(key)
	if err := t.write(ctx, supportEvent(domain.ActionAttributePayment, at.ActionID, at.Agent, at.Reason,
		fmt.Sprintf(run.texts().attributed, usd(amount)), map[string]any{"amount_cents": amount})); err != nil {
		return errUnavailable()
	}
	if err := counted(ctx, run, key, nil, amount, ev, fmt.Sprintf("Paiement attribué par le support (%s).", usd(amount))); err != nil {
		return asRefusal(err, "L'attribution n'a pas abouti. Réessayez plus tard.")
	}
	return nil
}
