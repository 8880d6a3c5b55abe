package workflows

// The workflows' search attributes: what operators filter by in the
// Temporal Web UI, upserted as the workflows move.

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Typed search attribute keys (see the SearchAttr* names in contract.go).
var (
	saKeyRef      = temporal.NewSearchAttributeKeyKeyword(SearchAttrRef)
	saKeyCustomer = temporal.NewSearchAttributeKeyKeyword(SearchAttrCustomer)
	saKeyStatus   = temporal.NewSearchAttributeKeyKeyword(SearchAttrStatus)
	saKeyGPU      = temporal.NewSearchAttributeKeyKeyword(SearchAttrGPU)
	saKeyAsset    = temporal.NewSearchAttributeKeyKeyword(SearchAttrAsset)
	saKeyNetwork  = temporal.NewSearchAttributeKeyKeyword(SearchAttrNetwork)
	saKeyKind     = temporal.NewSearchAttributeKeyKeyword(SearchAttrKind)
)

// upsertPaymentAttributes lets operators find the workflow by the asset and
// network of its payment.
func upsertPaymentAttributes(ctx workflow.Context, p PaymentEvent) {
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		saKeyAsset.ValueSet(p.Asset), saKeyNetwork.ValueSet(p.Network)); err != nil {
		workflow.GetLogger(ctx).Error("upsert payment search attributes", "error", err)
	}
}

// searchAttrs keeps the payment's asset and network for the workflow's
// next status upsert (vLocalTimeline: one upsert event instead of two, and
// none for a value already set); before, each is upserted at once. From
// vLeanTasks a status waits too: what a workflow task changed is upserted
// once, when the main flow waits for the world outside the task (sync),
// since every upsert is a visibility write of the whole row and its
// indexes on the server.
type searchAttrs struct {
	V              workflow.Version
	Asset, Network string // as last upserted
	pending        []temporal.SearchAttributeUpdate
	status         string      // to upsert (vLeanTasks), "" if none
	held           int         // local activities (run inside the task) under way, see hold
	waiting        bool        // the main flow waits outside the task (wait)
	wake           func() bool // what ends that wait inside the task, if anything
}

// begin upserts the attributes a run starts with, and its status. From
// vStartInSync it keeps them for sync, which upserts them with what the
// first workflow task changed.
func (s *searchAttrs) begin(ctx workflow.Context, status string, attrs ...temporal.SearchAttributeUpdate) error {
	if s.V < vStartInSync {
		return workflow.UpsertTypedSearchAttributes(ctx, append(attrs, saKeyStatus.ValueSet(status))...)
	}
	s.pending = append(s.pending, attrs...)
	s.status = status
	return nil
}

// notePayment records the asset and network of a payment or request.
func (s *searchAttrs) notePayment(ctx workflow.Context, p PaymentEvent) {
	if s.V < vLocalTimeline {
		upsertPaymentAttributes(ctx, p)
		return
	}
	if p.Asset == s.Asset && p.Network == s.Network {
		return
	}
	s.Asset, s.Network = p.Asset, p.Network
	s.pending = append(s.pending, saKeyAsset.ValueSet(p.Asset), saKeyNetwork.ValueSet(p.Network))
}

// setStatus upserts the status with what notePayment kept; from
// vLeanTasks it keeps it for sync.
func (s *searchAttrs) setStatus(ctx workflow.Context, status string) {
	if s.V >= vLeanTasks {
		s.status = status
		return
	}
	s.pending = append(s.pending, saKeyStatus.ValueSet(status))
	s.flush(ctx)
}

// settle upserts what notePayment kept before vLeanTasks; from it, sync does.
func (s *searchAttrs) settle(ctx workflow.Context) {
	if s.V < vLeanTasks {
		s.flush(ctx)
	}
}

// hold runs fn, work inside the workflow task whose outcome may change
// what is upserted (a timeline write; from vStartInSync a payment
// signal's check against its payment request): sync waits for it.
func (s *searchAttrs) hold(fn func() error) error {
	s.held++
	defer func() { s.held-- }()
	return fn()
}

// wait runs fn, the main flow's wait for something outside the workflow
// task (an activity, a timer, a signal, an update); wake, if not nil, is
// the condition that ends it, which another coroutine may meet in this
// task. While fn waits, sync upserts what was kept.
func (s *searchAttrs) wait(wake func() bool, fn func() error) error {
	s.waiting, s.wake = true, wake
	defer func() { s.waiting, s.wake = false, nil }()
	return fn()
}

// get waits for an activity's result as a wait of the main flow.
func (s *searchAttrs) get(ctx workflow.Context, f workflow.Future, out any) error {
	return s.wait(nil, func() error { return f.Get(ctx, out) })
}

// await is awaitOrTimeout as a wait of the main flow.
func (s *searchAttrs) await(ctx workflow.Context, d time.Duration, cond func() bool) (ok bool, err error) {
	err = s.wait(cond, func() error {
		ok, err = awaitOrTimeout(ctx, d, cond)
		return err
	})
	return ok, err
}

// sync, from vLeanTasks, runs beside the workflow's other coroutines and
// upserts what they changed once the workflow task has nothing left to do
// (idle). Its own context: a cancelled workflow still shows its status.
// A run's end upserts what is left (intakeRun.quiet).
func (s *searchAttrs) sync(ctx workflow.Context) {
	if s.V < vLeanTasks {
		return
	}
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for workflow.Await(ctx, s.idle) == nil {
			s.flush(ctx)
		}
	})
}

// idle reports whether something waits to be upserted and nothing more
// will change it in this workflow task: the main flow waits outside the
// task, not about to wake, and nothing held (hold) is under way.
func (s *searchAttrs) idle() bool {
	return (len(s.pending) > 0 || s.status != "") && s.held == 0 && s.waiting && (s.wake == nil || !s.wake())
}

// flush upserts what is kept, if anything.
func (s *searchAttrs) flush(ctx workflow.Context) {
	if s.status != "" {
		s.pending = append(s.pending, saKeyStatus.ValueSet(s.status))
		s.status = ""
	}
	if len(s.pending) == 0 {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, s.pending...); err != nil {
		workflow.GetLogger(ctx).Error("upsert search attributes", "error", err)
	}
	s.pending = nil
}
