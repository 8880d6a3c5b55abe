package activities

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/kernodeck/kernodeck/domain"
)

// The provisioning steps, in their order. Their names are in the step
// events' keys (domain.KeyProvisioning) and in support's failure notes.
const (
	StepReserve = "reserve"
	StepPrepare = "prepare"
	StepVerify  = "verify"
	StepAccess  = "access"
)

// ProvisioningSteps lists the steps in the order they run.
var ProvisioningSteps = []string{StepReserve, StepPrepare, StepVerify, StepAccess}

// ErrTypeStepFailed is the type of a Provision error that a retry may fix
// (a refusal keeps its domain code and is not retried).
const ErrTypeStepFailed = "provisioning_step_failed"

// ProvisionInput is one provisioning attempt of an order.
type ProvisionInput struct {
	OrderRef string
	GPUModel string
	GPUs     int
	Preset   string
	Attempt  int // the order's provisioning attempt, in its step events' keys
}

// StepStarted is the timeline event of step's start.
func (in ProvisionInput) StepStarted(step string) OrderEvent {
	var msg string
	switch step {
	case StepReserve:
		msg = fmt.Sprintf("Réservation de %d GPU %s en cours.", in.GPUs, in.GPUModel)
	case StepPrepare:
		msg = fmt.Sprintf("Préparation de l'environnement (%s) en cours.", in.Preset)
	case StepVerify:
		msg = "Vérification de la machine en cours."
	default:
		msg = "Création des accès en cours."
	}
	return in.stepEvent(step, "start", msg, nil)
}

// StepDone is the timeline event of step's end; v is what the machine
// showed (read for the verify step only).
func (in ProvisionInput) StepDone(step string, v Verification) OrderEvent {
	switch step {
	case StepReserve:
		return in.stepEvent(step, "done", "Capacité réservée.", nil)
	case StepPrepare:
		return in.stepEvent(step, "done", "Environnement préparé.", map[string]any{"preset": in.Preset})
	case StepVerify:
		return in.stepEvent(step, "done",
			fmt.Sprintf("Machine vérifiée : %d GPU %s détectés, pilote %s, CUDA %s.", v.GPUCount, v.GPUModel, v.DriverVersion, v.CUDAVersion),
			map[string]any{
				"gpu_model_seen": v.GPUModel, "gpu_count_seen": v.GPUCount,
				"driver_version": v.DriverVersion, "cuda_version": v.CUDAVersion, "notes": v.Notes,
			})
	default:
		return in.stepEvent(step, "done", "Accès créés.", nil)
	}
}

func (in ProvisionInput) stepEvent(step, edge, message string, data map[string]any) OrderEvent {
	if data == nil {
		data = map[string]any{}
	}
	data["step"] = step
	data["attempt"] = in.Attempt
	return OrderEvent{
		OrderRef: in.OrderRef,
		Key:      domain.KeyProvisioning(in.Attempt, step) + ":" + edge,
		Kind:     domain.EventProvisioningStep,
		Message:  message,
		Data:     data,
	}
}

// provisionProgress is a Provision attempt's heartbeat: the steps done and
// what the machine showed, so a retry resumes at the step that failed.
type provisionProgress struct {
	Done         int
	Verification Verification
}

