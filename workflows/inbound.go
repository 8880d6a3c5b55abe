package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// Why an inbound call was refused.
const (
	refusedPayloads = "payloads" // not exactly one payload
	refusedAddress  = "address"  // addressed to another workflow
	refusedRequest  = "request"  // a payment naming none of the workflow's payment requests
	refusedAction   = "action"   // a support action that does not match its support_actions row
)

// addressed is every workflow start, signal and update argument: it names
// the workflow it is for (domain.Addressed, or the reference of a start
// input).
type addressed interface{ AddressedTo() string }

// InboundInterceptor is the worker interceptor that refuses, before any
// handler runs, a workflow start or an update whose one sealed argument is
// missing, extra or addressed to another workflow, and drops a signal that
// does not carry exactly one payload. Signals are decoded by the workflow
// itself, which checks their address (listenPayments). Refusals are logged
// and counted (MetricRefusedCalls); none reaches a customer's timeline.
//
// Update validators do not run on replay, so refusing there never changes
// a recorded history; a start is checked on replay as when it ran, from
// its recorded input.
type InboundInterceptor struct {
	interceptor.WorkerInterceptorBase
}

var _ interceptor.WorkerInterceptor = (*InboundInterceptor)(nil)

// InterceptWorkflow implements interceptor.WorkerInterceptor.
func (*InboundInterceptor) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &inbound{}
	i.Next = next
	return i
}

type inbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (i *inbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	if reason := checkArgs(ctx, in.Args); reason != "" {
		name := workflow.GetInfo(ctx).WorkflowType.Name
		refused(ctx, "start", name, reason)
		return nil, temporal.NewNonRetryableApplicationError("workflow input refused: not addressed to this workflow",
			domain.ECodeInvalid, nil)
	}
	return i.Next.ExecuteWorkflow(ctx, in)
}

func (i *inbound) HandleSignal(ctx workflow.Context, in *interceptor.HandleSignalInput) error {
	if n := len(in.Arg.GetPayloads()); n != 1 {
		refused(ctx, "signal", in.SignalName, refusedPayloads)
		return nil // dropped: the workflow goes on
	}
	return i.Next.HandleSignal(ctx, in)
}

func (i *inbound) ValidateUpdate(ctx workflow.Context, in *interceptor.UpdateInput) error {
	if reason := checkArgs(ctx, in.Args); reason != "" {
		refused(ctx, "update", in.Name, reason)
		return reject(domain.ECodeInvalid, "Cette demande ne concerne pas ce dossier.")
	}
	return i.Next.ValidateUpdate(ctx, in)
}

// checkArgs is "" when args is one argument addressed to this workflow.
// The SDK decodes a missing payload as a zero value, addressed to no
// workflow; it decodes starts and updates before an interceptor sees their
// payloads and never decodes payloads beyond the handler's one argument,
// so extra ones cannot be counted here (they are ignored).
func checkArgs(ctx workflow.Context, args []any) string {
	if len(args) != 1 {
		return refusedPayloads
	}
	a, ok := args[0].(addressed)
	if !ok || a.AddressedTo() != workflow.GetInfo(ctx).WorkflowExecution.ID {
		return refusedAddress
	}
	return ""
}

// refused logs and counts a refused inbound call (neither happens on
// replay: the SDK's logger and metrics handler skip it).
func refused(ctx workflow.Context, call, name, reason string) {
	workflow.GetLogger(ctx).Warn("inbound workflow call refused", "call", call, "name", name, "reason", reason)
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"call": call, "name": name, "reason": reason}).
		Counter(MetricRefusedCalls).Inc(1)
}

// admitted reports whether a payment signal is addressed to this workflow
// and names one of its payment requests (addressedChecks); a refused one
// is logged and counted, and changes nothing.
func admitted(ctx workflow.Context, v workflow.Version, run *intakeRun, sig paymentSignal) bool {
	if !addressedChecks(ctx, v) {
		return true
	}
	target, intent, address, asset, network := sig.ev.Target, sig.ev.IntentID, sig.ev.Address, sig.ev.Asset, sig.ev.Network
	if sig.name == SignalPaymentDust {
		target, intent, address, asset, network = sig.dust.Target, sig.dust.IntentID, sig.dust.Address, sig.dust.Asset, sig.dust.Network
	}
	switch {
	case target != workflow.GetInfo(ctx).WorkflowExecution.ID:
		refused(ctx, "signal", sig.name, refusedAddress)
		return false
	case !run.st.Payments.ownRequest(ctx, v, run.kind, run.ref, intent, address, asset, network):
		refused(ctx, "signal", sig.name, refusedRequest)
		return false
	}
	return true
}

// changeAddressed extends vAddressed's checks to workflows started before
// it, from the first signal or support update they handle after the
// upgrade (one marker); their recorded histories replay as they ran.
const changeAddressed = "kernodeck-addressed"

// addressedChecks reports whether signals and support updates are checked
// against their address, payment request and support_actions row.
func addressedChecks(ctx workflow.Context, v workflow.Version) bool {
	return v >= vAddressed || workflow.GetVersion(ctx, changeAddressed, workflow.DefaultVersion, 1) == 1
}

// checkAction has a support update's support_actions row checked against
// what the update claims (addressedChecks), before the update changes
// anything; a mismatch is refused, logged and counted.
func checkAction(ctx workflow.Context, v workflow.Version, update string, c domain.SupportActionClaim) error {
	if !addressedChecks(ctx, v) {
		return nil
	}
	var a *activities.Activities
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	err := workflow.ExecuteActivity(actx, a.CheckSupportAction, c).Get(ctx, nil)
	if err == nil {
		return nil
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == domain.ECodeInvalid {
		refused(ctx, "update", update, refusedAction)
	}
	return asRefusal(err, "L'action de support n'a pas pu être vérifiée. Réessayez plus tard.")
}
