package api

import (
	"context"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// Workflows is how the API acts on the rental and top-up workflows. It is
// implemented over the Temporal client by workflows.Client. Refusals come
// back as *domain.Error (code + French message); an unreachable Temporal as
// ECodeUnavailable.
type Workflows interface {
	StartRental(ctx context.Context, in workflows.RentalInput) error
	StartTopUp(ctx context.Context, in workflows.TopUpInput) error
	// PayFromBalance runs the pay-from-balance update on the order's workflow.
	PayFromBalance(ctx context.Context, orderRef string) error
	// CancelOrder / CancelTopUp run the cancel update.
	CancelOrder(ctx context.Context, orderRef string, req workflows.CancelRequest) error
	CancelTopUp(ctx context.Context, topUpRef string, req workflows.CancelRequest) error
	// AttributeOrderPayment / AttributeTopUpPayment run attribute-payment.
	AttributeOrderPayment(ctx context.Context, orderRef string, a workflows.Attribution) error
	AttributeTopUpPayment(ctx context.Context, topUpRef string, a workflows.Attribution) error
	Extend(ctx context.Context, orderRef string, e workflows.Extension) error
	EndEarly(ctx context.Context, orderRef string, a workflows.SupportAction) error
	RetryProvisioning(ctx context.Context, orderRef string, a workflows.SupportAction) error
	Refund(ctx context.Context, orderRef string, r workflows.Refund) error
	// Refundable is what the order's refund may still credit.
	Refundable(ctx context.Context, orderRef string) (int64, error)
	// RefundException refunds a queued received amount through its
	// target's settlement workflow (started if needed).
	RefundException(ctx context.Context, e domain.Exception, r domain.ExceptionRefund) error
	ResolveException(ctx context.Context, e domain.Exception, r domain.ExceptionResolve) error
	// CreateOrderIntent / CreateTopUpIntent run create-payment-intent and
	// return the payment request.
	CreateOrderIntent(ctx context.Context, orderRef string, req workflows.IntentRequest) (domain.Intent, error)
	CreateTopUpIntent(ctx context.Context, topUpRef string, req workflows.IntentRequest) (domain.Intent, error)
}
