package workflows

import (
	"strconv"
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
	rolloutStep(ctx, r.v)
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
	runCarry
	// Status is what the status query answers; Status.Status is the phase.
	Status RentalStatus
	payeeState
	Reminded map[string]bool // reminder keys sent
	// Attributed: an attribution by support took part in the payment
	// (the order's payment method says so).
	Attributed bool `json:"SupportPaid"`
	// ProvisioningBegun: the "paid" event is written and provisioning
	// under way, so a payment reverted now is flagged for support instead
	// of sending the order back to awaiting payment (vReorgDust). The
	// paid phase spans both sides of it.
	ProvisioningBegun bool `json:"ProvStarted"`
	// RetryAsked: support asked to retry provisioning, not yet taken up.
	RetryAsked bool `json:"Retry"`
	// EndAsked: support asked to end the period now.
	EndAsked bool `json:"EndNow"`
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
	// Over is the part of PaidCents above the total, queued for support
	// (refundable from the queue only, never by the order's refund).
	Over int64
	// OverRefundable: a refund replayed from before "refund-over" (when
	// the excess could be refunded twice, here and from the queue).
	OverRefundable bool
	// Waiting: the paid order waits in line for a machine (vQueue).
	Waiting bool `json:",omitempty"`
	// TeardownStuck: a teardown step was reported stuck (vDrain).
	TeardownStuck bool `json:",omitempty"`
	// Shortfalls are, per reverted payment generation (vRefundShortfall),
	// the order refunds paid out on the strength of it: ShortfallCents in
	// all. Its confirmation mined again backs them again.
	Shortfalls map[string]int64 `json:",omitempty"`
	// Extended are the customer's extensions handled (vExtension), by
	// reference: paid and applied, or lapsed.
	Extended map[string]bool `json:",omitempty"`
}

// rental is one RentalWorkflow run: its state and what lives only while
// the run does. Every state change and the timeline events that go with it
// happen under mu, so that signal and update handlers, which interleave at
// each activity call, never see a half-applied change (for instance a
// crypto confirmation racing a balance debit).
type rental struct {
	RentalState
	intakeRun
	in  RentalInput
	cfg RentalConfig // with defaults applied
	// tl keeps events for one timeline write: a batch's, and those of
	// writeLater.
	tl timeline[activities.OrderEvent]
	// wake tells the period loop that the end moved or was requested.
	wake workflow.Channel

	resumedWaitingSupport bool // this run continues a provisioning failure waiting for support
	closingRefund         bool // a refund that closes the order is running
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
	r := &rental{
		RentalState: RentalState{
			Status:     RentalStatus{OrderRef: in.OrderRef, Status: PhaseAwaitingPayment},
			PayUntil:   workflow.GetInfo(ctx).WorkflowStartTime.Add(cfg.UnpaidTimeout),
			payeeState: payeeState{Payments: newPaymentLedger(), Actions: map[int64]bool{}},
			Reminded:   map[string]bool{},
			Shortfalls: map[string]int64{},
		},
		in:   in,
		cfg:  cfg,
		wake: workflow.NewBufferedChannel(ctx, 1),
	}
	r.intakeRun = newIntakeRun(ctx, cfg.MaxVersion, domain.TargetOrder, in.OrderRef, in.TotalCents, &r.payeeState, r)
	r.maxHistory = cfg.MaxHistory
	r.onFull = func() { r.wake.SendAsync(struct{}{}) } // the period loop continues as new
	return r
}

