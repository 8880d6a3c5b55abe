package workflows

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// RentalWorkflow drives one order: payment, provisioning, the rental period
// with its reminders, then teardown. Chain watchers report payments through
// signals; the customer and support act through validated updates.
func RentalWorkflow(ctx workflow.Context, in RentalInput) (RentalStatus, error) {
	r := newRental(ctx, in)
	r.v = historyVersion(ctx)
	r.sa.V = r.v
	if in.Carry != nil {
		r.restore(in.Carry)
	}
	if err := r.setup(ctx); err != nil {
		return r.Status, err
	}
	return r.run(ctx)
}

// RentalState is a rental's whole state, in one serializable value: a run
// that continues as new passes it as it is to the next. Its JSON names are
// those of the carry of earlier releases, so their continuations still
// read.
type RentalState struct {
	// Resume is the waiting point the next run starts at (carry.go).
	Resume string `json:"Phase"`
	// Status is what the status query answers; Status.Status is the phase.
	Status   RentalStatus
	Payments *paymentLedger
	Actions  map[int64]bool  // support actions applied: a re-sent update is a no-op
	Reminded map[string]bool // reminder keys sent
	// Paid: the amount due is covered.
	Paid bool
	// SupportPaid: an attribution took part in the payment.
	SupportPaid bool
	// ProvStarted: provisioning started, so a payment reverted now is
	// flagged for support (vReorgDust).
	ProvStarted bool
	// Done: closed by a handler or the deadline (cancelled, expired,
	// refunded).
	Done bool
	// Retry: support asked to retry provisioning.
	Retry bool
	// EndNow: support asked to end the period now.
	EndNow bool
	// Attempt is the provisioning attempt, part of the step event keys.
	Attempt int
	// ExtraDays are extensions granted before the period started.
	ExtraDays int
	// Intents counts the payment requests asked for, part of their keys.
	Intents int
	// End is the end of the rental period.
	End time.Time
	// PayUntil is the end of the payment window: no payment request
	// outlives it.
	PayUntil time.Time
	// Counted are the received payments counted toward the order: they go
	// back to support's queue if the order expires unpaid.
	Counted []countedPayment
	// Over is the part of PaidCents above the total, queued for support
	// (refundable from the queue only, never by the order's refund).
	Over int64
	// OverRefundable: a refund replayed from before "refund-over" (when
	// the excess could be refunded twice, here and from the queue).
	OverRefundable bool
	// Shortfalls are, per reverted payment generation (vRefundShortfall),
	// the order refunds paid out on the strength of it: ShortfallCents in
	// all. Its confirmation mined again backs them again.
	Shortfalls map[string]int64 `json:",omitempty"`
	// Asset and Network of the payment, as the search attributes have them.
	Asset, Network string
	// Runs counts the runs before this one.
	Runs int
}

// rental is one RentalWorkflow run: its state and what lives only while
// the run does. Every state change and the timeline events that go with it
// happen under mu, so that signal and update handlers, which interleave at
// each activity call, never see a half-applied change (for instance a
// crypto confirmation racing a balance debit).
type rental struct {
	RentalState
	in  RentalInput
	cfg RentalConfig // with defaults applied
	mu  workflow.Mutex
	v   workflow.Version // command version (historyVersion)
	sa  searchAttrs
	// later are events written with the next timeline write (later).
	later []activities.OrderEvent
	// wake tells the period loop that the end moved or was requested.
	wake workflow.Channel

	batch       bool // payment signals being handled in one batch (vReorgDust)
	full        bool // the history passed its bound: continue as new at the next waiting point
	resumeProv  bool // this run continues a provisioning failure waiting for support
	balanceBusy bool // a pay-from-balance debit is running
	closing     bool // a closing refund is running
	signalsBusy int  // payment signals being processed
}

