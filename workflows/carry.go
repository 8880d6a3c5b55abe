package workflows

import (
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

// RentalCarry is what a rental's run passes to the next: its whole state.
type RentalCarry = RentalState

// carry is the rental's state for its next run, resuming at phase.
func (r *rental) carry(phase string) *RentalState {
	st := r.RentalState
	st.Resume = phase
	st.Asset, st.Network = r.sa.Asset, r.sa.Network
	if r.in.Carry != nil {
		st.Runs = r.in.Carry.Runs + 1
	} else {
		st.Runs = 1
	}
	return &st
}

func (r *rental) restore(c *RentalState) {
	r.RentalState = *c
	if r.Shortfalls == nil {
		r.Shortfalls = map[string]int64{}
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
	return workflow.NewContinueAsNewError(ctx, RentalWorkflow, in)
}

// TopUpCarry is what a top-up's run passes to the next: its whole state.
type TopUpCarry = TopUpState

// carry is the top-up's state for its next run, resuming at phase.
func (t *topUp) carry(phase string) *TopUpState {
	st := t.TopUpState
	st.Resume = phase
	st.Asset, st.Network = t.sa.Asset, t.sa.Network
	if t.in.Carry != nil {
		st.Runs = t.in.Carry.Runs + 1
	} else {
		st.Runs = 1
	}
	return &st
}

func (t *topUp) restore(c *TopUpState) {
	t.TopUpState = *c
	if t.Remined == nil {
		t.Remined = map[string]int64{}
	}
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
	return workflow.NewContinueAsNewError(ctx, TopUpWorkflow, in)
}

// Workflow type names the worker registers (wfclient uses the same).
const (
	RentalWorkflowType = "RentalWorkflow"
	TopUpWorkflowType  = "TopUpWorkflow"
)
