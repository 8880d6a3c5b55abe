package workflows

import (
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// A late payment is not counted: it goes to support's queue with its
// confirmation event, the order stays unpaid, and an order refund (of
// counted money) cannot return it: it is refunded from the queue.
func (s *RentalWorkflowSuite) TestLatePaymentQueuedNotCounted() {
	s.mockAllMachine()
	late := payment("tx1", totalCents)
	late.Late = true
	s.signalAt(time.Minute, SignalPaymentConfirmed, late)
	refund := s.updateAt(time.Hour, UpdateRefund, Refund{ActionID: 31, Agent: "alice", AmountCents: 1, Reason: "retard"})
	after := s.queryAt(2 * time.Hour)
	in := rentalInput(3)
	in.Config.UnpaidTimeout = 4 * time.Hour
	st := s.run(in)

	s.requireAppError(refund.rejectErr, domain.ECodeConflict)
	s.Zero(after.PaidCents)
	s.Equal(PhaseAwaitingPayment, after.Status)
	s.Equal(PhaseExpired, st.Status) // never provisioned
	conf := s.eventsOf(domain.EventPaymentConfirmed)
	s.Require().Len(conf, 1)
	s.Require().Len(conf[0].Exceptions, 1)
	s.Equal(domain.ExceptionLate, conf[0].Exceptions[0].Reason)
	s.Equal(totalCents, conf[0].Exceptions[0].AmountCents)
	s.Nil(conf[0].PaidCents)
}

// An attribution without a named payment is bounded by what is due and is
// not refundable: attributing 1,000,000 USD to the order is refused, and
// after attributing the total nothing can be refunded.
func (s *RentalWorkflowSuite) TestAttributionBoundedAndNotRefundable() {
	s.mockAllMachine()
	huge := s.updateAt(time.Minute, UpdateAttributePayment, Attribution{ActionID: 40, Agent: "alice", AmountCents: domain.MaxSupportCents, Reason: "erreur"})
	s.updateAt(time.Hour, UpdateAttributePayment, Attribution{ActionID: 41, Agent: "alice", Reason: "virement"})
	after := s.queryAt(2 * time.Hour)
	refund := s.updateAt(3*time.Hour, UpdateRefund, Refund{ActionID: 42, Agent: "alice", AmountCents: 1, Reason: "geste"})
	st := s.run(rentalInput(3))

	s.requireAppError(huge.rejectErr, domain.ECodeConflict)
	s.Equal(totalCents, after.PaidCents)
	s.Equal(totalCents, after.UnbackedCents)
	s.requireAppError(refund.rejectErr, domain.ECodeConflict)
	s.Equal(PhaseEnded, st.Status)
}
