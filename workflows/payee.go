package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// The payment intake's handlers, once for rentals and top-ups: a payment
// seen, confirmed or reverted, a dust summary, an attribution by support,
// and the counting that follows. What differs between an order and a
// top-up (what is still due, what "covered" starts, the words) is asked of
// the payee.

// payee is what the payment intake drives: a rental or a top-up.
type payee interface {
	intake() *intakeRun
	ledger() *paymentLedger
	// targetKind and ref name the order or top-up, as its payment
	// requests do ("order" or "topup").
	targetKind() string
	ref() string
	actions() map[int64]bool
	// awaiting reports whether payments still count toward its amount.
	awaiting() bool
	// due is what the payments must still cover (negative: over).
	due() int64
	// paid is the amount counted so far, as its events carry it.
	paid() int64
	// write records e as the payee's own timeline event, through its
	// transition if e moves its status; the caller holds mu.
	write(ctx workflow.Context, e payEvent) error
	// noteSeen keeps or drops a payment in the list of those awaiting
	// confirmation toward the amount.
	noteSeen(key string, pending bool)
	// count adds cents to what was received, for the payment (or
	// attribution) key.
	count(key string, cents int64)
	keepCounted(c countedPayment)
	// covered: the amount is covered, excess above it queued for support.
	covered(ctx workflow.Context, excess int64)
	partialData(missing int64) map[string]any
	// minedAgain handles a confirmation whose earlier generation a
	// reorganisation removed; done: nothing is left to count (p is what
	// is left otherwise).
	minedAgain(ctx workflow.Context, p *PaymentEvent, ekey string, ev *payEvent) (done bool, err error)
	revertConfirmed(ctx workflow.Context, p PaymentEvent) error
	// acceptsAttribution: support may attribute a payment now.
	acceptsAttribution() bool
	// attributed notes support's part in the payment; unbacked: it names
	// no received payment.
	attributed(ev *payEvent, cents int64, unbacked bool)
	recordSupport(ctx workflow.Context, action string, id int64, agent, reason, message string, extra map[string]any) error
	// startBatch keeps the timeline writes of the handlers that follow for
	// flushBatch, which writes them in one local activity.
	startBatch()
	flushBatch(ctx workflow.Context) error
}

// payeeText is what the customer reads that names the order or the
// top-up (%s: an amount in USD).
type payeeText struct {
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
		notAwaiting:    "La commande n'attend plus de paiement.",
		seenExtra:      "Paiement supplémentaire détecté alors que la commande n'attend plus de paiement : il sera examiné par le support.",
		extraConfirmed: "Paiement supplémentaire confirmé (%s) alors que la commande n'attend plus de paiement : il est transmis au support, qui vous le remboursera sur votre solde.",
		lateConfirmed:  "Paiement confirmé après l'échéance de la demande de paiement (%s) : il est transmis au support, qui l'attribuera à votre commande ou le remboursera sur votre solde.",
		over:           " Le montant reçu dépasse le total de %s : l'excédent est transmis au support, qui vous le remboursera sur votre solde.",
		partial:        "Paiement partiel : il manque %s pour régler la commande. Complétez le paiement avant l'échéance de la demande de paiement.",
		attributed:     "Le support a attribué un paiement de %s à la commande.",
	},
	domain.TargetTopUp: {
		notAwaiting:    "La recharge n'attend plus de paiement.",
		seenExtra:      "Paiement supplémentaire détecté alors que la recharge n'attend plus de paiement : il sera examiné par le support.",
		extraConfirmed: "Paiement supplémentaire confirmé (%s) alors que la recharge n'attend plus de paiement : il n'est pas crédité ; le support vous le remboursera sur votre solde.",
		lateConfirmed:  "Paiement confirmé après l'échéance de la demande de paiement (%s) : il est transmis au support, qui l'attribuera à votre recharge ou vous le remboursera sur votre solde.",
		over:           " Le montant reçu dépasse la recharge de %s : l'excédent est transmis au support, qui vous le remboursera sur votre solde.",
		partial:        "Paiement partiel : il manque %s pour créditer la recharge. Complétez le paiement avant l'échéance de la demande de paiement.",
		attributed:     "Le support a attribué un paiement de %s à la recharge.",
	},
}

// intakeRun is what a rental's or a top-up's run keeps, beside its state,
// for the intake and its continuing as new.
type intakeRun struct {
	mu          workflow.Mutex
	v           workflow.Version // command version (historyVersion)
	sa          searchAttrs
	signalsBusy int  // payment signals being processed
	full        bool // the history passed its bound: continue as new at the next waiting point
}