// setup registers the status query and the updates. Validators are pure:
// they only read the state. Handlers take mu and check again, since the
// state may have changed between validation and the lock.
func (r *rental) setup(ctx workflow.Context) error {
	attrs := []temporal.SearchAttributeUpdate{
		saKeyRef.ValueSet(r.in.OrderRef),
		saKeyCustomer.ValueSet(strconv.FormatInt(r.in.AccountID, 10)),
		saKeyGPU.ValueSet(r.in.GPUModel),
		saKeyKind.ValueSet("rental"),
	}
	if r.sa.Asset != "" {
		attrs = append(attrs, saKeyAsset.ValueSet(r.sa.Asset), saKeyNetwork.ValueSet(r.sa.Network))
	}
	if err := r.sa.begin(ctx, string(r.phase()), attrs...); err != nil {
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
		{UpdatePayFromBalance, updateCounted(&r.intakeRun, UpdatePayFromBalance, r.payFromBalance), notBusy(&r.works, r.validatePayFromBalance)},
		{UpdateAttributePayment, updateCounted(&r.intakeRun, UpdateAttributePayment, r.attributePayment), notBusy(&r.works, r.validateAttribution)},
		{UpdateCancel, updateCounted(&r.intakeRun, UpdateCancel, r.cancel), notBusy(&r.works, r.validateCancel)},
		{UpdateExtend, updateCounted(&r.intakeRun, UpdateExtend, r.extend), notBusy(&r.works, r.validateExtend)},
		{UpdateEndEarly, updateCounted(&r.intakeRun, UpdateEndEarly, r.endEarly), notBusy(&r.works, r.validateEndEarly)},
		{UpdateRetryProvisioning, updateCounted(&r.intakeRun, UpdateRetryProvisioning, r.retryProvisioning), notBusy(&r.works, r.validateRetry)},
		{UpdateRefund, updateCounted(&r.intakeRun, UpdateRefund, r.refund), notBusy(&r.works, r.validateRefund)},
		{UpdateCreatePaymentIntent, updateCountedR(&r.intakeRun, UpdateCreatePaymentIntent, r.createPaymentIntent), notBusyCtx(&r.works, r.validateCreateIntent)},
	}
	for _, u := range updates {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, u.name, u.handler,
			workflow.UpdateHandlerOptions{Validator: u.validator}); err != nil {
			return err
		}
	}
	workflow.Go(ctx, func(ctx workflow.Context) { listenPayments(ctx, &r.intakeRun) })
	r.sa.sync(ctx)
	return nil
}

func (r *rental) run(ctx workflow.Context) (RentalStatus, error) {
	at := waitPayment
	if r.in.Carry != nil {
		at = r.in.Carry.WaitPoint
	}
	switch at {
	case waitPeriod:
		return r.period(ctx)
	case waitProvisioningFailed:
		r.resumedWaitingSupport = true
		return r.provisionAndRun(ctx)
	case waitMachine:
		return r.provisionAndRun(ctx)
	}
	for {
		if err := r.awaitPayment(ctx); err != nil {
			return r.Status, err
		}
		if r.phase().Closed() {
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
	if r.v >= vQueue && !r.resumedWaitingSupport {
		taken, err := r.takeMachine(ctx)
		if err != nil {
			return r.Status, err
		}
		if !taken {
			return r.finish(ctx)
		}
	}
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

// period runs the rental period, then the teardown. From vDrain the
// teardown runs in a disconnected context: a workflow cancelled during
// the period, or during the teardown, still revokes and releases.
func (r *rental) period(ctx workflow.Context) (RentalStatus, error) {
	err := r.runPeriod(ctx)
	cancelled := err != nil && r.v >= vDrain && temporal.IsCanceledError(err)
	if err != nil && !cancelled {
		return r.Status, err
	}
	tctx := ctx
	if r.v >= vDrain {
		tctx, _ = workflow.NewDisconnectedContext(ctx)
	}
	if terr := r.teardown(tctx); terr != nil {
		return r.Status, terr
	}
	if err != nil {
		return r.Status, err
	}
	return r.finish(ctx)
}

// finish lets running handlers complete, so no caller sees its update lost
// and no timeline write is cut short.
func (r *rental) finish(ctx workflow.Context) (RentalStatus, error) {
	return r.Status, r.quiet(ctx, false)
}

// awaiting reports whether the order still accepts payments toward its total.
func (r *rental) awaiting() bool {
	return r.phase().Awaiting()
}

func (r *rental) netPaid() int64 { return r.Status.PaidCents - r.refundedBacked() }

// refundedBacked is what the order's refunds took from the payments still
// counted: refunds paid out on payments a reorganisation removed since
// (the shortfall, support's to recover) are not owed again by the order.
func (r *rental) refundedBacked() int64 { return r.Status.RefundedCents - r.Status.ShortfallCents }

// record writes one timeline event, after those kept by writeLater; the
// caller holds mu.
func (r *rental) record(ctx workflow.Context, ev activities.OrderEvent) error {
	var a *activities.Activities
	ev.OrderRef = r.in.OrderRef
	ev.At = workflow.Now(ctx).UTC()
	r.sa.settle(ctx)
	return r.sa.hold(func() error {
		return r.tl.write(ctx, r.v, r.batch, a.RecordOrderEvent, a.RecordOrderEvents, ev)
	})
}

// flushBatch writes the batch's events in one local activity.
func (r *rental) flushBatch(ctx workflow.Context) error {
	var a *activities.Activities
	err := r.sa.hold(func() error { return r.tl.flush(ctx, r.v, a.RecordOrderEvents) })
	r.checkFull(ctx)
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
	r.tl.later = append(r.tl.later, ev)
	return nil
}

func (r *rental) recordLocked(ctx workflow.Context, ev activities.OrderEvent) error {
	if err := r.mu.Lock(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	return r.record(ctx, ev)
}