func newRental(ctx workflow.Context, in RentalInput) *rental {
	cfg := in.Config
	if cfg.UnpaidTimeout <= 0 {
		cfg.UnpaidTimeout = DefaultUnpaidTimeout
	}
	if cfg.ReminderOffsets == nil {
		cfg.ReminderOffsets = append([]time.Duration(nil), DefaultReminderOffsets...)
	}
	if cfg.ProvisioningAttempts <= 0 {
		cfg.ProvisioningAttempts = DefaultProvisioningAttempts
	}
	if cfg.Day <= 0 {
		cfg.Day = 24 * time.Hour
	}
	if cfg.MaxHistory <= 0 {
		cfg.MaxHistory = DefaultMaxHistory
	}
	return &rental{
		RentalState: RentalState{
			Status:     RentalStatus{OrderRef: in.OrderRef, Status: string(PhaseAwaitingPayment)},
			PayUntil:   workflow.GetInfo(ctx).WorkflowStartTime.Add(cfg.UnpaidTimeout),
			Payments:   newPaymentLedger(),
			Actions:    map[int64]bool{},
			Reminded:   map[string]bool{},
			Shortfalls: map[string]int64{},
		},
		in:   in,
		cfg:  cfg,
		mu:   workflow.NewMutex(ctx),
		wake: workflow.NewBufferedChannel(ctx, 1),
	}
}

func (r *rental) setup(ctx workflow.Context) error {
	attrs := []temporal.SearchAttributeUpdate{
		saKeyRef.ValueSet(r.in.OrderRef),
		saKeyCustomer.ValueSet(strconv.FormatInt(r.in.AccountID, 10)),
		saKeyStatus.ValueSet(r.Status.Status),
		saKeyGPU.ValueSet(r.in.GPUModel),
		saKeyKind.ValueSet("rental"),
	}
	if r.sa.Asset != "" {
		attrs = append(attrs, saKeyAsset.ValueSet(r.sa.Asset), saKeyNetwork.ValueSet(r.sa.Network))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, attrs...); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (RentalStatus, error) {
		st := r.Status
		st.RefundableCents = r.refundable()
		return st, nil
	}); err != nil {
		return err
	}
	updates := []struct {
		name      string
		handler   any
		validator any
	}{
		{UpdatePayFromBalance, r.payFromBalance, r.validatePayFromBalance},
		{UpdateAttributePayment, r.attributePayment, r.validateAttribution},
		{UpdateCancel, r.cancel, r.validateCancel},
		{UpdateExtend, r.extend, r.validateExtend},
		{UpdateEndEarly, r.endEarly, r.validateEndEarly},
		{UpdateRetryProvisioning, r.retryProvisioning, r.validateRetry},
		{UpdateRefund, r.refund, r.validateRefund},
		{UpdateCreatePaymentIntent, r.createPaymentIntent, r.validateCreateIntent},
	}
	for _, u := range updates {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, u.name, u.handler,
			workflow.UpdateHandlerOptions{Validator: u.validator}); err != nil {
			return err
		}
	}
	workflow.Go(ctx, r.listenPayments)
	return nil
}

func (r *rental) run(ctx workflow.Context) (RentalStatus, error) {
	phase := phasePayment
	if r.in.Carry != nil {
		phase = r.in.Carry.Resume
	}
	switch phase {
	case phasePeriod:
		return r.period(ctx)
	case phaseProvisioningFailed:
		r.resumeProv = true
		return r.provisionAndRun(ctx)
	}
	for {
		if err := r.awaitPayment(ctx); err != nil {
			return r.Status, err
		}
		if r.Done {
			return r.finish(ctx)
		}
		// Not paid any more: a payment was reverted after its confirmation
		// before provisioning could start.
		paid, err := r.recordPaid(ctx)
		if err != nil {
			return r.Status, err
		}
		if paid {
			break
		}
	}
	return r.provisionAndRun(ctx)
}

// provisionAndRun provisions the machine, then runs the period.
func (r *rental) provisionAndRun(ctx workflow.Context) (RentalStatus, error) {
	access, ready, err := r.provision(ctx)
	if err != nil {
		return r.Status, err
	}
	if !ready {
		return r.finish(ctx)
	}
	if err := r.startPeriod(ctx, access); err != nil {
		return r.Status, err
	}
	return r.period(ctx)
}

// period runs the rental period, then the teardown.
func (r *rental) period(ctx workflow.Context) (RentalStatus, error) {
	if err := r.runPeriod(ctx); err != nil {
		return r.Status, err
	}
	if err := r.teardown(ctx); err != nil {
		return r.Status, err
	}
	return r.finish(ctx)
}

// finish lets running handlers complete, so no caller sees its update lost
// and no timeline write is cut short.
func (r *rental) finish(ctx workflow.Context) (RentalStatus, error) {
	err := workflow.Await(ctx, func() bool {
		return workflow.AllHandlersFinished(ctx) && r.signalsBusy == 0
	})
	return r.Status, err
}