// newIntakeRun starts a run's intake: its mutex, and its command version,
// read once.
func newIntakeRun(ctx workflow.Context) intakeRun {
	v := historyVersion(ctx)
	return intakeRun{mu: workflow.NewMutex(ctx), v: v, sa: searchAttrs{V: v}}
}

func (i *intakeRun) intake() *intakeRun { return i }

// quiet waits until the updates running and the payment signals being
// handled are done; withPending: and those received but not yet read (a
// run continuing as new leaves none behind).
func (i *intakeRun) quiet(ctx workflow.Context, withPending bool) error {
	return workflow.Await(ctx, func() bool {
		return workflow.AllHandlersFinished(ctx) && i.signalsBusy == 0 && (!withPending || !signalsPending(ctx))
	})
}

// checkFull notes a history past max; it reports whether it just did.
func (i *intakeRun) checkFull(ctx workflow.Context, max int) bool {
	if i.full || !historyFull(ctx, i.v, max) {
		return false
	}
	i.full = true
	return true
}

// timeline keeps the events of a batch (and the rental's writeLater) for
// one write.
type timeline[E any] struct {
	batch bool // payment signals being handled in one batch (vReorgDust)
	later []E
}

// write writes ev after the events kept, or keeps it while a batch runs.
func (tl *timeline[E]) write(ctx workflow.Context, v workflow.Version, one, many any, ev E) error {
	if tl.batch {
		tl.later = append(tl.later, ev)
		return nil
	}
	if len(tl.later) == 0 {
		return execTimeline(ctx, v, one, ev)
	}
	evs := append(tl.later, ev)
	tl.later = nil
	return execTimeline(ctx, v, many, evs)
}

// flush ends a batch, writing its events in one local activity.
func (tl *timeline[E]) flush(ctx workflow.Context, v workflow.Version, many any) error {
	tl.batch = false
	if len(tl.later) == 0 {
		return nil
	}
	evs := tl.later
	tl.later = nil
	return execTimeline(ctx, v, many, evs)
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
func paymentStatus(t payee) string {
	if !t.awaiting() {
		return ""
	}
	if len(t.ledger().Pending) > 0 {
		return domain.StatusPaymentDetected
	}
	return domain.StatusAwaitingPayment
}

// supportEvent is the audit entry of a support action.
func supportEvent(action string, id int64, agent, reason, message string, extra map[string]any) payEvent {
	data := supportData(action, id, agent, reason)
	for k, v := range extra {
		data[k] = v
	}
	return payEvent{Key: domain.KeySupport(id, action), Kind: domain.EventSupportAction, Message: message, Data: data}
}

func onSeen(ctx workflow.Context, t payee, p PaymentEvent) error {
	l, run := t.ledger(), t.intake()
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
		t.noteSeen(key, true)
		ev.Message = fmt.Sprintf("Paiement détecté sur le réseau %s : en attente de confirmation.", p.Network)
		ev.Status = paymentStatus(t)
	default:
		ev.Message = payeeTexts[t.targetKind()].seenExtra
	}
	return t.write(ctx, ev)
}

func onReverted(ctx workflow.Context, t payee, p PaymentEvent) error {
	l, v := t.ledger(), t.intake().v
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
	t.noteSeen(key, false)
	return t.write(ctx, payEvent{
		Key: eventKey, Kind: domain.EventPaymentReverted, Data: paymentData(p),
		Message: "Paiement annulé par le réseau avant sa confirmation : il n'est pas compté.",
		Status:  paymentStatus(t),
	})
}

func onConfirmed(ctx workflow.Context, t payee, p PaymentEvent) error {
	l, run := t.ledger(), t.intake()
	if stale, err := l.ordered(ctx, run.v, p, t.revertConfirmed); stale || err != nil {
		return err
	}
	key := p.Key()
	if !l.confirm(key) {
		return nil // already counted: a watcher re-sent it
	}
	t.noteSeen(key, false)
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
		ev.Message = fmt.Sprintf(payeeTexts[t.targetKind()].extraConfirmed, usd(p.AmountCents))
		return t.write(ctx, ev)
	case p.Late:
		// Never counted automatically: support counts it toward the
		// order or top-up, or refunds it to the balance.
		data["to_support"] = true
		ev.Exceptions = []domain.NewException{newException(domain.ExceptionLate, ekey, p, p.AmountCents)}
		ev.Message = fmt.Sprintf(payeeTexts[t.targetKind()].lateConfirmed, usd(p.AmountCents))
		ev.Status = paymentStatus(t)
		return t.write(ctx, ev)
	}
	return counted(ctx, t, ekey, &p, p.AmountCents, ev, fmt.Sprintf("Paiement confirmé (%s).", usd(p.AmountCents)))
}

