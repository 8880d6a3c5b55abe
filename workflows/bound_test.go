package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// requireContinued runs in to its run's end and checks it continued as
// new.
func (s *RentalWorkflowSuite) requireContinued(in RentalInput) {
	s.env.ExecuteWorkflow(RentalWorkflow, in)
	s.Require().True(s.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	s.Require().ErrorAs(s.env.GetWorkflowError(), &can, "the run continues as new")
}

// refuseIntents has every payment request refused by the store (no rate),
// the handler having run: each counts as an update handled.
func (s *RentalWorkflowSuite) refuseIntents() {
	s.env.OnActivity(a.CreatePaymentIntent, mock.Anything, mock.Anything).Return(domain.Intent{},
		temporal.NewNonRetryableApplicationError("Aucun cours récent n'est disponible pour BTC.", domain.ECodeRateUnavailable, nil))
}

// A run at its history bound that then receives only an update continues
// as new once the update is handled (before vDrain only a batch of
// payment signals checked the bound: it ran on to its expiry, or to the
// server's termination at 51,200 events).
func (s *RentalWorkflowSuite) TestUpdateAtTheHistoryBoundContinuesAsNew() {
	s.env.OnActivity(a.CreatePaymentIntent, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.CreateIntentInput) (domain.Intent, error) {
			// The history reaches its bound with the update's own events.
			s.env.SetCurrentHistoryLength(DefaultMaxHistory)
			return domain.Intent{}, temporal.NewNonRetryableApplicationError("Aucun cours récent n'est disponible pour BTC.",
				domain.ECodeRateUnavailable, nil)
		}).Once()
	out, _ := s.intentAt(time.Minute, IntentRequest{Asset: "BTC", Network: "bitcoin"})
	s.requireContinued(rentalInput(3))
	s.Require().True(out.done)
	s.requireAppError(out.err, domain.ECodeRateUnavailable)
}

// A run fed only updates continues as new before the server's limit of
// updates per run (2,000), past which every update is refused.
func (s *RentalWorkflowSuite) TestUpdatesAloneContinueAsNewBeforeTheLimit() {
	s.refuseIntents()
	outs := make([]*updateOutcome, maxUpdatesPerRun)
	for i := range outs {
		outs[i] = s.updateAt(time.Minute+time.Duration(i)*time.Second, UpdateCreatePaymentIntent,
			IntentRequest{Asset: "BTC", Network: "bitcoin"})
	}
	s.requireContinued(rentalInput(3))
	for i, out := range outs {
		s.Require().True(out.done, "update %d answered", i)
		s.requireAppError(out.err, domain.ECodeRateUnavailable)
	}
}

// intentsValidAnHour has the store make every payment request asked for,
// valid for an hour; it returns the count of those made.
func (s *RentalWorkflowSuite) intentsValidAnHour() *int {
	calls := new(int)
	s.env.OnActivity(a.CreatePaymentIntent, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CreateIntentInput) (domain.Intent, error) {
			*calls++
			return domain.Intent{ID: "PI-" + in.RequestKey, Asset: in.Asset, Network: in.Network,
				Deadline: s.env.Now().Add(time.Hour)}, nil
		})
	return calls
}

// While a payment request is valid a new one is refused by the validator
// (no history, no activity); once it expired, a new one is made.
func (s *RentalWorkflowSuite) TestIntentStillValidRefusedByTheValidator() {
	calls := s.intentsValidAnHour()
	first, _ := s.intentAt(time.Minute, IntentRequest{Asset: "BTC", Network: "bitcoin"})
	again, _ := s.intentAt(10*time.Minute, IntentRequest{Asset: "LTC", Network: "litecoin"})
	later, it := s.intentAt(2*time.Hour, IntentRequest{Asset: "LTC", Network: "litecoin"})
	in := rentalInput(3)
	in.Config.UnpaidTimeout = 3 * time.Hour
	s.run(in)

	s.Require().NoError(first.err)
	s.requireAppError(again.rejectErr, domain.ECodeIntentActive)
	s.Require().NoError(later.rejectErr)
	s.Require().NoError(later.err)
	s.Equal("PI-intent:2", it.ID)
	s.Equal(2, *calls, "the refused request ran no activity")
}

// A creation that gave up without a refusal (the store unreachable, its
// first attempt perhaps written) gives its key back: the customer's next
// try finds the request written under it.
func (s *RentalWorkflowSuite) TestIntentCreationThatGaveUpGivesItsKeyBack() {
	var keys []string
	s.env.OnActivity(a.CreatePaymentIntent, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CreateIntentInput) (domain.Intent, error) {
			keys = append(keys, in.RequestKey)
			if len(keys) <= 5 { // every attempt of the first creation
				return domain.Intent{}, errors.New("connection refused")
			}
			return domain.Intent{ID: "PI-" + in.RequestKey, Asset: in.Asset, Network: in.Network}, nil
		})
	first, _ := s.intentAt(time.Minute, IntentRequest{Asset: "BTC", Network: "bitcoin"})
	retried, it := s.intentAt(10*time.Minute, IntentRequest{Asset: "BTC", Network: "bitcoin"})
	in := rentalInput(3)
	in.Config.UnpaidTimeout = time.Hour
	s.run(in)

	s.requireAppError(first.err, domain.ECodeUnavailable)
	s.Require().NoError(retried.err)
	s.Equal("PI-intent:1", it.ID, "the request written under the first key")
	s.Equal(6, len(keys))
	for i, k := range keys {
		s.Equal("intent:1", k, fmt.Sprintf("call %d", i))
	}
}
