package workflows

import (
	"context"
	"errors"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/kernodeck/kernodeck/domain"
)

// A host that refuses the revocation for three hours after the end: the
// teardown is reported stuck once (an event on the order, a metric), goes
// on retrying at a long interval, and ends the rental once the host
// answers. Before vDrain it retried every two minutes, unseen.
func (s *RentalWorkflowSuite) TestTeardownStuckIsReportedAndGoesOn() {
	end := testStart.Add(time.Minute + 3*day)
	back := end.Add(3 * time.Hour)
	var attempts int
	s.env.OnActivity(a.RevokeAccess, mock.Anything, mock.Anything).Return(func(context.Context, string) error {
		attempts++
		if s.env.Now().Before(back) {
			return errors.New("ssh: connect to host gpu-1: no route to host")
		}
		return nil
	})
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	during := s.queryAt(end.Sub(testStart) + time.Hour)
	st := s.run(rentalInput(3))

	s.Equal(PhaseEnding, during.Status, "ending while the host refuses")
	stuck := s.eventsOf(domain.EventTeardownStuck)
	s.Require().Len(stuck, 1, "reported once")
	s.Equal("RevokeAccess", stuck[0].Data["step"])
	s.True(stuck[0].At.Before(end.Add(15*time.Minute)), "reported within minutes: %v", stuck[0].At)
	s.Equal(PhaseEnded, st.Status)
	s.False(st.EndedAt.Before(end))
	s.Len(s.eventsOf(domain.EventEnded), 1)
	s.LessOrEqual(attempts, teardownStuckAfter+3*60/30+1, "a long interval once reported")
}

// A rental whose workflow is cancelled during its period still revokes the
// access and releases the machine (before vDrain the cancellation skipped
// the teardown: the customer kept a reachable machine).
func (s *RentalWorkflowSuite) TestCancelledDuringThePeriodStillTearsDown() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	s.env.RegisterDelayedCallback(s.env.CancelWorkflow, day)
	s.env.ExecuteWorkflow(RentalWorkflow, rentalInput(3))

	s.Require().True(s.env.IsWorkflowCompleted())
	var canceled *temporal.CanceledError
	s.Require().ErrorAs(s.env.GetWorkflowError(), &canceled)
	s.env.AssertActivityNumberOfCalls(s.T(), "RevokeAccess", 1)
	s.env.AssertActivityNumberOfCalls(s.T(), "ReleaseCapacity", 1)
	s.Len(s.eventsOf(domain.EventAccessRevoked), 1)
	ended := s.eventsOf(domain.EventEnded)
	s.Require().Len(ended, 1)
	s.Equal(domain.StatusEnded, ended[0].Status)
}

// In provisioning_failed a cancellation and a closing refund release the
// machine inside their handler: a host that does not answer makes them
// fail with a "try again" after a few attempts, the run's lock released
// and nothing changed; the same action sent again once the host answers
// goes through. Before vDrain the handler retried for ever, holding every
// payment and update behind it.
func (s *RentalWorkflowSuite) TestHandlerReleaseFailsWithTryAgain() {
	var releases int
	s.env.OnActivity(a.ReleaseCapacity, mock.Anything, mock.Anything).Return(func(context.Context, string) error {
		releases++
		if s.env.Now().Before(testStart.Add(3 * time.Hour)) {
			return errors.New("ssh: connect to host gpu-1: no route to host")
		}
		return nil
	})
	s.machine.always["reserve"] = errors.New("no machine")
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	first := s.updateAt(time.Hour, UpdateRefund, Refund{ActionID: 12, Agent: "alice", AmountCents: totalCents, Reason: "pas de machine"})
	mid := s.queryAt(2 * time.Hour)
	again := s.updateAt(4*time.Hour, UpdateRefund, Refund{ActionID: 12, Agent: "alice", AmountCents: totalCents, Reason: "pas de machine"})
	st := s.run(rentalInput(3))

	s.Require().True(first.done)
	s.requireAppError(first.err, domain.ECodeUnavailable)
	s.Equal(PhaseProvisioningFailed, mid.Status)
	s.Zero(mid.RefundedCents)
	s.Equal(handlerAttempts+1, releases, "three attempts, then one that works")
	s.Require().True(again.done)
	s.NoError(again.err)
	s.Equal(PhaseRefunded, st.Status)
	s.Equal(totalCents, st.RefundedCents)
	s.Len(s.eventsOf(domain.EventRefunded), 1)
}
