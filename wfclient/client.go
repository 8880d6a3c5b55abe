// Package wfclient drives the rental and top-up workflows through the
// Temporal client: it starts them and runs their updates, turning the
// workflows' refusals back into domain errors for the API.
package wfclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// Workflow type names, as registered by the worker.
const (
	RentalWorkflowType = workflows.RentalWorkflowType
	TopUpWorkflowType  = workflows.TopUpWorkflowType
)

// Client implements api.Workflows over a Temporal client.
type Client struct {
	Temporal client.Client
	// MaxVersion caps the command version of the workflows it starts
	// (KERNODECK_WORKFLOW_VERSION; 0: the newest of the worker that runs
	// their first task). A rolling restart onto a release with a new
	// version keeps it at the old one until every worker runs the release.
	MaxVersion int
}

// StartRental starts the order's rental workflow; starting one that already
// runs (or ran) is not an error, so the API and the reconciler may race.
func (c *Client) StartRental(ctx context.Context, in workflows.RentalInput) error {
	_, err := c.StartRentalOnce(ctx, in)
	return err
}

// StartRentalOnce is StartRental that tells whether it started the
// workflow: started is false when one with the order's ID exists, running
// or closed (recover leaves it alone).
func (c *Client) StartRentalOnce(ctx context.Context, in workflows.RentalInput) (started bool, err error) {
	opts := client.StartWorkflowOptions{
		ID:                       workflows.RentalWorkflowID(in.OrderRef),
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		Memo: map[string]any{
			"order":    in.OrderRef,
			"customer": strconv.FormatInt(in.AccountID, 10),
			"gpu":      fmt.Sprintf("%d x %s (%d lots)", in.TotalGPUs, in.GPUModel, in.Lots),
			"days":     in.DurationDays,
			"total":    domain.FormatUSD(in.TotalCents) + " USD",
		},
	}
	if c.MaxVersion > 0 {
		in.Config.MaxVersion = c.MaxVersion
	}
	return c.start(ctx, opts, RentalWorkflowType, in)
}

// StartTopUp starts the top-up's workflow, idempotently.
func (c *Client) StartTopUp(ctx context.Context, in workflows.TopUpInput) error {
	_, err := c.StartTopUpOnce(ctx, in)
	return err
}

// StartTopUpOnce is StartTopUp that tells whether it started the workflow
// (see StartRentalOnce).
func (c *Client) StartTopUpOnce(ctx context.Context, in workflows.TopUpInput) (started bool, err error) {
	opts := client.StartWorkflowOptions{
		ID:                       workflows.TopUpWorkflowID(in.TopUpRef),
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		Memo: map[string]any{
			"topup":    in.TopUpRef,
			"customer": strconv.FormatInt(in.AccountID, 10),
			"amount":   domain.FormatUSD(in.AmountCents) + " USD",
		},
	}
	if c.MaxVersion > 0 {
		in.MaxVersion = c.MaxVersion
	}
	return c.start(ctx, opts, TopUpWorkflowType, in)
}

func (c *Client) start(ctx context.Context, opts client.StartWorkflowOptions, wfType string, in any) (bool, error) {
	// Without it the SDK answers a running workflow's ID with that run, as
	// if it had started it.
	opts.WorkflowExecutionErrorWhenAlreadyStarted = true
	_, err := c.Temporal.ExecuteWorkflow(ctx, opts, wfType, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return false, nil
	}
	if err != nil {
		return false, unavailable(fmt.Errorf("start %s: %w", opts.ID, err))
	}
	return true, nil
}

// StartPayoutBatch starts a batch's workflow; a retried start finds it
// running and changes nothing.
func (c *Client) StartPayoutBatch(ctx context.Context, batchRef string) error {
	opts := client.StartWorkflowOptions{
		ID:                       workflows.PayoutWorkflowID(batchRef),
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		Memo:                     map[string]any{"payout_batch": batchRef},
	}
	_, err := c.start(ctx, opts, workflows.PayoutWorkflowType, workflows.PayoutInput{BatchRef: batchRef})
	return err
}

