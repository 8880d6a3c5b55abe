package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// A rental's provisioning: reserve, prepare, verify, open access; retried,
// then handed to support, who may retry it.

// provision runs the provisioning steps until they succeed (ready) or support
// refunds the order (not ready). A failed attempt waits for support.
func (r *rental) provision(ctx workflow.Context) (activities.AccessSummary, bool, error) {
	for {
		var access activities.AccessSummary
		if !r.resumedWaitingSupport {
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
		r.resumedWaitingSupport = false
		asked := func() bool { return r.RetryAsked || r.phase().Closed() || r.over(ctx) }
		if err := r.sa.wait(asked, func() error { return workflow.Await(ctx, asked) }); err != nil {
			return access, false, err
		}
		if r.full && !r.RetryAsked && !r.phase().Closed() {
			return access, false, r.continueAsNew(ctx, waitProvisioningFailed)
		}
		if r.phase().Closed() {
			return access, false, nil
		}
		r.RetryAsked = false
	}
}

// provisionOnce runs the steps once. stepErr is a step that failed after
// its retries (handed to support); err is a workflow-level failure.
func (r *rental) provisionOnce(ctx workflow.Context) (access activities.AccessSummary, step string, stepErr, err error) {
	var a *activities.Activities
	in := activities.ProvisionInput{
		OrderRef: r.in.OrderRef, GPUModel: r.in.GPUModel, GPUs: r.in.TotalGPUs, Preset: r.in.Preset, Attempt: r.Attempt,
	}
	if r.v < vOneProvisioning {
		return r.provisionStepByStep(ctx, in)
	}
	// The first step's start moves the order to provisioning (with the
	// "paid" event); the activity writes the other step events itself.
	if err := r.recordStep(ctx, in.StepStarted(activities.StepReserve)); err != nil {
		return access, activities.StepReserve, nil, err
	}
	pctx := workflow.WithStartToCloseTimeout(machineCtx(ctx, r.cfg.ProvisioningAttempts),
		time.Duration(len(activities.ProvisioningSteps))*machineStepTimeout)
	serr := r.sa.get(ctx, workflow.ExecuteActivity(pctx, a.Provision, in), &access)
	if serr == nil {
		return access, "", nil, nil
	}
	if ctx.Err() != nil {
		return access, "", nil, ctx.Err()
	}
	return access, activities.FailedStep(serr), serr, nil
}

// provisionStepByStep is provisionOnce before vOneProvisioning: an
// activity per step, the workflow writing every step event.
func (r *rental) provisionStepByStep(ctx workflow.Context, in activities.ProvisionInput) (access activities.AccessSummary, step string, stepErr, err error) {
	var a *activities.Activities
	mctx := machineCtx(ctx, r.cfg.ProvisioningAttempts)
	var verification activities.Verification
	run := func(step string) error {
		switch step {
		case activities.StepReserve:
			return workflow.ExecuteActivity(mctx, a.ReserveCapacity, activities.ReserveInput{
				OrderRef: in.OrderRef, GPUModel: in.GPUModel, GPUs: in.GPUs,
			}).Get(ctx, nil)
		case activities.StepPrepare:
			return workflow.ExecuteActivity(mctx, a.PreparePreset, activities.PrepareInput{
				OrderRef: in.OrderRef, Preset: in.Preset,
			}).Get(ctx, nil)
		case activities.StepVerify:
			return workflow.ExecuteActivity(mctx, a.VerifyMachine, activities.VerifyInput{
				OrderRef: in.OrderRef, GPUModel: in.GPUModel, GPUs: in.GPUs,
			}).Get(ctx, &verification)
		default:
			return workflow.ExecuteActivity(mctx, a.CreateAccess, activities.CreateAccessInput{
				OrderRef: in.OrderRef, Verification: verification,
			}).Get(ctx, &access)
		}
	}
	for _, s := range activities.ProvisioningSteps {
		if err := r.recordStep(ctx, in.StepStarted(s)); err != nil {
			return access, s, nil, err
		}
		if serr := run(s); serr != nil {
			if ctx.Err() != nil {
				return access, s, nil, ctx.Err()
			}
			return access, s, serr, nil
		}
		// Written with the next step's (or the access's) event.
		if err := r.recordStep(ctx, in.StepDone(s, verification)); err != nil {
			return access, s, nil, err
		}
	}
	return access, "", nil, nil
}

func (r *rental) recordStep(ctx workflow.Context, ev activities.OrderEvent) error {
	if err := r.mu.Lock(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	if r.phase() != PhaseProvisioning {
		// At the first step's start: its done follows in the same phase
		// (nothing moves a provisioning rental while a step runs).
		return r.transition(ctx, PhaseProvisioning, ev)
	}
	if strings.HasSuffix(ev.Key, ":done") {
		return r.writeLater(ctx, ev)
	}
	return r.record(ctx, ev)
}

var stepLabels = map[string]string{
	activities.StepReserve: "réservation de la capacité",
	activities.StepPrepare: "préparation de l'environnement",
	activities.StepVerify:  "vérification de la machine",
	activities.StepAccess:  "création des accès",
}

func (r *rental) provisioningFailed(ctx workflow.Context, step string, stepErr error) error {
	if err := r.mu.Lock(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	msg := failureMessage(stepErr)
	r.Status.ProvisioningError = msg
	return r.transition(ctx, PhaseProvisioningFailed, activities.OrderEvent{
		Key:  domain.KeyProvisioning(r.Attempt, "failed"),
		Kind: domain.EventProvisioningFailed,
		Message: fmt.Sprintf("La préparation de la machine a échoué (%s). Le support est prévenu : il relancera la préparation ou vous remboursera.",
			stepLabels[step]),
		Data: map[string]any{"step": step, "attempt": r.Attempt, "error": msg},
	})
}

func (r *rental) validateRetry(a SupportAction) error {
	if err := a.Validate(); err != nil {
		return refusal(err)
	}
	if r.Actions[a.ActionID] {
		return nil
	}
	if r.phase() != PhaseProvisioningFailed || r.RetryAsked || r.closingRefund {
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
	r.RetryAsked = true
	audit := supportEvent(domain.ActionRetryProvisioning, a.ActionID, a.Agent, a.Reason,
		"Le support a relancé la préparation de la machine.", nil)
	if err := r.transition(ctx, PhaseProvisioning, audit.order(), activities.OrderEvent{
		Key: domain.KeyProvisioning(r.Attempt+1, "retry"), Kind: domain.EventProvisioningRetry,
		Message: "Le support relance la préparation de la machine.",
		Data:    map[string]any{"attempt": r.Attempt + 1, "agent": a.Agent, "reason": a.Reason},
	}); err != nil {
		return errUnavailable()
	}
	return nil
}
