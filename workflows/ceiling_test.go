package workflows

import (
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// A run continuing as new does not carry its first start's ceiling: the
// next run's version is its worker's to cap (VersionCeiling).
func (s *RentalWorkflowSuite) TestContinuedRunDropsTheFirstStartsCeiling() {
	in := rentalInput(3)
	in.Config.MaxVersion = OldestStartVersion
	s.env.SetCurrentHistoryLength(DefaultMaxHistory) // a payment's batch continues it as new
	s.signalAt(time.Minute, SignalPaymentSeen, payment("tx1", 1000))
	s.env.ExecuteWorkflow(RentalWorkflow, in)
	s.Require().True(s.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	s.Require().ErrorAs(s.env.GetWorkflowError(), &can)
	var next RentalInput
	s.Require().NoError(converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	s.Require().NotNil(next.Carry)
	s.Equal(0, next.Config.MaxVersion)
}

// A continued run under a worker whose ceiling is the version before
// vDrain records that version: here it sends a second payment request to
// the store, where vDrain's validator would refuse it (a request still
// valid). Under no ceiling the same run refuses it.
func (s *RentalWorkflowSuite) TestContinuedRunUnderALowerCeilingRecordsTheLowerVersion() {
	for _, c := range []struct {
		ceiling int
		calls   int
	}{{int(vStartInSync), 2}, {0, 1}} {
		s.SetupTest()
		s.env.SetWorkerOptions(worker.Options{PreferredVersionProvider: VersionCeiling(c.ceiling)})
		calls := s.intentsValidAnHour()
		s.intentAt(time.Minute, IntentRequest{Asset: "BTC", Network: "bitcoin"})
		s.intentAt(2*time.Minute, IntentRequest{Asset: "BTC", Network: "bitcoin"})
		in := rentalInput(3)
		in.Config.UnpaidTimeout = time.Hour
		in.Carry = &RentalState{runCarry: runCarry{WaitPoint: waitPayment, Runs: 1},
			Status:     RentalStatus{OrderRef: testOrderRef, Status: PhaseAwaitingPayment},
			PayUntil:   testStart.Add(time.Hour),
			payeeState: payeeState{Payments: newPaymentLedger(), Actions: map[int64]bool{}},
			Reminded:   map[string]bool{}}
		s.run(in)
		s.Equal(c.calls, *calls, "ceiling %d", c.ceiling)
	}
}