// --- state and timeline helpers ---

// unpaid reports whether the order still accepts payments toward its total.
func (r *rental) unpaid() bool {
	return !r.Paid && !r.Done &&
		(r.Status.Status == domain.StatusAwaitingPayment || r.Status.Status == domain.StatusPaymentDetected)
}

func (r *rental) netPaid() int64 { return r.Status.PaidCents - r.refundedBacked() }

// refundedBacked is what the order's refunds took from the payments still
// counted: refunds paid out on payments a reorganisation removed since
// (the shortfall, support's to recover) are not owed again by the order.
func (r *rental) refundedBacked() int64 { return r.Status.RefundedCents - r.Status.ShortfallCents }

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

// record writes one timeline event, after those kept by writeLater; the
// caller holds mu.
func (r *rental) record(ctx workflow.Context, ev activities.OrderEvent) error {
	var a *activities.Activities
	ev.OrderRef = r.in.OrderRef
	ev.At = workflow.Now(ctx).UTC()
	r.sa.flush(ctx)
	if r.batch {
		r.later = append(r.later, ev)
		return nil
	}
	if len(r.later) == 0 {
		return execTimeline(ctx, r.v, a.RecordOrderEvent, ev)
	}
	evs := append(r.later, ev)
	r.later = nil
	return execTimeline(ctx, r.v, a.RecordOrderEvents, evs)
}

func (r *rental) startBatch() { r.batch = true }

// flushBatch writes the batch's events in one local activity.
func (r *rental) flushBatch(ctx workflow.Context) error {
	var a *activities.Activities
	r.batch = false
	var err error
	if len(r.later) > 0 {
		evs := r.later
		r.later = nil
		err = execTimeline(ctx, r.v, a.RecordOrderEvents, evs)
	}
	if !r.full && historyFull(ctx, r.v, r.cfg.MaxHistory) {
		r.full = true
		r.wake.SendAsync(struct{}{}) // the period loop continues as new
	}
	return err
}

// writeLater keeps ev for the next timeline write, which the caller makes
// before blocking on anything else (vLocalTimeline: one write for both);
// before, it is written at once. The caller holds mu.
func (r *rental) writeLater(ctx workflow.Context, ev activities.OrderEvent) error {
	if r.v < vLocalTimeline {
		return r.record(ctx, ev)
	}
	ev.OrderRef = r.in.OrderRef
	ev.At = workflow.Now(ctx).UTC()
	r.later = append(r.later, ev)
	return nil
}

