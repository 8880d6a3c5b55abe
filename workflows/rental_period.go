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

// A rental's period: from access to the end, with its reminders,
// extensions and early end, then the teardown.

func (r *rental) startPeriod(ctx workflow.Context, access activities.AccessSummary) error {
	if err := r.mu.Lock(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	start := workflow.Now(ctx).UTC()
	r.End = start.Add(time.Duration(r.in.DurationDays+r.ExtraDays) * r.cfg.Day)
	r.Status.PeriodStart, r.Status.PeriodEnd = start, r.End
	r.Status.ProvisioningError = ""
	return r.transition(ctx, PhaseActive, activities.OrderEvent{
		Key:  "access",
		Kind: domain.EventAccessAvailable,
		Message: fmt.Sprintf("Machine prête : les accès sont disponibles. Votre location court du %s au %s.",
			frDate(start), frDate(r.End)),
		// No secret here: the password stays in the database.
		Data: map[string]any{
			"host": access.Host, "port": access.Port, "username": access.Username,
			"duration_days": r.in.DurationDays, "extra_days": r.ExtraDays,
		},
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
	for !r.EndAsked && workflow.Now(ctx).Before(r.End) {
		if r.over(ctx) {
			return r.continueAsNew(ctx, waitPeriod)
		}
		now := workflow.Now(ctx)
		tctx, cancelTimers := workflow.WithCancel(ctx)
		sel := workflow.NewSelector(ctx)
		ended, rearm := false, false
		var due []reminder
		rems := r.reminders(now)
		if r.v >= vLeanTasks {
			// One timer, to the first reminder or the end; the loop arms
			// the next one.
			next, at := []reminder(nil), r.End
			for _, rem := range rems {
				if rem.at.Before(at) {
					next, at = []reminder{rem}, rem.at
				} else if rem.at.Equal(at) && at.Before(r.End) {
					next = append(next, rem)
				}
			}
			sel.AddFuture(workflow.NewTimer(tctx, at.Sub(now)), func(f workflow.Future) {
				if f.Get(tctx, nil) == nil {
					ended, due, rearm = len(next) == 0, next, len(next) > 0
				}
			})
		} else {
			sel.AddFuture(workflow.NewTimer(tctx, r.End.Sub(now)), func(f workflow.Future) {
				ended = f.Get(tctx, nil) == nil
			})
			for _, rem := range rems {
				sel.AddFuture(workflow.NewTimer(tctx, rem.at.Sub(now)), func(f workflow.Future) {
					if f.Get(tctx, nil) == nil {
						due = append(due, rem)
					}
				})
			}
		}
		sel.AddReceive(r.wake, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			rearm = true // the end moved
		})
		for !ended && !rearm {
			_ = r.sa.wait(func() bool { return r.wake.Len() > 0 }, func() error { sel.Select(ctx); return nil })
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
	// The period is over: the teardown that follows moves the rental to
	// ending at once (teardown).
	return nil
}

// reminders are the reminders of the current end still to send: not sent
// yet, and not due before now (too late for them).
func (r *rental) reminders(now time.Time) []reminder {
	var rems []reminder
	for _, off := range r.cfg.ReminderOffsets {
		rem := reminder{
			key: fmt.Sprintf("reminder:%d:%s", r.End.Unix(), off), at: r.End.Add(-off), end: r.End, offset: off,
		}
		if !rem.at.Before(now) && !r.Reminded[rem.key] {
			rems = append(rems, rem)
		}
	}
	return rems
}

func (r *rental) sendReminder(ctx workflow.Context, rem reminder) error {
	if err := r.mu.Lock(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	if r.Reminded[rem.key] || r.EndAsked || !rem.end.Equal(r.End) {
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

// teardown ends the period, revokes access, then wipes and releases the
// machine. Both steps retry without limit: a machine must never stay
// reachable after the period. From vDrain a step still failing after
// teardownStuckAfter attempts is reported (teardownStep). It runs as soon
// as the period loop exits (or the workflow is cancelled during it), so
// no update sees an active rental whose teardown has begun.
func (r *rental) teardown(ctx workflow.Context) error {
	var a *activities.Activities
	endedAt := workflow.Now(ctx).UTC()
	// Ending at once; the status goes with the revocation's event, once
	// access is revoked.
	if err := r.transitionThen(ctx, PhaseEnding, func(status string) error {
		if err := r.teardownStep(ctx, a.RevokeAccess); err != nil {
			return err
		}
		return r.recordLocked(ctx, activities.OrderEvent{
			Key: domain.KeyRevoked, Kind: domain.EventAccessRevoked, Status: status,
			Message: "Période terminée : les accès sont révoqués.",
		})
	}); err != nil {
		return err
	}
	if err := r.teardownStep(ctx, a.ReleaseCapacity); err != nil {
		return err
	}
	if err := r.mu.Lock(ctx); err != nil {
		return err
	}
	defer r.mu.Unlock()
	r.Status.EndedAt = endedAt
	return r.transition(ctx, PhaseEnded, activities.OrderEvent{
		Key: domain.KeyEnded, Kind: domain.EventEnded, EndedAt: ptrTo(endedAt),
		Message: "Location terminée : la machine a été effacée et libérée.",
	})
}

// teardownStuckAfter is how many attempts a teardown step makes (about
// seven minutes with machineCtx's backoff) before it is reported stuck
// (vDrain): a "teardown_stuck" event on the order, once, and
// MetricTeardownStuck. It then retries every teardownStuckRetry, for ever.
const (
	teardownStuckAfter = 8
	teardownStuckRetry = 30 * time.Minute
)

// teardownStep runs a teardown step (RevokeAccess, ReleaseCapacity) on
// the order until it succeeds.
func (r *rental) teardownStep(ctx workflow.Context, step any) error {
	if r.v < vDrain {
		return r.sa.get(ctx, workflow.ExecuteActivity(machineCtx(ctx, 0), step, r.in.OrderRef), nil)
	}
	err := r.sa.get(ctx, workflow.ExecuteActivity(machineCtx(ctx, teardownStuckAfter), step, r.in.OrderRef), nil)
	var ae *temporal.ApplicationError
	if err == nil || (errors.As(err, &ae) && ae.NonRetryable()) {
		return err
	}
	name := activityName(step)
	workflow.GetLogger(ctx).Error("teardown stuck", "order", r.in.OrderRef, "step", name, "error", err)
	if !r.TeardownStuck {
		r.TeardownStuck = true
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"step": name}).Counter(MetricTeardownStuck).Inc(1)
		if err := r.recordLocked(ctx, activities.OrderEvent{
			Key: domain.KeyTeardownStuck, Kind: domain.EventTeardownStuck,
			Message: "La fin de location prend du retard : la machine n'a pas encore pu être libérée. Le support est prévenu et l'opération se poursuit.",
			Data:    map[string]any{"step": name, "error": failureMessage(err)},
		}); err != nil {
			return err
		}
	}
	slow := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: machineStepTimeout,
		HeartbeatTimeout:    MachineHeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: teardownStuckRetry, BackoffCoefficient: 1, MaximumInterval: teardownStuckRetry},
	})
	return r.sa.get(ctx, workflow.ExecuteActivity(slow, step, r.in.OrderRef), nil)
}

func (r *rental) validateExtend(e Extension) error {
	if err := e.Validate(); err != nil {
		return refusal(err)
	}
	if e.ByCustomer() {
		return r.validateCustomerExtend(e)
	}
	if r.Actions[e.ActionID] {
		return nil
	}
	switch r.phase() {
	case PhasePaid, PhaseProvisioning, PhaseProvisioningFailed:
		if !r.closingRefund {
			return nil
		}
	case PhaseActive:
		if !r.EndAsked {
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
	if err := r.validateExtend(e); err != nil {
		return err
	}
	if e.ByCustomer() {
		return r.extendByCustomer(ctx, e)
	}
	if r.Actions[e.ActionID] {
		return nil
	}
	if err := checkAction(ctx, r.v, UpdateExtend, e.Claim(r.in.OrderRef)); err != nil {
		return err
	}
	r.Actions[e.ActionID] = true
	ev := activities.OrderEvent{
		Key: domain.KeyExtend(e.ActionID), Kind: domain.EventExtended,
		Data: map[string]any{"days": e.Days, "agent": e.Agent, "reason": e.Reason},
	}
	if r.phase() == PhaseActive {
		r.End = r.End.Add(time.Duration(e.Days) * r.cfg.Day)
		r.Status.PeriodEnd = r.End
		r.wake.SendAsync(struct{}{}) // re-arm the end and reminder timers
		ev.PeriodEnd = ptrTo(r.End)
		ev.Message = fmt.Sprintf("Location prolongée de %s : nouvelle fin le %s.", domain.Plural(e.Days, "jour", "jours"), frDate(r.End))
	} else {
		r.ExtraDays += e.Days
		added := domain.Plural(e.Days, "jour, qui s'ajoute", "jours, qui s'ajoutent")
		ev.Message = fmt.Sprintf("Location prolongée de %s à la période, qui commence quand la machine est prête.", added)
	}
	if err := r.recordSupport(ctx, domain.ActionExtend, e.ActionID, e.Agent, e.Reason,
		fmt.Sprintf("Le support a prolongé la location de %s.", domain.Plural(e.Days, "jour", "jours")), map[string]any{"days": e.Days}); err != nil {
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
	if r.phase() != PhaseActive || r.EndAsked {
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
	r.EndAsked = true
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
