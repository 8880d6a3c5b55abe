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

// noValidRequest refuses, from vDrain, a new request while one of the
// run's is still valid: refused by the validator, it leaves no history
// (the store refuses it too, for runs before vDrain).
func noValidRequest(ctx workflow.Context, run *intakeRun) error {
	if until := run.st.Payments.ValidUntil; run.v >= vDrain && workflow.Now(ctx).Before(until) {
		return refusal(domain.ErrIntentActive(until))
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

// requestKey is the key of a run's next payment request (counted by
// intents). From vDrain a creation that gave up without a refusal (the
// store unreachable, perhaps after its first attempt wrote the request)
// gives its key back: the customer's next try finds that request by key,
// instead of a refusal for a request that exists.
func requestKey(v workflow.Version, intents *int) (key string, giveBack func(error)) {
	*intents++
	n := *intents
	return fmt.Sprintf("intent:%d", n), func(err error) {
		if v >= vDrain && *intents == n && refusalCode(err) == domain.ECodeUnavailable {
			*intents--
		}
	}
}

// refusalCode is the domain code of an update refusal ("" if none).
func refusalCode(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Type()
	}
	return ""
}

func (r *rental) validateCreateIntent(ctx workflow.Context, req IntentRequest) error {
	if err := validateIntentRequest(req); err != nil {
		return err
	}
	if r.debiting || !r.awaiting() {
		return errNotAwaitingPayment()
	}
	return noValidRequest(ctx, &r.intakeRun)
}

func (r *rental) createPaymentIntent(ctx workflow.Context, req IntentRequest) (domain.Intent, error) {
	if err := r.mu.Lock(ctx); err != nil {
		return domain.Intent{}, errUnavailable()
	}
	defer r.mu.Unlock()
	if err := r.validateCreateIntent(ctx, req); err != nil {
		return domain.Intent{}, err
	}
	key, giveBack := requestKey(r.v, &r.Intents)
	it, err := createIntent(ctx, activities.CreateIntentInput{
		TargetKind: "order", TargetRef: r.in.OrderRef, AccountID: r.in.AccountID,
		Asset: req.Asset, Network: req.Network, USDCents: r.in.TotalCents - r.netPaid(),
		RequestKey: key, NotAfter: r.PayUntil,
	})
	if err != nil {
		giveBack(err)
		return domain.Intent{}, err
	}
	r.Payments.addRequest(it)
	r.sa.notePayment(ctx, PaymentEvent{Asset: it.Asset, Network: it.Network})
	r.sa.settle(ctx)
	return it, nil
}

func (t *topUp) validateCreateIntent(ctx workflow.Context, req IntentRequest) error {
	if err := validateIntentRequest(req); err != nil {
		return err
	}
	if !t.awaiting() {
		return reject(domain.ECodeConflict, "Cette recharge n'attend plus de paiement.")
	}
	return noValidRequest(ctx, &t.intakeRun)
}

func (t *topUp) createPaymentIntent(ctx workflow.Context, req IntentRequest) (domain.Intent, error) {
	if err := t.mu.Lock(ctx); err != nil {
		return domain.Intent{}, errUnavailable()
	}
	defer t.mu.Unlock()
	if err := t.validateCreateIntent(ctx, req); err != nil {
		return domain.Intent{}, err
	}
	key, giveBack := requestKey(t.v, &t.Intents)
	it, err := createIntent(ctx, activities.CreateIntentInput{
		TargetKind: "topup", TargetRef: t.in.TopUpRef, AccountID: t.in.AccountID,
		Asset: req.Asset, Network: req.Network, USDCents: t.in.AmountCents - t.Status.ReceivedCents,
		RequestKey: key, NotAfter: t.PayUntil,
	})
	if err != nil {
		giveBack(err)
		return domain.Intent{}, err
	}
	t.Payments.addRequest(it)
	t.sa.notePayment(ctx, PaymentEvent{Asset: it.Asset, Network: it.Network})
	t.sa.settle(ctx)
	return it, nil
}
