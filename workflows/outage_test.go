package workflows

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// outageBound is the most history a run awaiting payment may write while
// PostgreSQL refuses its timeline writes (vDrain): the local activity's
// attempts (each a marker, and a timer past the workflow task's timeout)
// for localRetryBound, then one activity, whose retries the server keeps
// out of the history. Before vDrain: about 2 events a minute (1 min
// backoff), 2,900 a day.
const outageBound = 40

// outage runs a rental awaiting payment whose timeline writes PostgreSQL
// refuses for d from its start; a payment is seen at +1 min. It returns
// the local activity attempts and timers (history), and the activity
// attempts (kept out of it).
func (s *RentalWorkflowSuite) outage(d time.Duration) (history, activityAttempts int, st *RentalStatus) {
	back := testStart.Add(d)
	var local, timers int
	// An environment of its own: the suite's answers every write at once.
	s.env = s.NewTestWorkflowEnvironment()
	s.env.SetStartTime(testStart)
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: RentalWorkflowID(testOrderRef)})
	mockOwnRequests(s.env, domain.TargetOrder, testOrderRef, nil)
	s.env.SetOnLocalActivityStartedListener(func(*activity.Info, context.Context, []any) { local++ })
	s.env.SetOnTimerScheduledListener(func(string, time.Duration) { timers++ })
	s.env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { activityAttempts++ })
	s.env.OnActivity(a.RecordOrderEvents, mock.Anything, mock.Anything).Return(
		func(_ context.Context, evs []activities.OrderEvent) error {
			if s.env.Now().Before(back) {
				return errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			// Once per (order, key), as the store applies them: a local
			// attempt that outlived its deadline under load and the
			// activity it handed over to may both come back.
			for _, ev := range evs {
				if !slices.ContainsFunc(s.events, func(e activities.OrderEvent) bool {
					return e.OrderRef == ev.OrderRef && e.Key == ev.Key
				}) {
					s.events = append(s.events, ev)
				}
			}
			return nil
		})
	s.env.OnActivity(a.RecordOrderEvent, mock.Anything, mock.Anything).Return(nil).Maybe()
	s.signalAt(time.Minute, SignalPaymentSeen, payment("tx1", 1000))
	st = s.queryAt(d + time.Hour)
	in := rentalInput(3)
	in.Config.UnpaidTimeout = 48 * time.Hour
	s.env.ExecuteWorkflow(RentalWorkflow, in)
	s.Require().True(s.env.IsWorkflowCompleted())
	return local + timers, activityAttempts, st
}

// A database outage of a simulated day grows a run's history by a
// bounded amount: its timeline write retries as a local activity for ten
// minutes, then hands over to an activity. (The SDK's test environment
// stops an activity's retries at 10 attempts; the server does not.)
func (s *RentalWorkflowSuite) TestDatabaseOutageOfADayGrowsHistoryBoundedly() {
	history, attempts, st := s.outage(24 * time.Hour)
	s.T().Logf("outage of a day: %d markers and timers, %d activity attempts", history, attempts)
	s.LessOrEqual(history, outageBound, "markers and timers the outage wrote")
	s.Positive(attempts, "the write handed over to an activity")
	s.Equal([]string{"bitcoin:tx1:0"}, st.PaymentsSeen)
}

// After an outage longer than the local activity's retries, the write
// handed over to an activity is made once the database is back.
func (s *RentalWorkflowSuite) TestWriteHandedOverIsMadeWhenTheDatabaseIsBack() {
	_, attempts, _ := s.outage(13 * time.Minute)
	s.Positive(attempts, "the write handed over to an activity")
	s.Len(s.eventsOf(domain.EventPaymentSeen), 1, "written once the database is back")
}

// A balance debit that PostgreSQL refuses for longer than handlerPatience
// (vHandOver): the update answers in_progress and its work goes on in the
// run, holding its lock; another update is refused by its validator
// meanwhile (no caller waits behind it), the unpaid window's end waits for
// it, and once the database is back the debit is made once and the order
// is paid and runs. (The outage lasts 3 minutes: the SDK's test
// environment stops an activity's retries at 10 attempts, about 4
// minutes; the server does not.)
func (s *RentalWorkflowSuite) TestDebitOutlastingItsCallerGoesOnInTheRun() {
	back := testStart.Add(4 * time.Minute)
	var debits int
	s.mockAllMachine()
	s.env.OnActivity(a.PayOrderFromBalance, mock.Anything, mock.Anything).Return(func(context.Context, activities.PayFromBalanceInput) error {
		debits++
		if s.env.Now().Before(back) {
			return errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
		}
		return nil
	})
	pay := s.updateAt(time.Minute, UpdatePayFromBalance)
	cancel := s.updateAt(2*time.Minute, UpdateCancel, CancelRequest{By: "customer"})
	during := s.queryAt(3 * time.Minute)
	in := rentalInput(3)
	in.Config.UnpaidTimeout = 2 * time.Minute // ends while the debit is pending
	st := s.run(in)

	s.Require().True(pay.done)
	s.requireAppError(pay.err, domain.ECodeInProgress)
	s.Require().True(cancel.done)
	s.requireAppError(cancel.rejectErr, domain.ECodeUnavailable)
	s.Equal(PhaseAwaitingPayment, during.Status, "the debit still pending")
	s.Greater(debits, 1, "retried while the database was away")
	s.Equal(methodBalance, st.PaymentMethod)
	s.Equal(totalCents, st.PaidCents)
	s.Equal(PhaseEnded, st.Status, "paid, provisioned and run once the debit went through")
	s.Empty(s.eventsOf(domain.EventExpired))
}

// Before vHandOver the same update waited for its debit, however long.
func (s *RentalWorkflowSuite) TestDebitWaitedForItsCallerBeforeHandOver() {
	back := testStart.Add(4 * time.Minute)
	s.mockAllMachine()
	s.env.OnActivity(a.PayOrderFromBalance, mock.Anything, mock.Anything).Return(func(context.Context, activities.PayFromBalanceInput) error {
		if s.env.Now().Before(back) {
			return errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
		}
		return nil
	})
	pay := s.updateAt(time.Minute, UpdatePayFromBalance)
	in := rentalInput(3)
	in.Config.MaxVersion = int(vQueue)
	st := s.run(in)

	s.Require().True(pay.done)
	s.NoError(pay.err, "answered once the debit went through")
	s.Equal(PhaseEnded, st.Status)
}
