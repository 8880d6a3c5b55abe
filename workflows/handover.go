package workflows

// Updates whose work outlasts their caller's patience (vHandOver): the
// work goes on in the run, the caller is told it is in progress.

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/domain"
)

// handlerPatience is how long an update waits for its work before it
// answers in_progress and hands the work over to the run: below the API's
// 30 s wait (api.DefaultWorkflowTimeout), so that the caller is told.
const handlerPatience = 20 * time.Second

// handOver runs the work of a run's updates (vHandOver). An update's work
// runs in a coroutine of its own; the update waits for it handlerPatience
// at most, then answers in_progress while the work goes on, holding the
// run's lock, until its writes are made (they are idempotent and retried
// until the database answers: a debit or a refund once accepted is
// carried through exactly once, and the workflow's state follows what the
// database holds). Meanwhile the validators refuse new updates, so that
// callers do not pile up behind it (the server accepts 10 in flight), and
// the run neither ends nor continues as new before the work is done.
type handOver struct {
	on      bool
	running int // works of updates not done, answered or not
	late    int // works whose update answered in_progress
}

// run runs work as the update name's work (see handOver).
func (h *handOver) run(ctx workflow.Context, name string, work func(workflow.Context) error) error {
	if !h.on {
		return work(ctx)
	}
	var err error
	done, late := false, false
	h.running++
	workflow.Go(ctx, func(ctx workflow.Context) {
		err = work(ctx)
		done = true
		h.running--
		if late {
			h.late--
			workflow.GetLogger(ctx).Info("update handed over to the run is done", "update", name, "error", err)
		}
	})
	finished, werr := awaitOrTimeout(ctx, handlerPatience, func() bool { return done })
	if werr != nil {
		return werr
	}
	if !finished {
		late = true
		h.late++
		workflow.GetLogger(ctx).Warn("update handed over to the run", "update", name)
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"update": name}).Counter(MetricUpdatesHandedOver).Inc(1)
		return errInProgress()
	}
	return err
}

// idle reports whether no update's work is running.
func (h *handOver) idle() bool { return h.running == 0 }

// busy refuses an update while an earlier one's work outlasts its caller
// (no history: validators write none).
func (h *handOver) busy() error {
	if h.late > 0 {
		return reject(domain.ECodeUnavailable,
			"Une demande précédente est encore en cours de traitement. Réessayez dans quelques minutes.")
	}
	return nil
}

// errInProgress answers an update whose work outlasted handlerPatience.
func errInProgress() error {
	return reject(domain.ECodeInProgress,
		"Votre demande est enregistrée et en cours de traitement : elle sera appliquée dès que possible, et le suivi le montrera. Inutile de la renvoyer.")
}

// notBusy and notBusyCtx put busy before an update's validator.
func notBusy[A any](h *handOver, validate func(A) error) func(A) error {
	return func(arg A) error {
		if err := h.busy(); err != nil {
			return err
		}
		return validate(arg)
	}
}

func notBusyCtx[A any](h *handOver, validate func(workflow.Context, A) error) func(workflow.Context, A) error {
	return func(ctx workflow.Context, arg A) error {
		if err := h.busy(); err != nil {
			return err
		}
		return validate(ctx, arg)
	}
}
