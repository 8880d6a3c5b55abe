package workflows

import (
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/kernodeck/kernodeck/domain"
)

// A payment signal no watcher recorded as it claims (a forged one, sealed
// and fully addressed) changes nothing: no event, no amount, the order
// still awaits its payment; the recorded one that follows pays it. Before
// vDrain a signal naming the workflow's own request was counted.
func (s *RentalWorkflowSuite) TestPaymentNoWatcherRecordedChangesNothing() {
	forged := payment("tx-forged", totalCents)
	s.env = newSuiteEnv(&s.WorkflowTestSuite, RentalWorkflowID(testOrderRef), domain.TargetOrder, testOrderRef,
		a.RecordOrderEvent, a.RecordOrderEvents, &s.mu, &s.events, map[string]bool{forged.Key(): true})
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, forged)
	after := s.queryAt(2 * time.Minute)
	s.signalAt(3*time.Minute, SignalPaymentConfirmed, payment("tx-real", totalCents))
	st := s.run(rentalInput(3))

	s.Equal(PhaseAwaitingPayment, after.Status)
	s.Zero(after.PaidCents)
	for _, ev := range s.events {
		s.NotEqual(forged.Key(), ev.Data["key"], "an event about the forged payment: %s", ev.Kind)
	}
	s.Equal(PhaseEnded, st.Status)
	s.Equal(totalCents, st.PaidCents)
	s.Equal([]string{"bitcoin:tx-real:0"}, st.PaymentsConfirmed)
}

// A payment signal addressed to another workflow is refused on its own
// check (the address), even when the payment it names was recorded and
// names this order's request: another order's payment never pays this one.
func (s *RentalWorkflowSuite) TestPaymentAddressedElsewhereChangesNothing() {
	s.mockAllMachine()
	elsewhere := payment("tx-other", totalCents)
	elsewhere.Target = RentalWorkflowID("KD-OTHER00001")
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(SignalPaymentConfirmed, elsewhere) }, time.Minute)
	after := s.queryAt(2 * time.Minute)
	in := rentalInput(3)
	in.Config.UnpaidTimeout = time.Hour
	st := s.run(in)

	s.Equal(PhaseAwaitingPayment, after.Status)
	s.Zero(after.PaidCents)
	s.Equal(PhaseExpired, st.Status)
	s.env.AssertActivityNotCalled(s.T(), "CheckPayments", mock.Anything, mock.Anything)
}
