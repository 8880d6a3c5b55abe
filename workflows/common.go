package workflows

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// Payment methods stored on a settled order.
const (
	methodCrypto  = "crypto"
	methodBalance = "balance"
	methodSupport = "support"
)

// frDateLayout renders dates in customer messages; always applied to UTC
// times so the text is the same on every replay and every worker.
const frDateLayout = "02/01/2006 à 15:04 UTC"

func frDate(t time.Time) string { return t.UTC().Format(frDateLayout) }

func usd(cents int64) string { return domain.FormatUSD(cents) + " USD" }

// timelineCtx is for timeline and ledger writes: the database is the system of
// record, so these retry until they succeed (only a domain refusal, which is
// non-retryable, comes back). One write takes milliseconds: 10 s bounds how
// long a write lost with its worker waits before it is retried.
func timelineCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         timelineRetry(),
	})
}

// timelineRetry retries a timeline write without limit.
func timelineRetry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Minute,
		MaximumAttempts:    0, // unlimited
	}
}

// machineCtx is for machine driver calls. attempts 0 means unlimited: teardown
// must eventually revoke and release, whereas provisioning gives up after a few
// attempts and hands over to support. A step may take minutes (SSH, preset
// setup) but heartbeats every few seconds (activities.heartbeating): a step
// lost with its worker is retried after HeartbeatTimeout, not StartToClose.
func machineCtx(ctx workflow.Context, attempts int32) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: machineStepTimeout,
		HeartbeatTimeout:    MachineHeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    5 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    2 * time.Minute,
			MaximumAttempts:    attempts,
		},
	})
}

// handlerMachineCtx is for a machine call inside an update handler, which
// holds the run's lock: from vDrain handlerAttempts attempts, then the
// update fails with a "try again" (errUnavailable), never an unbounded
// wait that would hold every payment and update behind it.
func handlerMachineCtx(ctx workflow.Context, v workflow.Version) workflow.Context {
	if v >= vDrain {
		return machineCtx(ctx, handlerAttempts)
	}
	return machineCtx(ctx, 0)
}

// handlerAttempts bounds a machine call in an update handler (vDrain).
const handlerAttempts = 3

// machineStepTimeout bounds one machine step's attempt.
const machineStepTimeout = 2 * time.Minute

// MachineHeartbeatTimeout is how long a machine step may go without a
// heartbeat before Temporal retries it on another worker.
const MachineHeartbeatTimeout = 10 * time.Second

// reject builds an update refusal: a French message under a domain error code,
// which the API maps back to a *domain.Error.
func reject(code, message string) error {
	return temporal.NewApplicationError(message, code)
}

// errUnavailable is returned by an update handler whose timeline write could
// not complete (the workflow is being cancelled).
func errUnavailable() error {
	return reject(domain.ECodeUnavailable, "Le service est momentanément indisponible. Réessayez plus tard.")
}

// refusal turns a domain validation error into an update refusal (same code
// and message as the API gives for the same input); nil stays nil.
func refusal(err error) error {
	var de *domain.Error
	if errors.As(err, &de) {
		return reject(de.Code, de.Message)
	}
	return err
}

// asRefusal turns an activity failure into an update refusal keeping the
// domain code and French message the activity carried.
func asRefusal(err error, fallback string) error {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() != "" {
		msg := ae.Message()
		if msg == "" {
			msg = fallback
		}
		return reject(ae.Type(), msg)
	}
	return reject(domain.ECodeUnavailable, fallback)
}

// failureMessage extracts the useful part of an activity error (the
// ActivityError wrapper only adds scheduling details).
func failureMessage(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Message()
	}
	var act *temporal.ActivityError
	if errors.As(err, &act) {
		if cause := errors.Unwrap(act); cause != nil {
			return cause.Error()
		}
	}
	return err.Error()
}

// paymentData is the timeline data of an on-chain payment.
func paymentData(p PaymentEvent) map[string]any {
	return map[string]any{
		"key":          p.Key(),
		"network":      p.Network,
		"asset":        p.Asset,
		"txid":         p.TxID,
		"index":        p.Index,
		"amount_base":  p.AmountBase,
		"amount_cents": p.AmountCents,
		"intent_id":    p.IntentID,
		"late":         p.Late,
	}
}

