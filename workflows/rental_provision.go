package workflows

import (
	"fmt"
	"strings"

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
		if err := workflow.Await(ctx, func() bool { return r.RetryAsked || r.phase().Closed() || r.full }); err != nil {
			return access, false, err
		}
		if r.full && !r.RetryAsked && !r.phase().Closed() {
			return access, false, r.continueAsNew(ctx, phaseProvisioningFailed)
		}
		if r.phase().Closed() {
			return access, false, nil
		}
		r.RetryAsked = false
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
	if r.phase() != PhaseProvisioning {
		// At the first step's start: its done follows in the same phase
		// (nothing moves a provisioning rental while a step runs).
		return r.transition(ctx, PhaseProvisioning, ev)
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
	if r.Status.Status != domain.StatusProvisioningFailed || r.RetryAsked || r.closingRefund {
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
