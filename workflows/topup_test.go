package workflows

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

const (
	topUpCents   = int64(500_00)
	testTopUpRef = "TU-TEST000001"
)

type TopUpWorkflowSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	env *testsuite.TestWorkflowEnvironment

	mu     sync.Mutex
	events []activities.TopUpEvent
}

func TestTopUpWorkflowSuite(t *testing.T) { suite.Run(t, new(TopUpWorkflowSuite)) }

func (s *TopUpWorkflowSuite) SetupTest() {
	s.events = nil
	s.env = newSuiteEnv(&s.WorkflowTestSuite, TopUpWorkflowID(testTopUpRef), domain.TargetTopUp, testTopUpRef,
		a.RecordTopUpEvent, a.RecordTopUpEvents, &s.mu, &s.events, nil)
}

func (s *TopUpWorkflowSuite) AfterTest(_, _ string) { s.env.AssertExpectations(s.T()) }

func topUpInput() TopUpInput {
	return TopUpInput{TopUpRef: testTopUpRef, AccountID: 42, AmountCents: topUpCents, PaymentTimeout: 2 * time.Hour}
}

func (s *TopUpWorkflowSuite) mockCredit() {
	s.env.OnActivity(a.CreditTopUp, mock.Anything, mock.MatchedBy(func(in activities.CreditTopUpInput) bool {
		return in.TopUpRef == "TU-TEST000001" && in.AccountID == 42 && in.AmountCents == topUpCents
	})).Return(nil).Maybe()
}

func (s *TopUpWorkflowSuite) signalAt(d time.Duration, name string, p PaymentEvent) {
	p.Target = TopUpWorkflowID(testTopUpRef)
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(name, p) }, d)
}

func (s *TopUpWorkflowSuite) updateAt(d time.Duration, name string, args ...any) *updateOutcome {
	return updateAt(s.env, d, name, args...)
}

func (s *TopUpWorkflowSuite) queryAt(d time.Duration) *TopUpStatus {
	return queryAt[TopUpStatus](s.Require(), s.env, d)
}

func (s *TopUpWorkflowSuite) run(in TopUpInput) TopUpStatus {
	return runWorkflow[TopUpStatus](s.Require(), s.env, TopUpWorkflow, in)
}

func (s *TopUpWorkflowSuite) eventsOf(kind string) []activities.TopUpEvent {
	return ofKind(&s.mu, s.events, kind, func(ev activities.TopUpEvent) string { return ev.Kind })
}

func (s *TopUpWorkflowSuite) TestCreditedOnceWhenConfirmedTwice() {
	s.mockCredit()
	s.signalAt(time.Minute, SignalPaymentSeen, payment("tx1", topUpCents))
	seen := s.queryAt(2 * time.Minute)
	s.signalAt(3*time.Minute, SignalPaymentConfirmed, payment("tx1", topUpCents))
	s.signalAt(4*time.Minute, SignalPaymentConfirmed, payment("tx1", topUpCents))
	credited := s.queryAt(5 * time.Minute)
	// A different payment after crediting goes to support, uncredited.
	s.signalAt(time.Hour, SignalPaymentConfirmed, payment("tx2", topUpCents))
	st := s.run(topUpInput())

	s.Equal(TopUpPhasePaymentDetected, seen.Status)
	s.Equal(TopUpPhaseCredited, credited.Status)
	s.True(credited.CreditedAt.Equal(testStart.Add(3 * time.Minute)))
	s.env.AssertActivityNumberOfCalls(s.T(), "CreditTopUp", 1)
	s.Equal(TopUpPhaseCredited, st.Status)
	s.Equal(topUpCents, st.ReceivedCents)
	s.Equal([]string{"bitcoin:tx1:0"}, st.PaymentsConfirmed)
	conf := s.eventsOf(domain.EventPaymentConfirmed)
	s.Require().Len(conf, 2)
	s.Equal("confirmed:bitcoin:tx2:0", conf[1].Key)
	s.Contains(conf[1].Message, "support")
	s.Equal(true, conf[1].Data["to_support"])
}

func (s *TopUpWorkflowSuite) TestPartialThenAttribution() {
	s.mockCredit()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", 300_00))
	partial := s.queryAt(2 * time.Minute)
	attr := s.updateAt(time.Hour, UpdateAttributePayment, Attribution{ActionID: 31, Agent: "alice", Reason: "reste reçu hors chaîne"})
	st := s.run(topUpInput())

	s.Equal(int64(300_00), partial.ReceivedCents)
	s.Equal(TopUpPhaseAwaitingPayment, partial.Status)
	s.Len(s.eventsOf(domain.EventPaymentPartial), 1)
	s.Require().True(attr.done)
	s.NoError(attr.rejectErr)
	s.NoError(attr.err)
	s.Equal(TopUpPhaseCredited, st.Status)
	s.Equal(topUpCents, st.ReceivedCents)
	s.env.AssertActivityNumberOfCalls(s.T(), "CreditTopUp", 1)
	support := s.eventsOf(domain.EventSupportAction)
	s.Require().Len(support, 1)
	s.Equal("support:31:attribute_payment", support[0].Key)
	s.Equal("alice", support[0].Data["agent"])
}

func (s *TopUpWorkflowSuite) TestExpires() {
	s.mockCredit()
	st := s.run(topUpInput())

	s.Equal(TopUpPhaseExpired, st.Status)
	expired := s.eventsOf(domain.EventExpired)
	s.Require().Len(expired, 1)
	s.Equal(domain.TopUpExpired, expired[0].Status)
	s.True(expired[0].At.Equal(testStart.Add(2 * time.Hour)))
	s.env.AssertActivityNotCalled(s.T(), "CreditTopUp", mock.Anything, mock.Anything)
}

func (s *TopUpWorkflowSuite) TestCancel() {
	s.mockCredit()
	c := s.updateAt(time.Minute, UpdateCancel, CancelRequest{By: "customer"})
	st := s.run(topUpInput())

	s.Require().True(c.done)
	s.NoError(c.rejectErr)
	s.NoError(c.err)
	s.Equal(TopUpPhaseCancelled, st.Status)
	cancelled := s.eventsOf(domain.EventCancelled)
	s.Require().Len(cancelled, 1)
	s.Equal(domain.TopUpCancelled, cancelled[0].Status)
	s.env.AssertActivityNotCalled(s.T(), "CreditTopUp", mock.Anything, mock.Anything)
}

func (s *TopUpWorkflowSuite) TestCancelRejectedOncePaymentSeen() {
	s.mockCredit()
	s.signalAt(time.Minute, SignalPaymentSeen, payment("tx1", topUpCents))
	c := s.updateAt(2*time.Minute, UpdateCancel, CancelRequest{By: "customer"})
	s.signalAt(3*time.Minute, SignalPaymentConfirmed, payment("tx1", topUpCents))
	st := s.run(topUpInput())

	s.Require().True(c.done)
	var appErr *temporal.ApplicationError
	s.Require().ErrorAs(c.rejectErr, &appErr)
	s.Equal(domain.ECodeConflict, appErr.Type())
	s.Equal(TopUpPhaseCredited, st.Status)
}