// counted counts cents (a confirmed payment p, or an attribution when p is
// nil) and records ev; then the amount is covered or what is still missing
// is recorded. What p brings above the amount goes to support's queue.
// qkey is the payment's current key (paymentLedger.qkey). The caller holds
// mu.
func counted(ctx workflow.Context, t payee, qkey string, p *PaymentEvent, cents int64, ev payEvent, message string) error {
	key := qkey
	if p != nil {
		key = p.Key()
	}
	t.count(key, cents)
	ev.PaidCents = ptrTo(t.paid())
	ev.Message = message
	missing := t.due()
	if p != nil {
		t.keepCounted(countedPayment{P: *p, Cents: cents + min(missing, 0), QKey: qkeyIfGen(qkey, *p)})
	}
	if missing <= 0 {
		var excess int64
		if missing < 0 {
			ev.Data["overpaid_cents"] = -missing
			ev.Message += fmt.Sprintf(payeeTexts[t.targetKind()].over, usd(-missing))
			if p != nil {
				ev.Exceptions = append(ev.Exceptions, newException(domain.ExceptionOver, qkey, *p, -missing))
				excess = -missing
			}
		}
		t.covered(ctx, excess)
		return t.write(ctx, ev)
	}
	ev.Status = paymentStatus(t)
	if err := t.write(ctx, ev); err != nil {
		return err
	}
	return t.write(ctx, payEvent{
		Key:     domain.KeyPartial(qkey),
		Kind:    domain.EventPaymentPartial,
		Message: fmt.Sprintf(payeeTexts[t.targetKind()].partial, usd(missing)),
		Data:    t.partialData(missing),
	})
}

func onDust(ctx workflow.Context, t payee, s DustSummary) error {
	if !t.ledger().dustFresh(s) {
		return nil // older or repeated: the newer total is already kept
	}
	key, msg, data, exc := dustEvent(s)
	return t.write(ctx, payEvent{Key: key, Kind: domain.EventPaymentDust, Message: msg, Data: data,
		Exceptions: []domain.NewException{exc}})
}

func validateAttribution(t payee, at Attribution) error {
	if err := at.Validate(); err != nil {
		return refusal(err)
	}
	if t.actions()[at.ActionID] {
		return nil
	}
	if !t.acceptsAttribution() {
		return reject(domain.ECodeConflict, payeeTexts[t.targetKind()].notAwaiting)
	}
	return refusal(domain.CheckAttribution(at.AmountCents, t.due()))
}

// attributePayment counts a payment support vouches for. Naming a queued
// amount (ExceptionID) counts that received money, at most what is due, the
// rest staying queued; otherwise the amount (at most what is due) is
// counted without being refundable.
func attributePayment(ctx workflow.Context, t payee, at Attribution) error {
	run := t.intake()
	if err := run.mu.Lock(ctx); err != nil {
		return errUnavailable()
	}
	defer run.mu.Unlock()
	if err := validateAttribution(t, at); err != nil || t.actions()[at.ActionID] {
		return err
	}
	if err := checkAction(ctx, run.v, UpdateAttributePayment, at.Claim(t.ref())); err != nil {
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
		c, use, err := countException(ctx, run.v, at, t.ref(), due, ev.Data)
		if err != nil {
			return err
		}
		ev.Use = use
		amount = c.Cents
		t.keepCounted(c)
	}
	t.attributed(&ev, amount, at.ExceptionID <= 0)
	t.actions()[at.ActionID] = true
	t.ledger().confirm(key)
	if err := t.recordSupport(ctx, domain.ActionAttributePayment, at.ActionID, at.Agent, at.Reason,
		fmt.Sprintf(payeeTexts[t.targetKind()].attributed, usd(amount)), map[string]any{"amount_cents": amount}); err != nil {
		return errUnavailable()
	}
	if err := counted(ctx, t, key, nil, amount, ev, fmt.Sprintf("Paiement attribué par le support (%s).", usd(amount))); err != nil {
		return asRefusal(err, "L'attribution n'a pas abouti. Réessayez plus tard.")
	}
	return nil
}
