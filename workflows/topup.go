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
	t.v = historyVersion(ctx)
	t.sa.V = t.v
	t.maxHist = in.MaxHistory
	if t.maxHist <= 0 {
		t.maxHist = DefaultMaxHistory
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
	// Resume is the waiting point the next run starts at (carry.go).
	Resume   string `json:"Phase"`
	Status   TopUpStatus
	Payments *paymentLedger
	Actions  map[int64]bool
	Due      bool // received covers the amount: credit it
	Done     bool // cancelled or expired
	Intents  int  // payment requests asked for, part of their keys
	Counted  []countedPayment
	PayUntil time.Time // no payment request outlives it
	// ListenUntil ends a credited top-up's listening window.
	ListenUntil time.Time
	// Remined: a credited top-up's payments reverted after confirmation,
	// by generation key, with the credit they no longer back.
	Remined map[string]int64
	// Asset and Network of the payment, as the search attributes have them.
	Asset, Network string
	// Runs counts the runs before this one.
	Runs int
}

// topUp is one TopUpWorkflow run; mu plays the same role as in rental.
type topUp struct {
	TopUpState
	in          TopUpInput
	timeout     time.Duration
	mu          workflow.Mutex
	v           workflow.Version // command version (historyVersion)
	sa          searchAttrs
	signalsBusy int
	batch       bool // payment signals being handled in one batch (vReorgDust)
	later       []activities.TopUpEvent
	full        bool // the history passed its bound: continue as new at the next waiting point
	maxHist     int  // history bound
}

func newTopUp(ctx workflow.Context, in TopUpInput) *topUp {
	timeout := in.PaymentTimeout
	if timeout <= 0 {
		timeout = DefaultTopUpTimeout
	}
	return &topUp{
		TopUpState: TopUpState{
			Status:   TopUpStatus{TopUpRef: in.TopUpRef, Status: domain.TopUpAwaitingPayment},
			PayUntil: workflow.GetInfo(ctx).WorkflowStartTime.Add(timeout),
			Payments: newPaymentLedger(),
			Actions:  map[int64]bool{},
			Remined:  map[string]int64{},
		},
		in:      in,
		timeout: timeout,
		mu:      workflow.NewMutex(ctx),
	}
}

func (t *topUp) setup(ctx workflow.Context) error {
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		saKeyRef.ValueSet(t.in.TopUpRef),
		saKeyCustomer.ValueSet(strconv.FormatInt(t.in.AccountID, 10)),
		saKeyStatus.ValueSet(t.Status.Status),
		saKeyKind.ValueSet("topup"),
	); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (TopUpStatus, error) {
		return t.Status, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateAttributePayment, t.attributePayment,
		workflow.UpdateHandlerOptions{Validator: t.validateAttribution}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateCancel, t.cancel,
		workflow.UpdateHandlerOptions{Validator: t.validateCancel}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateCreatePaymentIntent, t.createPaymentIntent,
		workflow.UpdateHandlerOptions{Validator: t.validateCreateIntent}); err != nil {
		return err
	}
	workflow.Go(ctx, t.listenPayments)
	return nil
}