func (r *rental) recordLocked(ctx workflow.Context, ev activities.OrderEvent) error {
	if err := r.mu.Lock(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	return r.record(ctx, ev)
}

// recordSupport writes the audit entry of a support action.
func (r *rental) recordSupport(ctx workflow.Context, action string, id int64, agent, reason, message string, extra map[string]any) error {
	data := supportData(action, id, agent, reason)
	for k, v := range extra {
		data[k] = v
	}
	return r.record(ctx, activities.OrderEvent{
		Key:     domain.KeySupport(id, action),
		Kind:    domain.EventSupportAction,
		Message: message,
		Data:    data,
	})
}

// --- payments (signals) ---

func (r *rental) ledger() *paymentLedger { return r.Payments }
func (r *rental) targetKind() string     { return domain.TargetOrder }
func (r *rental) ref() string            { return r.in.OrderRef }

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

// --- provisioning ---

// provision runs the provisioning steps until they succeed (ready) or support
// refunds the order (not ready). A failed attempt waits for support.
func (r *rental) provision(ctx workflow.Context) (activities.AccessSummary, bool, error) {
	for {
		var access activities.AccessSummary
		if !r.resumeProv {
			r.Attempt++
			var step string
			var stepErr, err error
			access, step, stepErr, err = r.provisionOnce(ctx)
			if err != nil {
				return access, false, err
			}
			if stepErr == nil {
				return access, true, nil
			}
			if err := r.provisioningFailed(ctx, step, stepErr); err != nil {
				return access, false, err
			}
		}
		r.resumeProv = false
		if err := workflow.Await(ctx, func() bool { return r.Retry || r.Done || r.full }); err != nil {
			return access, false, err
		}
		if r.full && !r.Retry && !r.Done {
			return access, false, r.continueAsNew(ctx, phaseProvisioningFailed)
		}
		if r.Done {
			return access, false, nil
		}
		r.Retry = false
	}
}

// provisionOnce runs the four steps once. stepErr is a step that failed after
// its retries (handed to support); err is a workflow-level failure.
func (r *rental) provisionOnce(ctx workflow.Context) (access activities.AccessSummary, step string, stepErr, err error) {
	var a *activities.Activities
	mctx := machineCtx(ctx, r.cfg.ProvisioningAttempts)
	var verification activities.Verification
	steps := []struct {
		name, startMsg string
		run            func() (doneMsg string, data map[string]any, err error)
	}{
		{"reserve", fmt.Sprintf("Réservation de %d GPU %s en cours.", r.in.TotalGPUs, r.in.GPUModel), func() (string, map[string]any, error) {
			err := workflow.ExecuteActivity(mctx, a.ReserveCapacity, activities.ReserveInput{
				OrderRef: r.in.OrderRef, GPUModel: r.in.GPUModel, GPUs: r.in.TotalGPUs,
			}).Get(ctx, nil)
			return "Capacité réservée.", nil, err
		}},
		{"prepare", fmt.Sprintf("Préparation de l'environnement (%s) en cours.", r.in.Preset), func() (string, map[string]any, error) {
			err := workflow.ExecuteActivity(mctx, a.PreparePreset, activities.PrepareInput{
				OrderRef: r.in.OrderRef, Preset: r.in.Preset,
			}).Get(ctx, nil)
			return "Environnement préparé.", map[string]any{"preset": r.in.Preset}, err
		}},
		{"verify", "Vérification de la machine en cours.", func() (string, map[string]any, error) {
			err := workflow.ExecuteActivity(mctx, a.VerifyMachine, activities.VerifyInput{
				OrderRef: r.in.OrderRef, GPUModel: r.in.GPUModel, GPUs: r.in.TotalGPUs,
			}).Get(ctx, &verification)
			v := verification
			return fmt.Sprintf("Machine vérifiée : %d GPU %s détectés, pilote %s, CUDA %s.", v.GPUCount, v.GPUModel, v.DriverVersion, v.CUDAVersion),
				map[string]any{
					"gpu_model_seen": v.GPUModel, "gpu_count_seen": v.GPUCount,
					"driver_version": v.DriverVersion, "cuda_version": v.CUDAVersion, "notes": v.Notes,
				}, err
		}},
		{"access", "Création des accès en cours.", func() (string, map[string]any, error) {
			err := workflow.ExecuteActivity(mctx, a.CreateAccess, activities.CreateAccessInput{
				OrderRef: r.in.OrderRef, Verification: verification,
			}).Get(ctx, &access)
			return "Accès créés.", nil, err
		}},
	}
	for _, s := range steps {
		prefix := domain.KeyProvisioning(r.Attempt, s.name)
		if err := r.recordStep(ctx, prefix+":start", s.name, s.startMsg, nil); err != nil {
			return access, s.name, nil, err
		}
		doneMsg, data, serr := s.run()
		if serr != nil {
			if ctx.Err() != nil {
				return access, s.name, nil, ctx.Err()
			}
			return access, s.name, serr, nil
		}
		// Written with the next step's (or the access's) event.
		if err := r.recordStep(ctx, prefix+":done", s.name, doneMsg, data); err != nil {
			return access, s.name, nil, err
		}
	}
	return access, "", nil, nil
}

func (r *rental) recordStep(ctx workflow.Context, key, step, message string, data map[string]any) error {
	if err := r.mu.Lock(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	if data == nil {
		data = map[string]any{}
	}
	data["step"] = step
	data["attempt"] = r.Attempt
	ev := activities.OrderEvent{Key: key, Kind: domain.EventProvisioningStep, Message: message, Data: data}
	if r.Status.Status != domain.StatusProvisioning {
		r.transition(ctx, PhaseProvisioning)
		ev.Status = domain.StatusProvisioning
	}
	if strings.HasSuffix(key, ":done") {
		return r.writeLater(ctx, ev)
	}
	return r.record(ctx, ev)
}

var stepLabels = map[string]string{
	"reserve": "réservation de la capacité",
	"prepare": "préparation de l'environnement",
	"verify":  "vérification de la machine",
	"access":  "création des accès",
}

func (r *rental) provisioningFailed(ctx workflow.Context, step string, stepErr error) error {
	if err := r.mu.Lock(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	msg := failureMessage(stepErr)
	r.Status.ProvisioningError = msg
	r.transition(ctx, PhaseProvisioningFailed)
	return r.record(ctx, activities.OrderEvent{
		Key:  domain.KeyProvisioning(r.Attempt, "failed"),
		Kind: domain.EventProvisioningFailed,
		Message: fmt.Sprintf("La préparation de la machine a échoué (%s). Le support est prévenu : il relancera la préparation ou vous remboursera.",
			stepLabels[step]),
		Data:   map[string]any{"step": step, "attempt": r.Attempt, "error": msg},
		Status: domain.StatusProvisioningFailed,
	})
}

// --- rental period ---

func (r *rental) startPeriod(ctx workflow.Context, access activities.AccessSummary) error {
	if err := r.mu.Lock(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	start := workflow.Now(ctx).UTC()
	r.End = start.Add(time.Duration(r.in.DurationDays+r.ExtraDays) * r.cfg.Day)
	r.Status.PeriodStart, r.Status.PeriodEnd = start, r.End
	r.Status.ProvisioningError = ""
	r.transition(ctx, PhaseActive)
	return r.record(ctx, activities.OrderEvent{
		Key:  "access",
		Kind: domain.EventAccessAvailable,
		Message: fmt.Sprintf("Machine prête : les accès sont disponibles. Votre location court du %s au %s.",
			frDate(start), frDate(r.End)),
		// No secret here: the password stays in the database.
		Data: map[string]any{
			"host": access.Host, "port": access.Port, "username": access.Username,
			"duration_days": r.in.DurationDays, "extra_days": r.ExtraDays,
		},
		Status:      domain.StatusActive,
		PeriodStart: ptrTo(start),
		PeriodEnd:   ptrTo(r.End),
	})
}

type reminder struct {
	key    string
	at     time.Time // when it is due
	end    time.Time // the end it announces
	offset time.Duration
}

// runPeriod waits for the end of the period, sending reminders on the way.
// Timers live in a child context cancelled and re-armed whenever the end moves.
func (r *rental) runPeriod(ctx workflow.Context) error {
	for !r.EndNow && workflow.Now(ctx).Before(r.End) {
		if r.full {
			return r.continueAsNew(ctx, phasePeriod)
		}
		now := workflow.Now(ctx)
		tctx, cancelTimers := workflow.WithCancel(ctx)
		sel := workflow.NewSelector(ctx)
		ended, moved := false, false
		var due []reminder
		sel.AddFuture(workflow.NewTimer(tctx, r.End.Sub(now)), func(f workflow.Future) {
			ended = f.Get(tctx, nil) == nil
		})
		for _, off := range r.cfg.ReminderOffsets {
			rem := reminder{
				key: fmt.Sprintf("reminder:%d:%s", r.End.Unix(), off), at: r.End.Add(-off), end: r.End, offset: off,
			}
			if rem.at.Before(now) || r.Reminded[rem.key] {
				continue // too late for this one, or already sent for this end
			}
			sel.AddFuture(workflow.NewTimer(tctx, rem.at.Sub(now)), func(f workflow.Future) {
				if f.Get(tctx, nil) == nil {
					due = append(due, rem)
				}
			})
		}
		sel.AddReceive(r.wake, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			moved = true
		})
		for !ended && !moved {
			sel.Select(ctx)
			if err := ctx.Err(); err != nil {
				cancelTimers()
				return err
			}
			for _, rem := range due {
				if err := r.sendReminder(ctx, rem); err != nil {
					cancelTimers()
					return err
				}
			}
			due = nil
		}
		cancelTimers()
	}
	// Synchronously with the loop exit, so no update sees an active rental
	// whose teardown has begun.
	r.transition(ctx, PhaseEnding)
	return nil
}

func (r *rental) sendReminder(ctx workflow.Context, rem reminder) error {
	if err := r.mu.Lock(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	if r.Reminded[rem.key] || r.EndNow || !rem.end.Equal(r.End) {
		return nil // the end moved while waiting for the lock
	}
	r.Reminded[rem.key] = true
	r.Status.RemindersSent = append(r.Status.RemindersSent, rem.at)
	return r.record(ctx, activities.OrderEvent{
		Key:  rem.key,
		Kind: domain.EventReminderSent,
		Message: fmt.Sprintf("Rappel : votre location se termine le %s ; exportez vos résultats et checkpoints avant cette échéance, puis vérifiez votre copie.",
			frDate(rem.end)),
		Data: map[string]any{"period_end": rem.end, "offset": rem.offset.String()},
	})
}

// teardown revokes access, then wipes and releases the machine. Both retry
// without limit: a machine must never stay reachable after the period.
func (r *rental) teardown(ctx workflow.Context) error {
	var a *activities.Activities
	endedAt := workflow.Now(ctx).UTC()
	mctx := machineCtx(ctx, 0)
	if err := workflow.ExecuteActivity(mctx, a.RevokeAccess, r.in.OrderRef).Get(ctx, nil); err != nil {
		return err
	}
	if err := r.recordLocked(ctx, activities.OrderEvent{
		Key: domain.KeyRevoked, Kind: domain.EventAccessRevoked, Status: domain.StatusEnding,
		Message: "Période terminée : les accès sont révoqués.",
	}); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(mctx, a.ReleaseCapacity, r.in.OrderRef).Get(ctx, nil); err != nil {
		return err
	}
	if err := r.mu.Lock(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	r.Status.EndedAt = endedAt
	r.transition(ctx, PhaseEnded)
	return r.record(ctx, activities.OrderEvent{
		Key: domain.KeyEnded, Kind: domain.EventEnded, Status: domain.StatusEnded, EndedAt: ptrTo(endedAt),
		Message: "Location terminée : la machine a été effacée et libérée.",
	})
}

// --- updates ---
//
// Validators are pure: they only read the state. Handlers take mu and check
// again, since the state may have changed between validation and the lock.

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

func (r *rental) validateCancel(req CancelRequest) error {
	if req.ActionID > 0 && r.Actions[req.ActionID] {
		return nil
	}
	if r.Status.Status == domain.StatusProvisioningFailed && req.ActionID > 0 && !r.Retry && !r.closing {
		// Support's way to close an order whose machine cannot be prepared
		// and that holds no received money (paid by an attribution alone):
		// otherwise a refund of what is refundable closes it.
		if r.refundable() > 0 {
			return reject(domain.ECodeConflict, "Un montant reçu reste remboursable : remboursez-le pour clore la commande.")
		}
		return nil
	}
	switch {
	case !r.unpaid():
		return reject(domain.ECodeConflict, "La commande ne peut plus être annulée : elle n'est plus en attente de paiement.")
	case r.balanceBusy:
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
	if r.Status.Status == domain.StatusProvisioningFailed {
		// Whatever the failed attempt reserved is given back first.
		var a *activities.Activities
		if err := workflow.ExecuteActivity(machineCtx(ctx, 0), a.ReleaseCapacity, r.in.OrderRef).Get(ctx, nil); err != nil {
			return errUnavailable()
		}
	}
	r.Done = true
	r.transition(ctx, PhaseCancelled)
	msg := "Commande annulée."
	if req.ActionID > 0 {
		r.Actions[req.ActionID] = true
		msg = "Commande annulée par le support."
		if err := r.recordSupport(ctx, domain.ActionCancel, req.ActionID, req.Agent, req.Reason, msg, nil); err != nil {
			return errUnavailable()
		}
	}
	if err := r.record(ctx, activities.OrderEvent{
		Key: domain.KeyCancelled, Kind: domain.EventCancelled, Status: domain.StatusCancelled, Message: msg,
		Data: map[string]any{"by": req.By, "reason": req.Reason},
	}); err != nil {
		return errUnavailable()
	}
	return nil
}

func (r *rental) validateExtend(e Extension) error {
	if err := e.Validate(); err != nil {
		return refusal(err)
	}
	if r.Actions[e.ActionID] {
		return nil
	}
	switch r.Status.Status {
	case domain.StatusPaid, domain.StatusProvisioning, domain.StatusProvisioningFailed:
		if !r.closing {
			return nil
		}
	case domain.StatusActive:
		if !r.EndNow {
			return nil
		}
	}
	return reject(domain.ECodeConflict, "La location ne peut pas être prolongée dans son état actuel.")
}

func (r *rental) extend(ctx workflow.Context, e Extension) error {
	if err := r.mu.Lock(ctx); err != nil {
		return errUnavailable()
	}
	defer r.mu.Unlock()
	if err := r.validateExtend(e); err != nil || r.Actions[e.ActionID] {
		return err
	}
	if err := checkAction(ctx, r.v, UpdateExtend, e.Claim(r.in.OrderRef)); err != nil {
		return err
	}
	r.Actions[e.ActionID] = true
	ev := activities.OrderEvent{
		Key: domain.KeyExtend(e.ActionID), Kind: domain.EventExtended,
		Data: map[string]any{"days": e.Days, "agent": e.Agent, "reason": e.Reason},
	}
	if r.Status.Status == domain.StatusActive {
		r.End = r.End.Add(time.Duration(e.Days) * r.cfg.Day)
		r.Status.PeriodEnd = r.End
		r.wake.SendAsync(struct{}{}) // re-arm the end and reminder timers
		ev.PeriodEnd = ptrTo(r.End)
		ev.Message = fmt.Sprintf("Location prolongée de %d jour(s) : nouvelle fin le %s.", e.Days, frDate(r.End))
	} else {
		r.ExtraDays += e.Days
		ev.Message = fmt.Sprintf("Location prolongée de %d jour(s) : ils s'ajoutent à la période, qui commence quand la machine est prête.", e.Days)
	}
	if err := r.recordSupport(ctx, domain.ActionExtend, e.ActionID, e.Agent, e.Reason,
		fmt.Sprintf("Le support a prolongé la location de %d jour(s).", e.Days), map[string]any{"days": e.Days}); err != nil {
		return errUnavailable()
	}
	if err := r.record(ctx, ev); err != nil {
		return errUnavailable()
	}
	return nil
}

func (r *rental) validateEndEarly(a SupportAction) error {
	if err := a.Validate(); err != nil {
		return refusal(err)
	}
	if r.Actions[a.ActionID] {
		return nil
	}
	if r.Status.Status != domain.StatusActive || r.EndNow {
		return reject(domain.ECodeConflict, "Seule une location active peut être terminée par anticipation.")
	}
	return nil
}

func (r *rental) endEarly(ctx workflow.Context, a SupportAction) error {
	if err := r.mu.Lock(ctx); err != nil {
		return errUnavailable()
	}
	defer r.mu.Unlock()
	if err := r.validateEndEarly(a); err != nil || r.Actions[a.ActionID] {
		return err
	}
	if err := checkAction(ctx, r.v, UpdateEndEarly, a.Claim(r.in.OrderRef, domain.ActionEndEarly)); err != nil {
		return err
	}
	r.Actions[a.ActionID] = true
	r.EndNow = true
	r.wake.SendAsync(struct{}{})
	if err := r.recordSupport(ctx, domain.ActionEndEarly, a.ActionID, a.Agent, a.Reason,
		"Le support a mis fin à la location par anticipation.", nil); err != nil {
		return errUnavailable()
	}
	if err := r.record(ctx, activities.OrderEvent{
		Key: domain.KeyEndEarly(a.ActionID), Kind: domain.EventEndRequested,
		Message: "Fin anticipée de la location demandée par le support : les accès vont être révoqués.",
		Data:    map[string]any{"agent": a.Agent, "reason": a.Reason},
	}); err != nil {
		return errUnavailable()
	}
	return nil
}

func (r *rental) validateRetry(a SupportAction) error {
	if err := a.Validate(); err != nil {
		return refusal(err)
	}
	if r.Actions[a.ActionID] {
		return nil
	}
	if r.Status.Status != domain.StatusProvisioningFailed || r.Retry || r.closing {
		return reject(domain.ECodeConflict, "La préparation de la machine n'est pas en échec : rien à relancer.")
	}
	return nil
}

func (r *rental) retryProvisioning(ctx workflow.Context, a SupportAction) error {
	if err := r.mu.Lock(ctx); err != nil {
		return errUnavailable()
	}
	defer r.mu.Unlock()
	if err := r.validateRetry(a); err != nil || r.Actions[a.ActionID] {
		return err
	}
	if err := checkAction(ctx, r.v, UpdateRetryProvisioning, a.Claim(r.in.OrderRef, domain.ActionRetryProvisioning)); err != nil {
		return err
	}
	r.Actions[a.ActionID] = true
	r.Retry = true
	r.transition(ctx, PhaseProvisioning)
	if err := r.recordSupport(ctx, domain.ActionRetryProvisioning, a.ActionID, a.Agent, a.Reason,
		"Le support a relancé la préparation de la machine.", nil); err != nil {
		return errUnavailable()
	}
	if err := r.record(ctx, activities.OrderEvent{
		Key: domain.KeyProvisioning(r.Attempt+1, "retry"), Kind: domain.EventProvisioningRetry,
		Status:  domain.StatusProvisioning,
		Message: "Le support relance la préparation de la machine.",
		Data:    map[string]any{"attempt": r.Attempt + 1, "agent": a.Agent, "reason": a.Reason},
	}); err != nil {
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
	if r.Done || r.closing {
		return reject(domain.ECodeConflict, "La commande est close : un montant reçu en attente se rembourse depuis la file du support.")
	}
	return refusal(domain.CheckRefund(rf.AmountCents, r.refundable()))
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
	r.closing = r.Status.Status == domain.StatusProvisioningFailed && rf.AmountCents == r.refundable()
	if err := r.recordSupport(ctx, domain.ActionRefund, rf.ActionID, rf.Agent, rf.Reason,
		fmt.Sprintf("Le support a remboursé %s sur le solde.", usd(rf.AmountCents)),
		map[string]any{"amount_cents": rf.AmountCents}); err != nil {
		r.Actions[rf.ActionID], r.closing = false, false
		return errUnavailable()
	}
	if r.closing {
		// Whatever the failed attempt reserved is given back first.
		if err := workflow.ExecuteActivity(machineCtx(ctx, 0), a.ReleaseCapacity, r.in.OrderRef).Get(ctx, nil); err != nil {
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
	if r.closing {
		ev.Status = domain.StatusRefunded
		ev.Message += " La commande est close."
	}
	if err := r.record(ctx, ev); err != nil {
		r.Actions[rf.ActionID], r.closing = false, false
		return asRefusal(err, "Le remboursement n'a pas abouti. Réessayez plus tard.")
	}
	r.Status.RefundedCents = refunded
	if r.closing {
		r.Done, r.closing = true, false
		r.transition(ctx, PhaseRefunded)
	}
	return nil
}

// refundV0 replays refunds of rentals started before refunds became one
// transition: the ledger activity, then the event.
func (r *rental) refundV0(ctx workflow.Context, rf Refund) error {
	var a *activities.Activities
	r.Actions[rf.ActionID] = true
	r.closing = r.Status.Status == domain.StatusProvisioningFailed
	if err := r.recordSupport(ctx, domain.ActionRefund, rf.ActionID, rf.Agent, rf.Reason,
		fmt.Sprintf("Le support a remboursé %s sur le solde.", usd(rf.AmountCents)),
		map[string]any{"amount_cents": rf.AmountCents}); err != nil {
		r.Actions[rf.ActionID], r.closing = false, false
		return errUnavailable()
	}
	now := workflow.Now(ctx).UTC()
	if err := workflow.ExecuteActivity(timelineCtx(ctx), a.RefundToBalance, activities.RefundInput{
		Ref: r.in.OrderRef, AccountID: r.in.AccountID, AmountCents: rf.AmountCents,
		ActionID: rf.ActionID, Agent: rf.Agent, Reason: rf.Reason, At: now,
	}).Get(ctx, nil); err != nil {
		r.Actions[rf.ActionID], r.closing = false, false
		return asRefusal(err, "Le remboursement n'a pas abouti. Réessayez plus tard.")
	}
	r.Status.RefundedCents += rf.AmountCents
	ev := activities.OrderEvent{
		Key: domain.KeyRefund(rf.ActionID), Kind: domain.EventRefunded,
		Message: fmt.Sprintf("Remboursement de %s crédité sur votre solde.", usd(rf.AmountCents)),
		Data:    map[string]any{"amount_cents": rf.AmountCents, "refunded_cents": r.Status.RefundedCents, "agent": rf.Agent, "reason": rf.Reason},
	}
	if r.closing {
		if err := workflow.ExecuteActivity(machineCtx(ctx, 0), a.ReleaseCapacity, r.in.OrderRef).Get(ctx, nil); err != nil {
			return errUnavailable()
		}
		r.Done, r.closing = true, false
		r.transition(ctx, PhaseRefunded)
		ev.Status = domain.StatusRefunded
		ev.Message += " La commande est close."
	}
	if err := r.record(ctx, ev); err != nil {
		return errUnavailable()
	}
	return nil
}