// Provision runs an order's provisioning steps in one activity, from the
// first one not yet done (a retry resumes where the last attempt's
// heartbeat says), and writes each step's end and the next one's start to
// the timeline as it goes, in one transaction (four step transactions per
// order instead of seven: in a busy block, the timeline writes were a
// quarter of a worker's CPU, BENCHMARKS.md); the first step's start is
// the workflow's, as it moves the order to provisioning. Each step and
// each event is idempotent per order, so a step redone after a lost
// heartbeat does no harm. A step that fails comes back as an application
// error naming it (FailedStep).
func (a *Activities) Provision(ctx context.Context, in ProvisionInput) (AccessSummary, error) {
	var p provisionProgress
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		// Unreadable progress restarts from the first step (idempotent).
		if activity.GetHeartbeatDetails(ctx, &p) != nil || p.Done < 0 || p.Done > len(ProvisioningSteps) {
			p = provisionProgress{}
		}
	}
	var last atomic.Pointer[provisionProgress]
	last.Store(&p)
	defer beating(ctx, func() any { return *last.Load() })()

	var access AccessSummary
	resume := p.Done
	for i := p.Done; i < len(ProvisioningSteps); i++ {
		step := ProvisioningSteps[i]
		if i > 0 && i == resume {
			// A retry resuming here. The step's start was written with the
			// previous step's end, unless a release before that wrote it
			// apart, after the heartbeat: written again, it is a no-op.
			if err := a.recordSteps(ctx, in.StepStarted(step)); err != nil {
				return access, stepFailure(step, err)
			}
		}
		began := a.now()
		var err error
		switch step {
		case StepReserve:
			err = a.Provisioner.Reserve(ctx, ReserveInput{OrderRef: in.OrderRef, GPUModel: in.GPUModel, GPUs: in.GPUs})
		case StepPrepare:
			err = a.Provisioner.Prepare(ctx, PrepareInput{OrderRef: in.OrderRef, Preset: in.Preset})
		case StepVerify:
			p.Verification, err = a.Provisioner.Verify(ctx, VerifyInput{OrderRef: in.OrderRef, GPUModel: in.GPUModel, GPUs: in.GPUs})
		case StepAccess:
			access, err = a.Provisioner.CreateAccess(ctx, CreateAccessInput{OrderRef: in.OrderRef, Verification: p.Verification})
		}
		if err == nil {
			evs := []OrderEvent{in.StepDone(step, p.Verification)}
			if i+1 < len(ProvisioningSteps) {
				evs = append(evs, in.StepStarted(ProvisioningSteps[i+1]))
			}
			err = a.recordSteps(ctx, evs...)
		}
		if err != nil {
			// The retry resumes here, whatever the beats sent.
			heartbeat(ctx, p)
			return access, stepFailure(step, err)
		}
		p.Done = i + 1
		done := p
		last.Store(&done)
		// A step that took a beat's interval or more is heartbeated at
		// once, so that a worker lost now does not make the retry redo it;
		// a quicker one rides on the next beat (redoing it costs little,
		// and each heartbeat is one more write of the workflow on the
		// Temporal server, for every order a busy block pays).
		if a.now().Sub(began) >= beatEvery(ctx) {
			heartbeat(ctx, done)
		}
	}
	return access, nil
}

// heartbeat records a Provision attempt's progress, in an activity.
func heartbeat(ctx context.Context, p provisionProgress) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, p)
	}
}

// recordSteps writes step events together, at the same time.
func (a *Activities) recordSteps(ctx context.Context, evs ...OrderEvent) error {
	at := a.now().UTC()
	for i := range evs {
		evs[i].At = at
	}
	return a.Store.RecordOrderEventsTogether(ctx, evs...)
}

// stepFailure carries the failed step's name with the error: a refusal
// keeps its code and is not retried, anything else is.
func stepFailure(step string, err error) error {
	var de *domain.Error
	if refused(err) {
		errors.As(err, &de)
		return temporal.NewNonRetryableApplicationError(de.Message, de.Code, nil, step)
	}
	return temporal.NewApplicationError(err.Error(), ErrTypeStepFailed, step)
}

// FailedStep names the step a Provision error failed at: the one it
// carries, or for a timeout the one after the last heartbeat's progress.
func FailedStep(err error) string {
	var ae *temporal.ApplicationError
	var step string
	if errors.As(err, &ae) && ae.HasDetails() && ae.Details(&step) == nil {
		return step
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		var p provisionProgress
		if te.HasLastHeartbeatDetails() && te.LastHeartbeatDetails(&p) != nil {
			p = provisionProgress{}
		}
		if p.Done >= 0 && p.Done < len(ProvisioningSteps) {
			return ProvisioningSteps[p.Done]
		}
	}
	return ""
}