func (t *topUp) run(ctx workflow.Context) (TopUpStatus, error) {
	settled := func() bool { return t.Due || t.Done }
	if t.in.Carry != nil && t.in.Carry.Resume == phaseCredited {
		return t.listen(ctx)
	}
	for {
		var ok bool
		var err error
		if t.v >= vReorgDust {
			// Until the end of the payment window, which a reverted
			// payment moves.
			until := t.PayUntil
			ok, err = awaitOrTimeout(ctx, until.Sub(workflow.Now(ctx)), func() bool {
				return settled() || !t.PayUntil.Equal(until) || t.full
			})
			if err == nil && !settled() && t.full {
				return t.Status, t.continueAsNew(ctx, phasePayment)
			}
			if err == nil && !ok && !t.PayUntil.Equal(until) {
				continue
			}
		} else {
			ok, err = awaitOrTimeout(ctx, t.timeout, settled)
		}
		if err != nil {
			return t.Status, err
		}
		if !ok && len(t.Payments.Pending) > 0 {
			// A payment seen before the deadline gets time to confirm.
			if _, err := awaitOrTimeout(ctx, t.timeout, func() bool {
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
	if t.v >= vContinueAsNew {
		t.ListenUntil = workflow.Now(ctx).Add(t.timeout)
		return t.listen(ctx)
	}
	if t.Status.Status == domain.TopUpCredited {
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
	if t.Status.Status == domain.TopUpCredited {
		if _, err := awaitOrTimeout(ctx, t.ListenUntil.Sub(workflow.Now(ctx)), func() bool { return t.full }); err != nil {
			return t.Status, err
		}
		if t.full && workflow.Now(ctx).Before(t.ListenUntil) {
			return t.Status, t.continueAsNew(ctx, phaseCredited)
		}
	}
	return t.finish(ctx)
}

// finish lets running handlers complete (see the rental's).
func (t *topUp) finish(ctx workflow.Context) (TopUpStatus, error) {
	err := workflow.Await(ctx, func() bool {
		return workflow.AllHandlersFinished(ctx) && t.signalsBusy == 0
	})
	return t.Status, err
}

// settle credits a covered top-up or expires an uncovered one; again is
// true when a reverted payment reopened its payment window meanwhile.
func (t *topUp) settle(ctx workflow.Context) (again bool, err error) {
	if err := t.mu.Lock(ctx); err != nil {
		return false, err
	}
	defer t.mu.Unlock()
	if t.Done {
		return false, nil
	}
	if !t.Due && t.v >= vReorgDust && t.PayUntil.After(workflow.Now(ctx)) {
		return true, nil
	}
	if !t.Due {
		t.Done = true
		t.setStatus(ctx, domain.TopUpExpired)
		msg := "Recharge expirée : le paiement n'a pas été reçu dans le délai."
		queued := partialExceptions(t.Counted, 0)
		if len(queued) > 0 {
			var cents int64
			for _, q := range queued {
				cents += q.AmountCents
			}
			msg += fmt.Sprintf(" Le montant déjà reçu (%s) est transmis au support, qui vous le remboursera sur votre solde.", usd(cents))
		}
		return false, t.record(ctx, activities.TopUpEvent{
			Key: domain.KeyExpired, Kind: domain.EventExpired, Status: domain.TopUpExpired, Message: msg,
			Data:       map[string]any{"received_cents": t.Status.ReceivedCents},
			Exceptions: queued,
		})
	}
	var a *activities.Activities
	now := workflow.Now(ctx).UTC()
	// The activity credits the balance, marks the top-up credited and writes
	// its event in one transaction, idempotently by top-up reference.
	if err := workflow.ExecuteActivity(timelineCtx(ctx), a.CreditTopUp, activities.CreditTopUpInput{
		TopUpRef: t.in.TopUpRef, AccountID: t.in.AccountID, AmountCents: t.in.AmountCents, At: now,
	}).Get(ctx, nil); err != nil {
		return false, err
	}
	t.Status.CreditedAt = now
	t.setStatus(ctx, domain.TopUpCredited)
	return false, nil
}

func (t *topUp) setStatus(ctx workflow.Context, status string) {
	t.Status.Status = status
	t.sa.setStatus(ctx, status)
}

// awaiting reports whether the top-up still accepts payments toward its amount.
func (t *topUp) awaiting() bool {
	return !t.Due && !t.Done &&
		(t.Status.Status == domain.TopUpAwaitingPayment || t.Status.Status == domain.TopUpPaymentDetected)
}

func (t *topUp) refreshPaymentStatus(ctx workflow.Context) string {
	if !t.awaiting() {
		return ""
	}
	want := domain.TopUpAwaitingPayment
	if len(t.Payments.Pending) > 0 {
		want = domain.TopUpPaymentDetected
	}
	if want == t.Status.Status {
		return ""
	}
	t.setStatus(ctx, want)
	return want
}

// record writes one timeline event; the caller holds mu.
func (t *topUp) record(ctx workflow.Context, ev activities.TopUpEvent) error {
	var a *activities.Activities
	ev.TopUpRef = t.in.TopUpRef
	ev.At = workflow.Now(ctx).UTC()
	received := t.Status.ReceivedCents
	ev.ReceivedCents = &received
	t.sa.flush(ctx)
	if t.batch {
		t.later = append(t.later, ev)
		return nil
	}
	return execTimeline(ctx, t.v, a.RecordTopUpEvent, ev)
}

func (t *topUp) startBatch() { t.batch = true }

// flushBatch writes the batch's events in one local activity.
func (t *topUp) flushBatch(ctx workflow.Context) error {
	var a *activities.Activities
	t.batch = false
	var err error
	if len(t.later) > 0 {
		evs := t.later
		t.later = nil
		err = execTimeline(ctx, t.v, a.RecordTopUpEvents, evs)
	}
	t.full = t.full || historyFull(ctx, t.v, t.maxHist)
	return err
}

func (t *topUp) ledger() *paymentLedger { return t.Payments }
func (t *topUp) targetKind() string     { return domain.TargetTopUp }
func (t *topUp) ref() string            { return t.in.TopUpRef }

func (t *topUp) listenPayments(ctx workflow.Context) {
	listenPayments(ctx, t.v, t.mu, &t.signalsBusy, t)
}

func (t *topUp) onSeen(ctx workflow.Context, p PaymentEvent) error {
	if stale, err := t.Payments.ordered(ctx, t.v, p, t.revertConfirmed); stale || err != nil {
		return err
	}
	eventKey, ok := t.Payments.seen(p.Key(), p.Late)
	if !ok {
		return nil
	}
	t.sa.notePayment(ctx, p)
	ev := activities.TopUpEvent{Key: eventKey, Kind: domain.EventPaymentSeen, Data: paymentData(p)}
	switch {
	case p.Late:
		ev.Message = "Paiement détecté après l'échéance de la demande de paiement : il sera examiné par le support."
	case t.awaiting():
		ev.Message = fmt.Sprintf("Paiement détecté sur le réseau %s : en attente de confirmation.", p.Network)
		ev.Status = t.refreshPaymentStatus(ctx)
	default:
		ev.Message = "Paiement supplémentaire détecté alors que la recharge n'attend plus de paiement : il sera examiné par le support."
	}
	return t.record(ctx, ev)
}

func (t *topUp) onReverted(ctx workflow.Context, p PaymentEvent) error {
	key := p.Key()
	if p.AfterConfirmation && t.v >= vReversalOrder && p.Reversals > 0 {
		counted := t.Payments.Counted[key]
		stale, err := t.Payments.ordered(ctx, t.v, p, t.revertConfirmed)
		if stale || err != nil || counted {
			return err
		}
		// Never counted here (its confirmation was not delivered): the
		// pending payment is dropped below.
	} else if t.Payments.Counted[key] && t.v >= vReorgDust {
		return t.revertConfirmed(ctx, p)
	}
	if t.Payments.Counted[key] {
		workflow.GetLogger(ctx).Warn("confirmed payment reverted", "key", key)
		data := paymentData(p)
		data["after_confirmation"] = true
		return t.record(ctx, activities.TopUpEvent{
			Key: domain.KeyRevertedConfirmed(key), Kind: domain.EventPaymentReverted, Data: data,
			Message: "Un paiement déjà confirmé a été annulé par le réseau : le support est prévenu.",
		})
	}
	eventKey, ok := t.Payments.reverted(key)
	if !ok {
		return nil
	}
	return t.record(ctx, activities.TopUpEvent{
		Key: eventKey, Kind: domain.EventPaymentReverted, Data: paymentData(p),
		Message: "Paiement annulé par le réseau avant sa confirmation : il n'est pas compté.",
		Status:  t.refreshPaymentStatus(ctx),
	})
}

func (t *topUp) onConfirmed(ctx workflow.Context, p PaymentEvent) error {
	if stale, err := t.Payments.ordered(ctx, t.v, p, t.revertConfirmed); stale || err != nil {
		return err
	}
	key := p.Key()
	if !t.Payments.confirm(key) {
		return nil // already counted: a watcher re-sent it
	}
	t.sa.notePayment(ctx, p)
	data := paymentData(p)
	ekey := t.Payments.qkey(key)
	ev := activities.TopUpEvent{Key: domain.KeyConfirmed(ekey), Kind: domain.EventPaymentConfirmed, Data: data}
	if gen := t.Payments.Gen[key]; gen > 0 {
		// Mined again after its reversal: this generation counts once.
		data["generation"] = gen
		ev.Reversal = &domain.Reversal{PaymentKey: genKey(key, gen-1), Remined: true}
		if _, ok := t.Remined[ev.Reversal.PaymentKey]; ok {
			return t.reminedCredited(ctx, p, ekey, ev)
		}
	}
	switch {
	case !t.awaiting():
		// Already covered (or closed): never credited twice; it waits in
		// support's queue to be refunded.
		data["to_support"] = true
		ev.Exceptions = []domain.NewException{newException(domain.ExceptionExtra, ekey, p, p.AmountCents)}
		ev.Message = fmt.Sprintf("Paiement supplémentaire confirmé (%s) alors que la recharge n'attend plus de paiement : il n'est pas crédité ; le support vous le remboursera sur votre solde.", usd(p.AmountCents))
		return t.record(ctx, ev)
	case p.Late:
		data["to_support"] = true
		ev.Exceptions = []domain.NewException{newException(domain.ExceptionLate, ekey, p, p.AmountCents)}
		ev.Message = fmt.Sprintf("Paiement confirmé après l'échéance de la demande de paiement (%s) : il est transmis au support, qui l'attribuera à votre recharge ou vous le remboursera sur votre solde.", usd(p.AmountCents))
		ev.Status = t.refreshPaymentStatus(ctx)
		return t.record(ctx, ev)
	}
	return t.count(ctx, ekey, &p, p.AmountCents, ev, fmt.Sprintf("Paiement confirmé (%s).", usd(p.AmountCents)))
}

// count adds a confirmed or attributed amount; the main flow credits once
// the amount is covered. p is the received payment counted (nil for an
// attribution): what it brings above the amount goes to support's queue.
// The caller holds mu.
func (t *topUp) count(ctx workflow.Context, key string, p *PaymentEvent, cents int64, ev activities.TopUpEvent, message string) error {
	qkey := key
	if p != nil {
		key = p.Key()
	}
	t.Status.ReceivedCents += cents
	t.Status.PaymentsConfirmed = append(t.Status.PaymentsConfirmed, key)
	ev.Message = message
	missing := t.in.AmountCents - t.Status.ReceivedCents
	if p != nil {
		t.Counted = append(t.Counted, countedPayment{P: *p, Cents: cents + min(missing, 0), QKey: qkeyIfGen(qkey, *p)})
	}
	if missing <= 0 {
		t.Due = true
		if missing < 0 {
			ev.Data["overpaid_cents"] = -missing
			ev.Message += fmt.Sprintf(" Le montant reçu dépasse la recharge de %s : l'excédent est transmis au support, qui vous le remboursera sur votre solde.", usd(-missing))
			if p != nil {
				ev.Exceptions = append(ev.Exceptions, newException(domain.ExceptionOver, qkey, *p, -missing))
			}
		}
		return t.record(ctx, ev)
	}
	ev.Status = t.refreshPaymentStatus(ctx)
	if err := t.record(ctx, ev); err != nil {
		return err
	}
	return t.record(ctx, activities.TopUpEvent{
		Key:  domain.KeyPartial(qkey),
		Kind: domain.EventPaymentPartial,
		Message: fmt.Sprintf("Paiement partiel : il manque %s pour créditer la recharge. Complétez le paiement avant l'échéance de la demande de paiement.",
			usd(missing)),
		Data: map[string]any{"missing_cents": missing, "received_cents": t.Status.ReceivedCents, "amount_cents": t.in.AmountCents},
	})
}

func (t *topUp) validateAttribution(at Attribution) error {
	if err := at.Validate(); err != nil {
		return refusal(err)
	}
	if t.Actions[at.ActionID] {
		return nil
	}
	if !t.awaiting() {
		return reject(domain.ECodeConflict, "La recharge n'attend plus de paiement.")
	}
	return refusal(domain.CheckAttribution(at.AmountCents, t.in.AmountCents-t.Status.ReceivedCents))
}

// attributePayment counts a payment support vouches for (see the rental's).
func (t *topUp) attributePayment(ctx workflow.Context, at Attribution) error {
	if err := t.mu.Lock(ctx); err != nil {
		return errUnavailable()
	}
	defer t.mu.Unlock()
	if err := t.validateAttribution(at); err != nil || t.Actions[at.ActionID] {
		return err
	}
	if err := checkAction(ctx, t.v, UpdateAttributePayment, at.Claim(t.in.TopUpRef)); err != nil {
		return err
	}
	due := t.in.AmountCents - t.Status.ReceivedCents
	amount := at.AmountCents
	if amount == 0 {
		amount = due
	}
	key := domain.KeyAttribution(at.ActionID)
	ev := activities.TopUpEvent{
		Key: domain.KeyConfirmed(key), Kind: domain.EventPaymentConfirmed,
		Data: map[string]any{"key": key, "amount_cents": amount, "attributed_by": at.Agent},
	}
	if at.ExceptionID > 0 {
		c, use, err := countException(ctx, t.v, at, t.in.TopUpRef, due, ev.Data)
		if err != nil {
			return err
		}
		ev.Use = use
		amount = c.Cents
		t.Counted = addCounted(t.Counted, c)
	}
	t.Actions[at.ActionID] = true
	t.Payments.confirm(key)
	data := supportData(domain.ActionAttributePayment, at.ActionID, at.Agent, at.Reason)
	data["amount_cents"] = amount
	if err := t.record(ctx, activities.TopUpEvent{
		Key: domain.KeySupport(at.ActionID, domain.ActionAttributePayment), Kind: domain.EventSupportAction,
		Message: fmt.Sprintf("Le support a attribué un paiement de %s à la recharge.", usd(amount)), Data: data,
	}); err != nil {
		return errUnavailable()
	}
	if err := t.count(ctx, key, nil, amount, ev, fmt.Sprintf("Paiement attribué par le support (%s).", usd(amount))); err != nil {
		return asRefusal(err, "L'attribution n'a pas abouti. Réessayez plus tard.")
	}
	return nil
}

func (t *topUp) validateCancel(req CancelRequest) error {
	if req.ActionID > 0 && t.Actions[req.ActionID] {
		return nil
	}
	// Only an untouched top-up: once money is on its way, support decides.
	if !t.awaiting() || t.Status.Status != domain.TopUpAwaitingPayment || t.Status.ReceivedCents > 0 {
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
	t.Done = true
	t.setStatus(ctx, domain.TopUpCancelled)
	msg := "Recharge annulée."
	if req.ActionID > 0 {
		t.Actions[req.ActionID] = true
		msg = "Recharge annulée par le support."
		if err := t.record(ctx, activities.TopUpEvent{
			Key: domain.KeySupport(req.ActionID, domain.ActionCancel), Kind: domain.EventSupportAction,
			Message: msg, Data: supportData(domain.ActionCancel, req.ActionID, req.Agent, req.Reason),
		}); err != nil {
			return errUnavailable()
		}
	}
	if err := t.record(ctx, activities.TopUpEvent{
		Key: domain.KeyCancelled, Kind: domain.EventCancelled, Status: domain.TopUpCancelled, Message: msg,
		Data: map[string]any{"by": req.By, "reason": req.Reason},
	}); err != nil {
		return errUnavailable()
	}
	return nil
}