// supportData is the timeline data of a support action: who and why.
func supportData(action string, actionID int64, agent, reason string) map[string]any {
	return map[string]any{"action": action, "action_id": actionID, "agent": agent, "reason": reason}
}

func ptrTo[T any](v T) *T { return &v }

// countedPayment is a received payment counted toward an order or a
// top-up: if the target then expires, its amount goes back to support's
// queue (partial), less what was refunded.
type countedPayment struct {
	P     PaymentEvent
	Cents int64
	// QKey is the payment's key in support's queue (see paymentLedger.qkey);
	// empty: P.Key().
	QKey string `json:",omitempty"`
}

// addCounted adds c to list, merged into the entry of the same payment
// generation if there is one (a payment mined again partly backing earlier
// refunds, partly counted anew): one entry, one queued row per generation.
func addCounted(list []countedPayment, c countedPayment) []countedPayment {
	for i := range list {
		if list[i].qkey() == c.qkey() {
			list[i].P.AmountCents += c.P.AmountCents
			list[i].Cents += c.Cents
			return list
		}
	}
	return append(list, c)
}

// appendOnce appends s to list unless it is there.
func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

func (c countedPayment) qkey() string {
	if c.QKey != "" {
		return c.QKey
	}
	return c.P.Key()
}

// partialExceptions queues the counted payments of a target that expired,
// less refunded (taken from the oldest first).
func partialExceptions(counted []countedPayment, refunded int64) []domain.NewException {
	var out []domain.NewException
	for _, c := range counted {
		cents := c.Cents
		take := min(cents, refunded)
		cents, refunded = cents-take, refunded-take
		if cents > 0 {
			out = append(out, newException(domain.ExceptionPartial, c.qkey(), c.P, cents))
		}
	}
	return out
}

// newException is a received amount (all or part of p) put in support's
// queue under key (p.Key(), or its generation after a reversal).
func newException(reason, key string, p PaymentEvent, cents int64) domain.NewException {
	return domain.NewException{Reason: reason, PaymentKey: key, Network: p.Network, TxID: p.TxID,
		Asset: p.Asset, AmountBase: p.AmountBase, AmountCents: cents}
}

// loadException reads a queued amount named by an attribution and checks it
// belongs to ref.
func loadException(ctx workflow.Context, id int64, ref string) (domain.Exception, error) {
	var a *activities.Activities
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	var e domain.Exception
	if err := workflow.ExecuteActivity(actx, a.LoadException, id).Get(ctx, &e); err != nil {
		return e, asRefusal(err, "Le montant en attente n'a pas pu être lu. Réessayez plus tard.")
	}
	if e.TargetRef != ref {
		return e, reject(domain.ECodeNotFound, "Ce montant en attente ne concerne pas ce dossier.")
	}
	return e, nil
}

// countException loads the queued amount an attribution names (it must
// belong to ref) and returns the payment it counts: the attribution's
// amount, or all that remains up to due, never more than remains. The use
// goes on the attribution's event, and data says what was counted. From
// vRefundShortfall the counted payment is keyed by the queued row's payment
// key, so the payment's reversal finds and uncounts it.
func countException(ctx workflow.Context, v workflow.Version, at Attribution, ref string, due int64, data map[string]any) (countedPayment, *domain.ExceptionUse, error) {
	e, err := loadException(ctx, at.ExceptionID, ref)
	if err != nil {
		return countedPayment{}, nil, err
	}
	amount := at.AmountCents
	if amount == 0 {
		amount = min(due, e.RemainingCents())
	}
	if amount <= 0 || amount > e.RemainingCents() {
		return countedPayment{}, nil, reject(domain.ECodeConflict, fmt.Sprintf("Ce montant en attente n'a plus que %s à régler.", usd(e.RemainingCents())))
	}
	data["amount_cents"], data["exception_id"], data["payment_key"] = amount, e.ID, e.PaymentKey
	c := countedPayment{P: PaymentEvent{Network: e.Network, TxID: e.TxID, Asset: e.Asset, AmountBase: e.AmountBase, AmountCents: amount},
		Cents: amount}
	if v >= vRefundShortfall {
		c.QKey = e.PaymentKey
	}
	return c, &domain.ExceptionUse{ExceptionID: e.ID, Cents: amount}, nil
}

