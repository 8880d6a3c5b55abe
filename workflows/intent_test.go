package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// intentAt runs create-payment-intent at d and captures the intent returned.
func (s *RentalWorkflowSuite) intentAt(d time.Duration, req IntentRequest) (*updateOutcome, *domain.Intent) {
	out, it := &updateOutcome{}, &domain.Intent{}
	s.env.RegisterDelayedCallback(func() {
		s.env.UpdateWorkflow(UpdateCreatePaymentIntent, "intent@"+d.String(), &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { out.done, out.rejectErr = true, err },
			OnComplete: func(v any, err error) {
				out.done, out.err = true, err
				if got, ok := v.(domain.Intent); ok && err == nil {
					*it = got
				}
			},
		}, req)
	}, d)
	return out, it
}

// A payment request is for what is still due, with a key per request so a
// retried activity finds the same one; the watchers' later confirmation pays.
func (s *RentalWorkflowSuite) TestCreatePaymentIntentForWhatIsDue() {
	s.mockAllMachine()
	var calls []activities.CreateIntentInput
	s.env.OnActivity(a.CreatePaymentIntent, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CreateIntentInput) (domain.Intent, error) {
			s.mu.Lock()
			calls = append(calls, in)
			s.mu.Unlock()
			return domain.Intent{ID: "PI-" + in.RequestKey, Asset: in.Asset, Network: in.Network, USDCents: in.USDCents}, nil
		})
	first, it1 := s.intentAt(time.Minute, IntentRequest{Asset: "BTC", Network: "bitcoin"})
	s.signalAt(2*time.Minute, SignalPaymentConfirmed, payment("tx1", 2000))
	second, it2 := s.intentAt(3*time.Minute, IntentRequest{Asset: "USDT", Network: "tron"})
	s.signalAt(4*time.Minute, SignalPaymentConfirmed, payment("tx2", totalCents-2000))
	late, _ := s.intentAt(5*time.Minute, IntentRequest{Asset: "BTC", Network: "bitcoin"})
	st := s.run(rentalInput(3))

	s.Require().NoError(first.err)
	s.Require().NoError(second.err)
	s.Equal("PI-intent:1", it1.ID)
	s.Equal("PI-intent:2", it2.ID)
	s.Require().Len(calls, 2)
	s.Equal(activities.CreateIntentInput{TargetKind: "order", TargetRef: "KD-TEST000001", AccountID: 42,
		Asset: "BTC", Network: "bitcoin", USDCents: totalCents, RequestKey: "intent:1",
		NotAfter: testStart.Add(DefaultUnpaidTimeout)}, calls[0]) // never past the order's expiry
	s.Equal(totalCents-2000, calls[1].USDCents) // only what is still due
	s.Equal("intent:2", calls[1].RequestKey)
	s.Require().Error(late.rejectErr) // paid: no more requests
	s.requireAppError(late.rejectErr, domain.ECodeConflict)
	s.Equal(PhaseEnded, st.Status)
}

func (s *RentalWorkflowSuite) TestCreatePaymentIntentRefusals() {
	s.mockAllMachine()
	s.env.OnActivity(a.CreatePaymentIntent, mock.Anything, mock.Anything).Return(domain.Intent{},
		temporal.NewNonRetryableApplicationError("Aucun cours récent n'est disponible pour BTC.", domain.ECodeRateUnavailable, nil)).Once()
	unknown, _ := s.intentAt(time.Minute, IntentRequest{Asset: "USDT", Network: "bitcoin"})
	stale, _ := s.intentAt(2*time.Minute, IntentRequest{Asset: "BTC", Network: "bitcoin"})
	after := s.queryAt(3 * time.Minute)
	in := rentalInput(3)
	in.Config.UnpaidTimeout = time.Hour
	st := s.run(in)

	s.requireAppError(unknown.rejectErr, domain.ECodeInvalid)
	s.NoError(stale.rejectErr)
	s.requireAppError(stale.err, domain.ECodeRateUnavailable)
	s.Equal(PhaseAwaitingPayment, after.Status) // the order is unchanged
	s.Equal(PhaseExpired, st.Status)
}
