package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// Continue-as-new (vContinueAsNew): a run whose history passes its bound
// stops at its next waiting point (awaiting payment, provisioning failed
// and waiting for support, the rental period, a credited top-up's
// listening window), once every update and payment signal it received is
// handled, and the next run starts there with the whole state. The
// workflow ID stays: the API, support and watchers reach the latest run;
// queries and updates work across runs.

// Phases a run can continue from.
const (
	phasePayment            = "payment"
	phaseProvisioningFailed = "provisioning_failed"
	phasePeriod             = "period"
	phaseCredited           = "credited"
)

// RentalCarry is a rental's state carried to its next run.
type RentalCarry struct {
	Phase                          string
	Status                         RentalStatus
	Payments                       *paymentLedger
	Actions                        map[int64]bool
	Reminded                       map[string]bool
	Paid, SupportPaid, ProvStarted bool
	Done, Retry, EndNow            bool
	Attempt, ExtraDays, Intents    int
	End, PayUntil                  time.Time
	Counted                        []countedPayment
	Over                           int64
	OverRefundable                 bool
	Shortfalls                     map[string]int64 `json:",omitempty"`
	Asset, Network                 string
	Runs                           int
}

func (r *rental) carry(phase string) *RentalCarry {
	runs := 1
	if r.in.Carry != nil {
		runs = r.in.Carry.Runs + 1
	}
	return &RentalCarry{Phase: phase, Status: r.st, Payments: r.payments, Actions: r.actions, Reminded: r.reminded,
		Paid: r.paid, SupportPaid: r.supportPaid, ProvStarted: r.provStarted, Done: r.done, Retry: r.retry,
		EndNow: r.endNow, Attempt: r.attempt, ExtraDays: r.extraDays, Intents: r.intents, End: r.end,
		PayUntil: r.payUntil, Counted: r.counted, Over: r.over, OverRefundable: r.overRefundable,
		Shortfalls: r.shortfalls,
		Asset:      r.sa.Asset, Network: r.sa.Network, Runs: runs}
}

func (r *rental) restore(c *RentalCarry) {
	r.st, r.payments, r.actions, r.reminded = c.Status, c.Payments, c.Actions, c.Reminded
	r.paid, r.supportPaid, r.provStarted, r.done, r.retry, r.endNow = c.Paid, c.SupportPaid, c.ProvStarted, c.Done, c.Retry, c.EndNow
	r.attempt, r.extraDays, r.intents, r.end, r.payUntil, r.counted = c.Attempt, c.ExtraDays, c.Intents, c.End, c.PayUntil, c.Counted
	r.over, r.overRefundable, r.shortfalls = c.Over, c.OverRefundable, c.Shortfalls
	if r.shortfalls == nil {
		r.shortfalls = map[string]int64{}
	}
	r.sa.Asset, r.sa.Network = c.Asset, c.Network
}

// continueAsNew ends this run once its handlers and pending signals are
// done, and starts the next one at phase.
func (r *rental) continueAsNew(ctx workflow.Context, phase string) error {
	if err := workflow.Await(ctx, func() bool {
		return workflow.AllHandlersFinished(ctx) && r.signalsBusy == 0 && !signalsPending(ctx)
	}); err != nil {
		return err
	}
	in := r.in
	in.Carry = r.carry(phase)
	workflow.GetLogger(ctx).Info("rental continues as new", "phase", phase, "runs", in.Carry.Runs)
	return workflow.NewContinueAsNewError(ctx, RentalWorkflowType, in)
}

// TopUpCarry is a top-up's state carried to its next run.
type TopUpCarry struct {
	Phase          string
	Status         TopUpStatus
	Payments       *paymentLedger
	Actions        map[int64]bool
	Due, Done      bool
	Intents        int
	Counted        []countedPayment
	PayUntil       time.Time
	ListenUntil    time.Time
	Remined        map[string]int64
	Asset, Network string
	Runs           int
}

func (t *topUp) carry(phase string) *TopUpCarry {
	runs := 1
	if t.in.Carry != nil {
		runs = t.in.Carry.Runs + 1
	}
	return &TopUpCarry{Phase: phase, Status: t.st, Payments: t.payments, Actions: t.actions, Due: t.due, Done: t.done,
		Intents: t.intents, Counted: t.counted, PayUntil: t.payUntil, ListenUntil: t.listenUntil, Remined: t.remined,
		Asset: t.sa.Asset, Network: t.sa.Network, Runs: runs}
}

func (t *topUp) restore(c *TopUpCarry) {
	t.st, t.payments, t.actions, t.due, t.done = c.Status, c.Payments, c.Actions, c.Due, c.Done
	t.intents, t.counted, t.payUntil, t.listenUntil, t.remined = c.Intents, c.Counted, c.PayUntil, c.ListenUntil, c.Remined
	t.sa.Asset, t.sa.Network = c.Asset, c.Network
}

func (t *topUp) continueAsNew(ctx workflow.Context, phase string) error {
	if err := workflow.Await(ctx, func() bool {
		return workflow.AllHandlersFinished(ctx) && t.signalsBusy == 0 && !signalsPending(ctx)
	}); err != nil {
		return err
	}
	in := t.in
	in.Carry = t.carry(phase)
	workflow.GetLogger(ctx).Info("top-up continues as new", "phase", phase, "runs", in.Carry.Runs)
	return workflow.NewContinueAsNewError(ctx, TopUpWorkflowType, in)
}

// Workflow type names the worker registers (wfclient uses the same).
const (
	RentalWorkflowType = "RentalWorkflow"
	TopUpWorkflowType  = "TopUpWorkflow"
)
