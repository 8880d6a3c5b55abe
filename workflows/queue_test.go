package workflows

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// inLine makes the paid order find no machine free, then be served at the
// served-th ask of AwaitMachine (0: never); it returns the asks' count.
func (s *RentalWorkflowSuite) inLine(served int32) *atomic.Int32 {
	var asks atomic.Int32
	s.env.OnActivity(a.TakeMachine, mock.Anything, mock.Anything).Return(false, nil).Once()
	s.env.OnActivity(a.AwaitMachine, mock.Anything, mock.Anything).Return(func(context.Context, activities.ReserveInput) error {
		if n := asks.Add(1); served == 0 || n < served {
			return temporal.NewApplicationError("not yet", activities.ErrTypeNotServed)
		}
		return nil
	}).Maybe()
	s.mockAllMachine()
	return &asks
}

// A paid order with no free machine waits in line (not a provisioning
// failure, not a refund), and its period starts when the machine comes.
func (s *RentalWorkflowSuite) TestPaidOrderWaitsInLineThenIsServed() {
	asks := s.inLine(4)
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	waiting := s.queryAt(time.Minute + time.Second)
	st := s.run(rentalInput(3))

	s.Equal(PhaseWaitingForMachine, waiting.Status)
	s.Equal(PhaseEnded, st.Status)
	s.EqualValues(4, asks.Load())
	// Served after three asks refused, awaitMachineEvery apart.
	s.False(st.PeriodStart.Before(testStart.Add(time.Minute+3*awaitMachineEvery)), "period started at %v", st.PeriodStart)
	s.Empty(s.eventsOf(domain.EventProvisioningFailed))
	paid, line := s.eventsOf(domain.EventPaid), s.eventsOf(domain.EventWaitingForMachine)
	s.Require().Len(paid, 1)
	s.Require().Len(line, 1)
	s.Equal(domain.StatusWaitingForMachine, line[0].Status)
	s.Contains(line[0].Message, "file")
	s.Equal(1, s.machine.called(activities.StepReserve))
}

// The customer takes all the money back from the line, once (a second
// ask sent with the first is refused): the order
// is refunded and closed, its machine released, and nothing provisioned.
func (s *RentalWorkflowSuite) TestCustomerTakesMoneyBackFromLine() {
	s.inLine(0)
	customer := domain.CustomerAgent(42)
	part := s.updateAt(10*time.Minute, UpdateRefund, Refund{ActionID: 30, Agent: customer, AmountCents: totalCents - 1, Reason: "reprise"})
	back := s.updateAt(20*time.Minute, UpdateRefund, Refund{ActionID: 31, Agent: customer, AmountCents: totalCents, Reason: "reprise"})
	again := &updateOutcome{}
	s.env.RegisterDelayedCallback(func() {
		s.env.UpdateWorkflow(UpdateRefund, "again", &testsuite.TestUpdateCallback{
			OnAccept:   func() {},
			OnReject:   func(err error) { again.done, again.rejectErr = true, err },
			OnComplete: func(_ any, err error) { again.done, again.err = true, err },
		}, Refund{ActionID: 32, Agent: customer, AmountCents: totalCents, Reason: "reprise"})
	}, 20*time.Minute)
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	st := s.run(rentalInput(3))

	s.Require().True(part.done && back.done && again.done)
	s.requireAppError(part.rejectErr, domain.ECodeConflict)
	s.NoError(back.rejectErr)
	s.NoError(back.err)
	// Refused by its validator, or by the handler's check once the first
	// is handled.
	s.requireAppError(errors.Join(again.rejectErr, again.err), domain.ECodeConflict)
	s.Equal(PhaseRefunded, st.Status)
	s.Equal(totalCents, st.RefundedCents)
	refunded := s.eventsOf(domain.EventRefunded)
	s.Require().Len(refunded, 1)
	s.Equal(domain.StatusRefunded, refunded[0].Status)
	s.Equal(domain.Posting{Kind: domain.PostingRefund, AccountID: 42, Cents: totalCents, Memo: "reprise"}, *refunded[0].Posting)
	s.Contains(s.eventsOf(domain.EventSupportAction)[0].Message, "Vous avez repris")
	s.env.AssertActivityNumberOfCalls(s.T(), "ReleaseCapacity", 1)
	s.env.AssertActivityNotCalled(s.T(), "Provision", mock.Anything, mock.Anything)
}

// The customer cannot take money back from an order that is not in line.
func (s *RentalWorkflowSuite) TestCustomerTakesNothingBackOutOfLine() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	back := s.updateAt(2*day, UpdateRefund, Refund{ActionID: 31, Agent: domain.CustomerAgent(42), AmountCents: totalCents, Reason: "reprise"})
	st := s.run(rentalInput(3))

	s.Require().True(back.done)
	s.requireAppError(back.rejectErr, domain.ECodeConflict)
	s.Equal(PhaseEnded, st.Status)
	s.Zero(st.RefundedCents)
}

// A run whose history fills while its order waits continues as new in
// line, and the next run is served without entering it again.
func (s *RentalWorkflowSuite) TestLineContinuesAsNew() {
	s.inLine(0)
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	s.env.RegisterDelayedCallback(func() { s.env.SetCurrentHistoryLength(DefaultMaxHistory) }, 5*time.Minute)
	// Wakes the run to look at its bound.
	s.updateAt(6*time.Minute, UpdateExtend, Extension{ActionID: 7, Agent: "alice", Days: 1, Reason: "geste"})
	s.env.ExecuteWorkflow(RentalWorkflow, rentalInput(3))

	s.True(s.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	s.Require().ErrorAs(s.env.GetWorkflowError(), &can)
	var next RentalInput
	s.Require().NoError(converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	s.Require().NotNil(next.Carry)
	s.Equal(waitMachine, next.Carry.WaitPoint)
	s.True(next.Carry.Waiting)
	s.Equal(PhaseWaitingForMachine, next.Carry.Status.Status)
}