// without returns list without s (order kept).
func without(list []string, s string) []string {
	out := list[:0:0]
	for _, v := range list {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}

// awaitOrTimeout waits for cond at most d. The timer lives in a child context
// cancelled on return, so a condition met early leaves no timer pending.
func awaitOrTimeout(ctx workflow.Context, d time.Duration, cond func() bool) (ok bool, err error) {
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimer(tctx, d)
	if err := workflow.Await(ctx, func() bool { return cond() || timer.IsReady() }); err != nil {
		return false, err
	}
	return cond(), nil
}

// DefaultMaxHistory is the history length past which a rental or a
// top-up continues as new at its next waiting point.
const DefaultMaxHistory = 2000

// historyFull reports whether the run should continue as new.
func historyFull(ctx workflow.Context, v workflow.Version, max int) bool {
	if v < vContinueAsNew {
		return false
	}
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= max
}

// signalsPending reports whether a payment signal waits in its channel.
func signalsPending(ctx workflow.Context) bool {
	for _, name := range paymentSignalNames(true) {
		if workflow.GetSignalChannel(ctx, name).Len() > 0 {
			return true
		}
	}
	return false
}

// localTimelineCtx is timelineCtx for local activities: the same retries
// (a write lost with its worker is redone on replay), for localRetryWindow,
// or from vDrain localRetryBound.
func localTimelineCtx(ctx workflow.Context, v workflow.Version) workflow.Context {
	window := localRetryWindow
	if v >= vDrain {
		window = localRetryBound
	}
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: window,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy:            timelineRetry(),
	})
}

// localRetryBound is how long a local activity retries from vDrain. Past
// the workflow task's timeout each retry is a marker and a timer in the
// history (about 8,600 events a day with PostgreSQL away, the run's
// bound in 6 days); after it the call hands over to an activity, whose
// retries the server keeps out of the history (execLocal).
const localRetryBound = 10 * time.Minute

// activityName is fn's name, for logs and metrics.
func activityName(fn any) string {
	name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	name = strings.TrimSuffix(name, "-fm")
	return name[strings.LastIndex(name, ".")+1:]
}

// execLocal runs fn as a local activity under lctx; from vDrain one that
// still fails after its retries (not a refusal: a non-retryable error)
// hands over to an activity under actx, counted (MetricHandedOver).
func execLocal(ctx workflow.Context, v workflow.Version, lctx, actx workflow.Context, fn, arg, out any) error {
	err := workflow.ExecuteLocalActivity(lctx, fn, arg).Get(ctx, out)
	var ae *temporal.ApplicationError
	var canceled *temporal.CanceledError
	if err == nil || v < vDrain || (errors.As(err, &ae) && ae.NonRetryable()) || errors.As(err, &canceled) || ctx.Err() != nil {
		return err
	}
	name := activityName(fn)
	workflow.GetLogger(ctx).Warn("local activity handed over to an activity", "activity", name, "error", err)
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"activity": name}).Counter(MetricHandedOver).Inc(1)
	return workflow.ExecuteActivity(actx, fn, arg).Get(ctx, out)
}

// localRetryWindow is how long a local activity's retries go on. Without
// it the SDK stops them at the attempt timeout (10 s): a write refused for
// longer (PostgreSQL away, a worker too busy) was lost, or failed its
// workflow, in a 5,000-order burst. Thirty days: as long as any rental.
const localRetryWindow = 30 * 24 * time.Hour

// execTimeline runs a timeline write (fn, one of the Record* activities)
// as a local activity from vLocalTimeline on, as an activity before.
func execTimeline(ctx workflow.Context, v workflow.Version, fn, arg any) error {
	if v >= vLocalTimeline {
		return execLocal(ctx, v, localTimelineCtx(ctx, v), timelineCtx(ctx), fn, arg, nil)
	}
	return workflow.ExecuteActivity(timelineCtx(ctx), fn, arg).Get(ctx, nil)
}

// qkeyIfGen keeps a counted payment's queue key only when it differs from
// the payment's own key (a later generation).
func qkeyIfGen(qkey string, p PaymentEvent) string {
	if qkey == p.Key() {
		return ""
	}
	return qkey
}
