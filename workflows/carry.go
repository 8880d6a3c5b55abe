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

// waitPoint is where the main flow of a run continuing as new starts:
// the waiting point its previous run stopped at. It is not a phase: a
// rental waiting for its payment may be awaiting it or have seen one, and
// one in its period is active.
type waitPoint string

// The waiting points a run can continue from (their values are those the
// carry of earlier releases holds).
const (
	waitPayment            waitPoint = "payment"
	waitProvisioningFailed waitPoint = "provisioning_failed"
	waitPeriod             waitPoint = "period"
	waitMachine            waitPoint = "waiting_for_machine"
	waitCredited           waitPoint = "credited"
)

// runCarry is what a run passes to the next beside the rental's or
// top-up's own state (JSON names as the carry of earlier releases).
type runCarry struct {
	// WaitPoint is where the next run starts.
	WaitPoint waitPoint `json:"Phase"`
	// Asset and Network of the payment, as the search attributes have them.
	Asset, Network string
	// Runs counts the runs before this one.
	Runs int
}

// next is the carry of a run continuing as new at wp; prev is this run's
// (nil: the first run).
func (i *intakeRun) next(wp waitPoint, prev *runCarry) runCarry {
	c := runCarry{WaitPoint: wp, Asset: i.sa.Asset, Network: i.sa.Network, Runs: 1}
	if prev != nil {
		c.Runs = prev.Runs + 1
	}
	return c
}

// resumed takes the search attributes' asset and network from c.
func (i *intakeRun) resumed(c runCarry) { i.sa.Asset, i.sa.Network = c.Asset, c.Network }

// carry is the rental's whole state, for its next run, starting at wp.
func (r *rental) carry(wp waitPoint) *RentalState {
	st := r.RentalState
	var prev *runCarry
	if r.in.Carry != nil {
		prev = &r.in.Carry.runCarry
	}
	st.runCarry = r.next(wp, prev)
	return &st
}

func (r *rental) restore(c *RentalState) {
	r.RentalState = *c
	if r.Shortfalls == nil {
		r.Shortfalls = map[string]int64{}
	}
	r.resumed(c.runCarry)
}

// continueAsNew ends this run once its handlers and pending signals are
// done, and starts the next one at wp.
func (r *rental) continueAsNew(ctx workflow.Context, wp waitPoint) error {
	if err := r.quiet(ctx, true); err != nil {
		return err
	}
	in := r.in
	in.Carry = r.carry(wp)
	// The next run's version is capped by its worker's ceiling
	// (VersionCeiling), not by its first start's.
	in.Config.MaxVersion = 0
	workflow.GetLogger(ctx).Info("rental continues as new", "at", wp, "runs", in.Carry.Runs)
	return workflow.NewContinueAsNewError(ctx, RentalWorkflow, in)
}

// carry is the top-up's whole state, for its next run, starting at wp.
func (t *topUp) carry(wp waitPoint) *TopUpState {
	st := t.TopUpState
	var prev *runCarry
	if t.in.Carry != nil {
		prev = &t.in.Carry.runCarry
	}
	st.runCarry = t.next(wp, prev)
	return &st
}

func (t *topUp) restore(c *TopUpState) {
	t.TopUpState = *c
	if t.Remined == nil {
		t.Remined = map[string]int64{}
	}
	t.resumed(c.runCarry)
}

func (t *topUp) continueAsNew(ctx workflow.Context, wp waitPoint) error {
	if err := t.quiet(ctx, true); err != nil {
		return err
	}
	in := t.in
	in.Carry = t.carry(wp)
	in.MaxVersion = 0 // as the rental's
	workflow.GetLogger(ctx).Info("top-up continues as new", "at", wp, "runs", in.Carry.Runs)
	return workflow.NewContinueAsNewError(ctx, TopUpWorkflow, in)
}

// Workflow type names the worker registers (wfclient uses the same).
const (
	RentalWorkflowType = "RentalWorkflow"
	TopUpWorkflowType  = "TopUpWorkflow"
)
