package workflows

import (
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// A late payment is not counted, but it is money received: support can
// refund it to the balance (never more than was received), and the order
// stays unpaid.
func (s *RentalWorkflowSuite) TestLatePaymentRefundedToBalance() {
	s.mockAllMachine()
	var refunds []activities.RefundInput
	s.env.OnActivity(a.RefundToBalance, mock.Anything, mock.Anything).Return(nil).Run(func(args mock.Arguments) {
		s.mu.Lock()
		defer s.mu.Unlock()
		refunds = append(refunds, args.Get(1).(activities.RefundInput))
	})
	late := payment("tx1", totalCents)
	late.Late = true
	s.signalAt(time.Minute, SignalPaymentConfirmed, late)
	tooMuch := s.updateAt(time.Hour, UpdateRefund, Refund{ActionID: 30, Agent: "alice", AmountCents: totalCents + 1, Reason: "trop"})
	refund := s.updateAt(2*time.Hour, UpdateRefund, Refund{ActionID: 31, Agent: "alice", AmountCents: totalCents, Reason: "paiement en retard"})
	after := s.queryAt(3 * time.Hour)
	in := rentalInput(3)
	in.Config.UnpaidTimeout = 4 * time.Hour
	st := s.run(in)

	s.requireAppError(tooMuch.rejectErr, domain.ECodeInvalid)
	s.NoError(refund.rejectErr)
	s.NoError(refund.err)
	s.Require().Len(refunds, 1)
	s.Equal(totalCents, refunds[0].AmountCents)
	s.Equal(int64(31), refunds[0].ActionID)
	s.Equal(totalCents, after.LateCents)
	s.Equal(totalCents, after.RefundedCents)
	s.Zero(after.PaidCents)
	s.Equal(domain.StatusAwaitingPayment, after.Status)
	s.Equal(domain.StatusExpired, st.Status) // never provisioned
	s.env.AssertActivityNotCalled(s.T(), "ReserveCapacity", mock.Anything, mock.Anything)
	conf := s.eventsOf(domain.EventPaymentConfirmed)
	s.Require().Len(conf, 1)
	s.Require().NotNil(conf[0].LateCents)
	s.Equal(totalCents, *conf[0].LateCents)
}

// Accepting a late payment (attribution) counts it: it is no longer late
// money, so it cannot be refunded twice.
func (s *RentalWorkflowSuite) TestAttributionTakesLateMoneyFirst() {
	s.mockAllMachine()
	late := payment("tx1", totalCents)
	late.Late = true
	s.signalAt(time.Minute, SignalPaymentConfirmed, late)
	s.updateAt(time.Hour, UpdateAttributePayment, Attribution{ActionID: 40, Agent: "alice", Reason: "accepté"})
	after := s.queryAt(2 * time.Hour)
	tooMuch := s.updateAt(3*time.Hour, UpdateRefund, Refund{ActionID: 41, Agent: "alice", AmountCents: totalCents + 1, Reason: "double"})
	st := s.run(rentalInput(3))

	s.Equal(totalCents, after.PaidCents)
	s.Zero(after.LateCents)
	s.requireAppError(tooMuch.rejectErr, domain.ECodeInvalid)
	s.Equal(domain.StatusEnded, st.Status)
}