// TellPayoutBatch signals a batch's workflow that the store changed it.
func (c *Client) TellPayoutBatch(ctx context.Context, batchRef string, voided bool) error {
	wid := workflows.PayoutWorkflowID(batchRef)
	err := c.Temporal.SignalWorkflow(ctx, wid, "", workflows.SignalPayoutBatch,
		workflows.BatchNews{Addressed: to(wid), Voided: voided})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return unavailable(fmt.Errorf("tell %s: %w", wid, err))
	}
	return nil
}

// PayFromBalance runs the pay-from-balance update.
func (c *Client) PayFromBalance(ctx context.Context, orderRef string) error {
	wid := workflows.RentalWorkflowID(orderRef)
	return c.update(ctx, wid, workflows.UpdatePayFromBalance, workflows.PayFromBalance{Addressed: to(wid)})
}

// CancelOrder runs the cancel update on a rental.
func (c *Client) CancelOrder(ctx context.Context, orderRef string, req workflows.CancelRequest) error {
	req.Addressed = to(workflows.RentalWorkflowID(orderRef))
	return c.update(ctx, req.Target, workflows.UpdateCancel, req)
}

// CancelTopUp runs the cancel update on a top-up.
func (c *Client) CancelTopUp(ctx context.Context, topUpRef string, req workflows.CancelRequest) error {
	req.Addressed = to(workflows.TopUpWorkflowID(topUpRef))
	return c.update(ctx, req.Target, workflows.UpdateCancel, req)
}

// AttributeOrderPayment runs attribute-payment on a rental.
func (c *Client) AttributeOrderPayment(ctx context.Context, orderRef string, a workflows.Attribution) error {
	a.Addressed = to(workflows.RentalWorkflowID(orderRef))
	return c.update(ctx, a.Target, workflows.UpdateAttributePayment, a)
}

// AttributeTopUpPayment runs attribute-payment on a top-up.
func (c *Client) AttributeTopUpPayment(ctx context.Context, topUpRef string, a workflows.Attribution) error {
	a.Addressed = to(workflows.TopUpWorkflowID(topUpRef))
	return c.update(ctx, a.Target, workflows.UpdateAttributePayment, a)
}

// Extend runs the extend update.
func (c *Client) Extend(ctx context.Context, orderRef string, e workflows.Extension) error {
	e.Addressed = to(workflows.RentalWorkflowID(orderRef))
	return c.update(ctx, e.Target, workflows.UpdateExtend, e)
}

// EndEarly runs the end-early update.
func (c *Client) EndEarly(ctx context.Context, orderRef string, a workflows.SupportAction) error {
	a.Addressed = to(workflows.RentalWorkflowID(orderRef))
	return c.update(ctx, a.Target, workflows.UpdateEndEarly, a)
}

// RetryProvisioning runs the retry-provisioning update.
func (c *Client) RetryProvisioning(ctx context.Context, orderRef string, a workflows.SupportAction) error {
	a.Addressed = to(workflows.RentalWorkflowID(orderRef))
	return c.update(ctx, a.Target, workflows.UpdateRetryProvisioning, a)
}

// Refund runs the refund update.
func (c *Client) Refund(ctx context.Context, orderRef string, r workflows.Refund) error {
	r.Addressed = to(workflows.RentalWorkflowID(orderRef))
	return c.update(ctx, r.Target, workflows.UpdateRefund, r)
}

// RefundException refunds a queued received amount of an order or top-up
// through its settlement workflow, starting that workflow if it does not
// run (update-with-start), so a refund works whether the target's own
// workflow runs or closed long ago.
func (c *Client) RefundException(ctx context.Context, e domain.Exception, r domain.ExceptionRefund) error {
	r.Addressed = to(workflows.SettlementWorkflowID(e.TargetRef))
	return c.settle(ctx, e, workflows.UpdateRefundException, r)
}

// ResolveException closes a reverted payment's flag through the same
// settlement workflow.
func (c *Client) ResolveException(ctx context.Context, e domain.Exception, r domain.ExceptionResolve) error {
	r.Addressed = to(workflows.SettlementWorkflowID(e.TargetRef))
	return c.settle(ctx, e, workflows.UpdateResolveException, r)
}

