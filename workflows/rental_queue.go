package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// The line of paid orders waiting for a machine (vQueue): money takes a
// host, and a paid order that finds none free waits, in payment order,
// until one is freed (a rental ends, a hold lapses, a host is added or
// repaired) or its money goes back to the balance. The rental period
// starts when the machine is delivered, never at payment.

// awaitMachineEvery is how often a waiting order asks for a machine.
// Each ask is an activity attempt, which writes nothing to the history
// until one takes.
const awaitMachineEvery = 15 * time.Second

// takeMachine reserves the paid order's machine before its provisioning.
// With none free for it, the order waits in line (waiting_for_machine):
// taken is true once a machine is reserved, false when the order was
// closed meanwhile (its money refunded to the balance, or cancelled),
// its machine released if one was reserved in the meantime. A run whose
// history is full continues as new in line.
func (r *rental) takeMachine(ctx workflow.Context) (taken bool, err error) {
	var a *activities.Activities
	in := activities.ReserveInput{OrderRef: r.in.OrderRef, GPUModel: r.in.GPUModel, GPUs: r.in.TotalGPUs}
	if !r.Waiting {
		tctx := machineCtx(ctx, r.cfg.ProvisioningAttempts)
		if err := r.sa.get(ctx, workflow.ExecuteActivity(tctx, a.TakeMachine, in), &taken); err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			// A refusal other than "none free": the provisioning's own
			// reservation meets it and hands the order to support.
			return true, nil
		}
		if taken {
			return true, nil
		}
		if err := r.enterLine(ctx); err != nil {
			return false, err
		}
	}
	for {
		served, err := r.awaitMachine(ctx, in)
		if err != nil {
			return false, err
		}
		switch {
		case r.phase().Closed():
			// Written closed first: no reservation is made after that
			// (postgres.LockOpenOrder); one made before it is given back.
			if err := r.sa.get(ctx, workflow.ExecuteActivity(machineCtx(ctx, 0), a.ReleaseCapacity, r.in.OrderRef), nil); err != nil {
				return false, err
			}
			return false, nil
		case r.full:
			// The next run waits on (a machine reserved meanwhile is
			// found again by its first ask).
			return false, r.continueAsNew(ctx, waitMachine)
		case served == nil:
			r.Waiting = false
			return true, nil
		case isNotServed(served):
			// The asks' retry policy gave up (a test environment caps
			// it): ask again.
			continue
		}
		// A refusal other than "none free": the provisioning's own
		// reservation meets it and hands the order to support.
		r.Waiting = false
		return true, nil
	}
}

// awaitMachine asks for the order's machine until one is taken (served
// nil), the asks fail (served), the order is closed or the run's history
// is full (the asks stopped).
func (r *rental) awaitMachine(ctx workflow.Context, in activities.ReserveInput) (served, err error) {
	var a *activities.Activities
	wctx, stop := workflow.WithCancel(ctx)
	defer stop()
	wctx = workflow.WithActivityOptions(wctx, workflow.ActivityOptions{
		StartToCloseTimeout: machineStepTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    awaitMachineEvery,
			BackoffCoefficient: 1,
			MaximumInterval:    awaitMachineEvery,
			MaximumAttempts:    0, // until served or stopped
		},
	})
	f := workflow.ExecuteActivity(wctx, a.AwaitMachine, in)
	left := func() bool { return f.IsReady() || r.phase().Closed() || r.over(ctx) }
	if err := r.sa.wait(left, func() error { return workflow.Await(ctx, left) }); err != nil {
		return nil, err
	}
	if !f.IsReady() {
		return errStopped, nil
	}
	return f.Get(ctx, nil), nil
}

var errStopped = errors.New("stopped asking for a machine")

// isNotServed says err is AwaitMachine's "none free yet".
func isNotServed(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == activities.ErrTypeNotServed
}

// enterLine moves the paid order into the line, with its "paid" event.
func (r *rental) enterLine(ctx workflow.Context) error {
	if err := r.mu.Lock(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	if r.phase() != PhasePaid {
		return nil
	}
	r.Waiting = true
	return r.transition(ctx, PhaseWaitingForMachine, activities.OrderEvent{
		Key:  domain.KeyWaiting,
		Kind: domain.EventWaitingForMachine,
		Message: fmt.Sprintf("Paiement confirmé, mais aucune machine %s à %d GPU n'est libre pour le moment : votre commande attend dans la file, servie dans l'ordre des paiements. "+
			"La période de location commencera à la livraison de la machine. Vous pouvez reprendre le montant payé sur votre solde à tout moment.",
			r.in.GPUModel, r.in.TotalGPUs),
		Data: map[string]any{"gpu_model": r.in.GPUModel, "gpus": r.in.TotalGPUs},
	})
}
