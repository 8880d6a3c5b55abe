package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// UpdateCreatePaymentIntent creates a payment request (IntentRequest) for
// what is still due on a rental or a top-up and returns it (domain.Intent),
// or refuses with a clear reason (method not offered, no fresh rate, a
// request still valid, nothing due).
const UpdateCreatePaymentIntent = "create-payment-intent"

// IntentRequest is the method the customer picked.
type IntentRequest struct {
	domain.Addressed
	Asset   string
	Network string
}

func validateIntentRequest(req IntentRequest) error {
	if _, ok := domain.LookupMethod(req.Asset, req.Network); !ok {
		return reject(domain.ECodeInvalid,
			"Méthode de paiement inconnue : choisissez BTC/bitcoin, ETH/ethereum, USDT/ethereum, USDC/ethereum, TRX/tron, USDT/tron, SOL/solana ou LTC/litecoin.")
	}
	return nil
}

// createIntent runs the activity. Its refusals (non-retryable application
// errors typed with a domain code) reach the caller as plain refusals.
func createIntent(ctx workflow.Context, in activities.CreateIntentInput) (domain.Intent, error) {
	var a *activities.Activities
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Second,
			MaximumAttempts:    5,
		},
	})
	var it domain.Intent
	if err := workflow.ExecuteActivity(ctx, a.CreatePaymentIntent, in).Get(ctx, &it); err != nil {
		return domain.Intent{}, asRefusal(err, "La demande de paiement n'a pas pu être créée. Réessayez dans un instant.")
	}
	return it, nil
}

func (r *rental) validateCreateIntent(req IntentRequest) error {
	if err := validateIntentRequest(req); err != nil {
		return err
	}
	if r.debiting || !r.awaiting() {
		return errNotAwaitingPayment()
	}
	return nil
}

func (r *rental) createPaymentIntent(ctx workflow.Context, req IntentRequest) (domain.Intent, error) {
	if err := r.mu.Lock(ctx); err != nil {
		return domain.Intent{}, errUnavailable()
	}
	defer r.mu.Unlock()
	if err := r.validateCreateIntent(req); err != nil {
		return domain.Intent{}, err
	}
	r.Intents++
	it, err := createIntent(ctx, activities.CreateIntentInput{
		TargetKind: "order", TargetRef: r.in.OrderRef, AccountID: r.in.AccountID,
		Asset: req.Asset, Network: req.Network, USDCents: r.in.TotalCents - r.netPaid(),
		RequestKey: fmt.Sprintf("intent:%d", r.Intents), NotAfter: r.PayUntil,
	})
	if err != nil {
		return domain.Intent{}, err
	}
	r.Payments.addRequest(it)
	r.sa.notePayment(ctx, PaymentEvent{Asset: it.Asset, Network: it.Network})
	r.sa.settle(ctx)
	return it, nil
}

func (t *topUp) validateCreateIntent(req IntentRequest) error {
	if err := validateIntentRequest(req); err != nil {
		return err
	}
	if !t.awaiting() {
		return reject(domain.ECodeConflict, "Cette recharge n'attend plus de paiement.")
	}
	return nil
}

func (t *topUp) createPaymentIntent(ctx workflow.Context, req IntentRequest) (domain.Intent, error) {
	if err := t.mu.Lock(ctx); err != nil {
		return domain.Intent{}, errUnavailable()
	}
	defer t.mu.Unlock()
	if err := t.validateCreateIntent(req); err != nil {
		return domain.Intent{}, err
	}
	t.Intents++
	it, err := createIntent(ctx, activities.CreateIntentInput{
		TargetKind: "topup", TargetRef: t.in.TopUpRef, AccountID: t.in.AccountID,
		Asset: req.Asset, Network: req.Network, USDCents: t.in.AmountCents - t.Status.ReceivedCents,
		RequestKey: fmt.Sprintf("intent:%d", t.Intents), NotAfter: t.PayUntil,
	})
	if err != nil {
		return domain.Intent{}, err
	}
	t.Payments.addRequest(it)
	t.sa.notePayment(ctx, PaymentEvent{Asset: it.Asset, Network: it.Network})
	t.sa.settle(ctx)
	return it, nil
}