func (c *Client) settle(ctx context.Context, e domain.Exception, update string, arg any) error {
	start := c.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       workflows.SettlementWorkflowID(e.TargetRef),
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		Memo:                     map[string]any{"target": e.TargetRef, "customer": strconv.FormatInt(e.AccountID, 10)},
	}, workflows.SettlementWorkflowType, workflows.SettlementInput{TargetKind: e.TargetKind, TargetRef: e.TargetRef})
	h, err := c.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			// Named although the start names it too: the SDK seals the
			// update's arguments for the ID given here, and a payload
			// sealed for no workflow is refused inside one (codec.ErrUnbound).
			WorkflowID:   workflows.SettlementWorkflowID(e.TargetRef),
			UpdateName:   update,
			Args:         []any{arg},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	if err != nil {
		return toDomain(fmt.Errorf("%s on %s: %w", update, workflows.SettlementWorkflowID(e.TargetRef), err))
	}
	return nil
}

// CreateOrderIntent runs create-payment-intent on a rental.
func (c *Client) CreateOrderIntent(ctx context.Context, orderRef string, req workflows.IntentRequest) (domain.Intent, error) {
	var it domain.Intent
	req.Addressed = to(workflows.RentalWorkflowID(orderRef))
	err := c.updateResult(ctx, req.Target, workflows.UpdateCreatePaymentIntent, &it, req)
	return it, err
}

// CreateTopUpIntent runs create-payment-intent on a top-up.
func (c *Client) CreateTopUpIntent(ctx context.Context, topUpRef string, req workflows.IntentRequest) (domain.Intent, error) {
	var it domain.Intent
	req.Addressed = to(workflows.TopUpWorkflowID(topUpRef))
	err := c.updateResult(ctx, req.Target, workflows.UpdateCreatePaymentIntent, &it, req)
	return it, err
}

// to addresses an update's argument to its workflow: the worker refuses
// an argument addressed to another (workflows.InboundInterceptor).
func to(workflowID string) domain.Addressed { return domain.Addressed{Target: workflowID} }

// update runs an update with its one argument (every update takes one).
func (c *Client) update(ctx context.Context, workflowID, name string, arg any) error {
	return c.updateResult(ctx, workflowID, name, nil, arg)
}

func (c *Client) updateResult(ctx context.Context, workflowID, name string, result, arg any) error {
	h, err := c.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		UpdateName:   name,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, result)
	}
	if err != nil {
		return toDomain(fmt.Errorf("%s on %s: %w", name, workflowID, err))
	}
	return nil
}

// passThrough are the codes a workflow may refuse with; anything else is
// treated as an outage, never shown raw to a customer.
var passThrough = []string{
	domain.ECodeInvalid, domain.ECodeConflict, domain.ECodeInsufficient, domain.ECodeNotFound,
	domain.ECodeNoCapacity, domain.ECodeMethodUnavailable, domain.ECodeRateUnavailable, domain.ECodeIntentActive,
	domain.ECodeExtensionUnavailable,
}

// toDomain maps a Temporal error to a domain error.
func toDomain(err error) error {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && slices.Contains(passThrough, app.Type()) {
		return fmt.Errorf("%w (%w)", &domain.Error{Code: app.Type(), Message: app.Message()}, err)
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%w (%w)", domain.Errorf(domain.ECodeConflict, "Ce dossier est clos : l'action n'est plus possible."), err)
	}
	return unavailable(err)
}

func unavailable(err error) error {
	return fmt.Errorf("%w (%w)", domain.Errorf(domain.ECodeUnavailable,
		"Le service de suivi des commandes est momentanément indisponible. Réessayez dans un instant."), err)
}

// Refundable is what the order's refund may still credit, as its
// workflow's status query answers it.
func (c *Client) Refundable(ctx context.Context, orderRef string) (int64, error) {
	v, err := c.Temporal.QueryWorkflow(ctx, workflows.RentalWorkflowID(orderRef), "", workflows.QueryStatus)
	if err != nil {
		return 0, toDomain(fmt.Errorf("status of %s: %w", orderRef, err))
	}
	var st workflows.RentalStatus
	if err := v.Get(&st); err != nil {
		return 0, fmt.Errorf("status of %s: %w", orderRef, err)
	}
	return st.RefundableCents, nil
}
