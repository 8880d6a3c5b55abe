package workflows

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// a is only used for its method values: activities are mocked by method.
var a *activities.Activities

var testStart = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

const (
	day        = 24 * time.Hour
	totalCents = int64(4714) // 2 lots of RTX A5000 for 3 days
)

type RentalWorkflowSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	env *testsuite.TestWorkflowEnvironment

	mu       sync.Mutex // mocks run on activity goroutines
	events   []activities.OrderEvent
	revokeAt time.Time
	machine  *machine
}

func TestRentalWorkflowSuite(t *testing.T) { suite.Run(t, new(RentalWorkflowSuite)) }

func (s *RentalWorkflowSuite) SetupTest() {
	s.events, s.revokeAt = nil, time.Time{}
	s.machine = &machine{fail: map[string][]error{}, always: map[string]error{}, calls: map[string]int{}}
	s.env = newSuiteEnv(&s.WorkflowTestSuite, RentalWorkflowID(testOrderRef), domain.TargetOrder, testOrderRef,
		a.RecordOrderEvent, a.RecordOrderEvents, &s.mu, &s.events, nil)
}

func (s *RentalWorkflowSuite) AfterTest(_, _ string) { s.env.AssertExpectations(s.T()) }

const (
	testOrderRef = "KD-TEST000001"
	testAddress  = "bcrt1qtestaddress"
)

// mockOwnRequests answers the workflow's reading of a payment request it
// did not make itself: every request the tests' payments name belongs to
// the target, with the tests' address, asset and network.
func mockOwnRequests(env *testsuite.TestWorkflowEnvironment, kind, ref string, unrecorded map[string]bool) {
	env.OnActivity(a.PaymentRequest, mock.Anything, mock.Anything).Return(
		func(_ context.Context, id string) (domain.Intent, error) {
			return domain.Intent{ID: id, TargetKind: kind, TargetRef: ref, Address: testAddress, Asset: "BTC", Network: "bitcoin"}, nil
		}).Maybe()
	env.OnActivity(a.CheckPayments, mock.Anything, mock.Anything).Return(recordedAs(kind, ref, unrecorded)).Maybe()
}

// recordedAs answers CheckPayments as the watchers would have recorded
// every payment claimed, but those of unrecorded (by payment key), each
// naming a request of the target with the tests' address, asset and
// network.
func recordedAs(kind, ref string, unrecorded map[string]bool) func(context.Context, []domain.PaymentClaim) ([]domain.PaymentCheck, error) {
	return func(_ context.Context, claims []domain.PaymentClaim) ([]domain.PaymentCheck, error) {
		out := make([]domain.PaymentCheck, len(claims))
		for i, c := range claims {
			it := domain.Intent{ID: c.IntentID, TargetKind: kind, TargetRef: ref, Address: testAddress, Asset: "BTC", Network: "bitcoin"}
			key := domain.PaymentKey(c.Network, c.TxID, c.Index)
			out[i] = domain.PaymentCheck{Recorded: !unrecorded[key], Request: &it}
		}
		return out, nil
	}
}

func rentalInput(days int) RentalInput {
	return RentalInput{
		OrderRef: testOrderRef, AccountID: 42, GPUModel: "rtx-a5000",
		Lots: 2, GPUsPerLot: 1, TotalGPUs: 2, DurationDays: days, Preset: "pytorch",
		TotalCents: totalCents,
		Config:     RentalConfig{ProvisioningAttempts: 2},
	}
}

func payment(tx string, cents int64) PaymentEvent {
	return PaymentEvent{Network: "bitcoin", Asset: "BTC", TxID: tx, Index: 0, AmountBase: "70000", AmountCents: cents,
		IntentID: "pi-1", Address: testAddress}
}

// machine is the suite's machine driver under the real Provision
// activity: every step succeeds but for the errors queued for it, and
// counts its calls.
type machine struct {
	mu     sync.Mutex
	fail   map[string][]error // errors of a step's next calls
	always map[string]error   // a step that fails every time
	calls  map[string]int
	takes  map[string]time.Duration // how long a step takes on the machine's clock
	clock  time.Time                // the activities' clock (Activities.Now)
}

// now is the machine's clock, which only its steps move.
func (m *machine) now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.clock
}

func (m *machine) step(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[name]++
	m.clock = m.clock.Add(m.takes[name])
	if err := m.always[name]; err != nil {
		return err
	}
	if errs := m.fail[name]; len(errs) > 0 {
		m.fail[name] = errs[1:]
		return errs[0]
	}
	return nil
}

// called is how many times step ran.
func (m *machine) called(step string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[step]
}

func (m *machine) Reserve(context.Context, activities.ReserveInput) error {
	return m.step(activities.StepReserve)
}
func (m *machine) Prepare(context.Context, activities.PrepareInput) error {
	return m.step(activities.StepPrepare)
}
func (m *machine) Verify(context.Context, activities.VerifyInput) (activities.Verification, error) {
	return activities.Verification{GPUModel: "NVIDIA RTX A5000", GPUCount: 2, DriverVersion: "550.54", CUDAVersion: "12.4"},
		m.step(activities.StepVerify)
}
func (m *machine) CreateAccess(context.Context, activities.CreateAccessInput) (activities.AccessSummary, error) {
	return activities.AccessSummary{Host: "gpu-7.kernodeck.net", Port: 22, Username: "kd-test"}, m.step(activities.StepAccess)
}

// The teardown's two steps are activities of their own, mocked by method.
func (m *machine) RevokeAccess(context.Context, string) error { panic("RevokeAccess is mocked") }
func (m *machine) Release(context.Context, string) error      { panic("ReleaseCapacity is mocked") }

// eventKeeper is the store under the real Provision activity: it keeps the
// step events it writes with the workflow's (the only call Provision makes).
type eventKeeper struct {
	activities.Store
	keep func(...activities.OrderEvent)
}

func (k eventKeeper) RecordOrderEventsTogether(_ context.Context, evs ...activities.OrderEvent) error {
	k.keep(evs...)
	return nil
}

// mockAllMachine runs the real Provision activity on the suite's machine
// and mocks the teardown's steps.
func (s *RentalWorkflowSuite) mockAllMachine() {
	acts := &activities.Activities{Provisioner: s.machine, Now: s.machine.now, Store: eventKeeper{keep: func(evs ...activities.OrderEvent) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.events = append(s.events, evs...)
	}}}
	s.env.OnActivity(a.Provision, mock.Anything, mock.Anything).Return(acts.Provision).Maybe()
	// A machine is free for every paid order but those of queue_test.go.
	s.env.OnActivity(a.TakeMachine, mock.Anything, mock.Anything).Return(true, nil).Maybe()
	s.env.OnActivity(a.RevokeAccess, mock.Anything, mock.Anything).Return(nil).Maybe().
		Run(func(mock.Arguments) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.revokeAt = s.env.Now()
		})
	s.env.OnActivity(a.ReleaseCapacity, mock.Anything, mock.Anything).Return(nil).Maybe()
}

func (s *RentalWorkflowSuite) signalAt(d time.Duration, name string, p PaymentEvent) {
	s.env.RegisterDelayedCallback(s.send(name, p), d)
}

func (s *RentalWorkflowSuite) updateAt(d time.Duration, name string, args ...any) *updateOutcome {
	return updateAt(s.env, d, name, args...)
}

func (s *RentalWorkflowSuite) queryAt(d time.Duration) *RentalStatus {
	return queryAt[RentalStatus](s.Require(), s.env, d)
}

func (s *RentalWorkflowSuite) run(in RentalInput) RentalStatus {
	return runWorkflow[RentalStatus](s.Require(), s.env, RentalWorkflow, in)
}

func (s *RentalWorkflowSuite) eventsOf(kind string) []activities.OrderEvent {
	return ofKind(&s.mu, s.events, kind, func(ev activities.OrderEvent) string { return ev.Kind })
}

func (s *RentalWorkflowSuite) requireAppError(err error, code string) {
	var appErr *temporal.ApplicationError
	s.Require().True(errors.As(err, &appErr), "want an ApplicationError, got %v", err)
	s.Equal(code, appErr.Type())
	// The refusal is the domain error itself, not an activity failure around it.
	var actErr *temporal.ActivityError
	s.False(errors.As(err, &actErr), "refusal wraps an activity error: %v", err)
}

// paidAndEnded runs a rental paid at +1m and checks it ended exactly days
// after the access became available.
func (s *RentalWorkflowSuite) paidAndEnded(days int) {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	st := s.run(rentalInput(days))

	s.Equal(PhaseEnded, st.Status)
	s.Equal(testStart.Add(time.Minute), st.PeriodStart)
	want := st.PeriodStart.Add(time.Duration(days) * day)
	s.True(st.PeriodEnd.Equal(want), "period end %v, want %v", st.PeriodEnd, want)
	s.True(st.EndedAt.Equal(want), "ended at %v, want %v", st.EndedAt, want)
	s.True(s.revokeAt.Equal(want), "access revoked at %v, want %v", s.revokeAt, want)
	ended := s.eventsOf(domain.EventEnded)
	s.Require().Len(ended, 1)
	s.True(ended[0].EndedAt.Equal(want))
	s.True(ended[0].At.Equal(want))
	s.env.AssertActivityNumberOfCalls(s.T(), "ReleaseCapacity", 1)
}

func (s *RentalWorkflowSuite) TestThreeDayPeriodEndsExactly()  { s.paidAndEnded(3) }
func (s *RentalWorkflowSuite) TestSevenDayPeriodEndsExactly()  { s.paidAndEnded(7) }
func (s *RentalWorkflowSuite) TestThirtyDayPeriodEndsExactly() { s.paidAndEnded(30) }

func (s *RentalWorkflowSuite) TestPaidThenProvisionedInOrder() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentSeen, payment("tx1", totalCents))
	seen := s.queryAt(2 * time.Minute)
	s.signalAt(3*time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	st := s.run(rentalInput(3))

	s.Equal(PhasePaymentDetected, seen.Status)
	s.Equal([]string{"bitcoin:tx1:0"}, seen.PaymentsSeen)
	s.Equal(methodCrypto, st.PaymentMethod)
	s.Empty(st.PaymentsSeen)
	paid := s.eventsOf(domain.EventPaid)
	s.Require().Len(paid, 1)
	s.Equal(domain.StatusPaid, paid[0].Status)
	s.Equal(totalCents, *paid[0].PaidCents)
	s.Equal(methodCrypto, paid[0].PaymentMethod)

	var keys []string
	for _, ev := range s.eventsOf(domain.EventProvisioningStep) {
		keys = append(keys, ev.Key)
	}
	s.Equal([]string{
		"prov:1:reserve:start", "prov:1:reserve:done", "prov:1:prepare:start", "prov:1:prepare:done",
		"prov:1:verify:start", "prov:1:verify:done", "prov:1:access:start", "prov:1:access:done",
	}, keys)
	access := s.eventsOf(domain.EventAccessAvailable)
	s.Require().Len(access, 1)
	s.Equal("gpu-7.kernodeck.net", access[0].Data["host"])
	s.NotContains(access[0].Data, "password")
}

func (s *RentalWorkflowSuite) reminderTimes() []time.Time {
	var at []time.Time
	for _, ev := range s.eventsOf(domain.EventReminderSent) {
		at = append(at, ev.At)
	}
	return at
}

func (s *RentalWorkflowSuite) TestDefaultRemindersAt48hAnd6h() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	st := s.run(rentalInput(7))

	end := st.PeriodEnd
	want := []time.Time{end.Add(-48 * time.Hour), end.Add(-6 * time.Hour)}
	s.Equal(want, s.reminderTimes())
	s.Equal(want, st.RemindersSent)
	rem := s.eventsOf(domain.EventReminderSent)
	s.Equal("reminder:"+strconv.FormatInt(end.Unix(), 10)+":48h0m0s", rem[0].Key)
	s.Contains(rem[0].Message, "exportez vos résultats et checkpoints")
	s.Contains(rem[0].Message, "vérifiez votre copie")
	s.Contains(rem[0].Message, frDate(end))
}

func (s *RentalWorkflowSuite) TestCustomReminderOffsets() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	in := rentalInput(3)
	// 100h is before the start of a 3-day period: skipped.
	in.Config.ReminderOffsets = []time.Duration{24 * time.Hour, 100 * time.Hour, 30 * time.Minute}
	st := s.run(in)

	end := st.PeriodEnd
	s.Equal([]time.Time{end.Add(-24 * time.Hour), end.Add(-30 * time.Minute)}, s.reminderTimes())
}

func (s *RentalWorkflowSuite) TestNoReminderWhenOffsetsEmpty() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	in := rentalInput(3)
	in.Config.ReminderOffsets = []time.Duration{}
	st := s.run(in)

	s.Empty(s.reminderTimes())
	s.Equal(PhaseEnded, st.Status)
}

func (s *RentalWorkflowSuite) TestExtensionMovesEndAndRearmsReminders() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	// At +2d the 48h reminder of the old end (start+1d) has gone out.
	ext := s.updateAt(2*day, UpdateExtend, Extension{ActionID: 7, Agent: "alice", Days: 2, Reason: "incident"})
	st := s.run(rentalInput(3))

	s.Require().True(ext.done)
	s.NoError(ext.rejectErr)
	s.NoError(ext.err)
	start := testStart.Add(time.Minute)
	newEnd := start.Add(5 * day)
	s.True(st.PeriodEnd.Equal(newEnd))
	s.True(st.EndedAt.Equal(newEnd), "ended at %v, want %v", st.EndedAt, newEnd)
	s.True(s.revokeAt.Equal(newEnd))
	s.Equal([]time.Time{
		start.Add(3 * day).Add(-48 * time.Hour), // old end, sent before the extension
		newEnd.Add(-48 * time.Hour),
		newEnd.Add(-6 * time.Hour),
	}, s.reminderTimes())
	extended := s.eventsOf(domain.EventExtended)
	s.Require().Len(extended, 1)
	s.True(extended[0].PeriodEnd.Equal(newEnd))
	support := s.eventsOf(domain.EventSupportAction)
	s.Require().Len(support, 1)
	s.Equal("support:7:extend", support[0].Key)
	s.Equal("alice", support[0].Data["agent"])
	s.Equal("incident", support[0].Data["reason"])
}

func (s *RentalWorkflowSuite) TestExtensionBringsReminderBeforeOldEnd() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	// Extended by 1 day at +36h: the new 48h reminder (start+2d) comes before
	// the old end, so the timers must be re-armed at once.
	s.updateAt(36*time.Hour, UpdateExtend, Extension{ActionID: 8, Agent: "alice", Days: 1, Reason: "incident"})
	st := s.run(rentalInput(3))

	start := testStart.Add(time.Minute)
	newEnd := start.Add(4 * day)
	s.True(st.EndedAt.Equal(newEnd), "ended at %v, want %v", st.EndedAt, newEnd)
	s.Equal([]time.Time{
		start.Add(day), // 48h before the old end
		newEnd.Add(-48 * time.Hour),
		newEnd.Add(-6 * time.Hour),
	}, s.reminderTimes())
}

func (s *RentalWorkflowSuite) TestExtensionOutOfRangeRejected() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	ext := s.updateAt(time.Hour, UpdateExtend, Extension{ActionID: 7, Agent: "alice", Days: 91})
	st := s.run(rentalInput(3))

	s.Require().True(ext.done)
	s.requireAppError(ext.rejectErr, domain.ECodeInvalid)
	s.True(st.EndedAt.Equal(st.PeriodStart.Add(3 * day)))
}

func (s *RentalWorkflowSuite) TestEndEarly() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	early := s.updateAt(day, UpdateEndEarly, SupportAction{ActionID: 9, Agent: "bob", Reason: "abuse"})
	st := s.run(rentalInput(7))

	s.Require().True(early.done)
	s.NoError(early.err)
	s.Equal(PhaseEnded, st.Status)
	s.True(st.EndedAt.Equal(testStart.Add(day)), "ended at %v", st.EndedAt)
	s.True(s.revokeAt.Equal(testStart.Add(day)))
	s.env.AssertActivityNumberOfCalls(s.T(), "RevokeAccess", 1)
	s.env.AssertActivityNumberOfCalls(s.T(), "ReleaseCapacity", 1)
	s.Len(s.eventsOf(domain.EventEndRequested), 1)
	s.Len(s.eventsOf(domain.EventAccessRevoked), 1)
}

func (s *RentalWorkflowSuite) TestCancelBeforePayment() {
	s.mockAllMachine()
	c := s.updateAt(time.Hour, UpdateCancel, CancelRequest{By: "customer"})
	st := s.run(rentalInput(3))

	s.Require().True(c.done)
	s.NoError(c.err)
	s.Equal(PhaseCancelled, st.Status)
	s.Zero(s.machine.called(activities.StepReserve))
	s.Zero(s.machine.called(activities.StepPrepare))
	cancelled := s.eventsOf(domain.EventCancelled)
	s.Require().Len(cancelled, 1)
	s.Equal(domain.StatusCancelled, cancelled[0].Status)
	s.Empty(s.eventsOf(domain.EventSupportAction))
}

func (s *RentalWorkflowSuite) TestCancelAfterPaymentRejected() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	c := s.updateAt(time.Hour, UpdateCancel, CancelRequest{By: "customer"})
	st := s.run(rentalInput(3))

	s.Require().True(c.done)
	s.requireAppError(c.rejectErr, domain.ECodeConflict)
	s.Equal(PhaseEnded, st.Status)
}

func (s *RentalWorkflowSuite) TestConfirmationTwiceProvisionsOnce() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	s.signalAt(2*time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	s.signalAt(time.Hour, SignalPaymentConfirmed, payment("tx1", totalCents))
	st := s.run(rentalInput(3))

	s.Equal(1, s.machine.called(activities.StepReserve))
	s.Equal(totalCents, st.PaidCents)
	s.Equal([]string{"bitcoin:tx1:0"}, st.PaymentsConfirmed)
	s.Len(s.eventsOf(domain.EventPaymentConfirmed), 1)
	s.Len(s.eventsOf(domain.EventPaid), 1)
}

func (s *RentalWorkflowSuite) TestProvisioningFailureThenSupportRetry() {
	// Both attempts of the first run fail, the support retry succeeds.
	unreachable := errors.New("driver unreachable")
	s.machine.fail[activities.StepReserve] = []error{unreachable, unreachable}
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	failed := s.queryAt(time.Hour)
	retry := s.updateAt(2*time.Hour, UpdateRetryProvisioning, SupportAction{ActionID: 11, Agent: "alice", Reason: "driver back"})
	active := s.queryAt(3 * time.Hour)
	st := s.run(rentalInput(3))

	s.Equal(PhaseProvisioningFailed, failed.Status)
	s.Contains(failed.ProvisioningError, "driver unreachable")
	s.Require().True(retry.done)
	s.NoError(retry.rejectErr)
	s.NoError(retry.err)
	s.Equal(PhaseActive, active.Status)
	s.Empty(active.ProvisioningError)
	s.True(active.PeriodStart.Equal(testStart.Add(2 * time.Hour)))
	s.Equal(PhaseEnded, st.Status)

	pf := s.eventsOf(domain.EventProvisioningFailed)
	s.Require().Len(pf, 1)
	s.Equal(domain.StatusProvisioningFailed, pf[0].Status)
	s.Equal("reserve", pf[0].Data["step"])
	s.Contains(pf[0].Data["error"], "driver unreachable")
	s.Len(s.eventsOf(domain.EventProvisioningRetry), 1)
	s.Equal(3, s.machine.called(activities.StepReserve))
	s.Len(s.eventsOf(domain.EventAccessAvailable), 1)
	// The retry's step events are new ones.
	var keys []string
	for _, ev := range s.eventsOf(domain.EventProvisioningStep) {
		keys = append(keys, ev.Key)
	}
	s.Contains(keys, "prov:1:reserve:start")
	s.Contains(keys, "prov:2:reserve:start")
	s.Contains(keys, "prov:2:access:done")
}

// A step that fails once is retried from where the attempt stopped (the
// heartbeat's progress): the steps before it are not run again, and every
// step event is written (the store keeps one per key).
func (s *RentalWorkflowSuite) TestProvisioningRetryResumesAtTheFailedStep() {
	s.machine.fail[activities.StepPrepare] = []error{errors.New("apt mirror down")}
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	st := s.run(rentalInput(3))

	s.Equal(PhaseEnded, st.Status)
	s.Equal(1, s.machine.called(activities.StepReserve))
	s.Equal(2, s.machine.called(activities.StepPrepare))
	s.Equal(1, s.machine.called(activities.StepAccess))
	keys := map[string]int{}
	for _, ev := range s.eventsOf(domain.EventProvisioningStep) {
		keys[ev.Key]++
	}
	for _, step := range activities.ProvisioningSteps {
		for _, edge := range []string{"start", "done"} {
			s.Positive(keys[domain.KeyProvisioning(1, step)+":"+edge], step+":"+edge)
		}
	}
	s.Empty(s.eventsOf(domain.EventProvisioningFailed))
}

// Provision heartbeats a step's end at once only when the step took a
// beat's interval or more: an order whose steps are quick costs the
// Temporal server no heartbeat (a busy block pays thousands at once); a
// slow step's end is recorded, so a worker lost next does not redo it.
func (s *RentalWorkflowSuite) TestProvisionHeartbeatsOnlyAfterASlowStep() {
	var beats []int // each heartbeat's steps done
	s.env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var p struct{ Done int }
		s.Require().NoError(details.Get(&p))
		beats = append(beats, p.Done)
	})
	s.machine.takes = map[string]time.Duration{activities.StepPrepare: 3 * time.Minute}
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	st := s.run(rentalInput(3))

	s.Equal(PhaseEnded, st.Status)
	s.Equal([]int{2}, beats, "one heartbeat, after prepare (the second step)")
}

// A refusal at a later step is not retried and names that step to support.
func (s *RentalWorkflowSuite) TestProvisioningRefusalNamesItsStep() {
	s.machine.always[activities.StepVerify] = &domain.Error{Code: activities.ErrTypeVerifyMismatch, Message: "1 GPU vu, 2 attendus"}
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	failed := s.queryAt(time.Hour)
	s.updateAt(2*time.Hour, UpdateRefund, Refund{ActionID: 12, Agent: "alice", AmountCents: totalCents, Reason: "GPU manquant"})
	st := s.run(rentalInput(3))

	s.Equal(PhaseProvisioningFailed, failed.Status)
	s.Equal(PhaseRefunded, st.Status)
	s.Equal("1 GPU vu, 2 attendus", failed.ProvisioningError)
	s.Equal(1, s.machine.called(activities.StepVerify))
	s.Zero(s.machine.called(activities.StepAccess))
	pf := s.eventsOf(domain.EventProvisioningFailed)
	s.Require().Len(pf, 1)
	s.Equal(activities.StepVerify, pf[0].Data["step"])
	s.Contains(pf[0].Message, "vérification de la machine")
}

func (s *RentalWorkflowSuite) TestRetryRejectedUnlessFailed() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	retry := s.updateAt(time.Hour, UpdateRetryProvisioning, SupportAction{ActionID: 11, Agent: "alice"})
	s.run(rentalInput(3))

	s.Require().True(retry.done)
	s.requireAppError(retry.rejectErr, domain.ECodeConflict)
}

// A refund of everything refundable in provisioning_failed closes the
// order in one transition: the "refund:<action>" event carries the posting
// and the status (they used to be two writes under one key, and the status
// was lost).
func (s *RentalWorkflowSuite) TestRefundAfterProvisioningFailure() {
	s.machine.always[activities.StepReserve] = errors.New("no machine")
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	ref := s.updateAt(time.Hour, UpdateRefund, Refund{ActionID: 12, Agent: "alice", AmountCents: totalCents, Reason: "no capacity"})
	st := s.run(rentalInput(3))

	s.Require().True(ref.done)
	s.NoError(ref.rejectErr)
	s.NoError(ref.err)
	s.Equal(PhaseRefunded, st.Status)
	s.Equal(totalCents, st.RefundedCents)
	s.env.AssertActivityNotCalled(s.T(), "RefundToBalance", mock.Anything, mock.Anything)
	s.env.AssertActivityNumberOfCalls(s.T(), "ReleaseCapacity", 1)
	s.Zero(s.machine.called(activities.StepAccess))
	refunded := s.eventsOf(domain.EventRefunded)
	s.Require().Len(refunded, 1)
	s.Equal("refund:12", refunded[0].Key)
	s.Equal(domain.StatusRefunded, refunded[0].Status)
	s.Require().NotNil(refunded[0].Posting)
	s.Equal(domain.Posting{Kind: domain.PostingRefund, AccountID: 42, Cents: totalCents, Memo: "no capacity"}, *refunded[0].Posting)
	s.Equal(totalCents, *refunded[0].RefundedCents)
	support := s.eventsOf(domain.EventSupportAction)
	s.Require().Len(support, 1)
	s.Equal("support:12:refund", support[0].Key)
}

// A 1-cent refund in provisioning_failed does not close the order: the rest
// stays refundable, and refunding it closes the order.
func (s *RentalWorkflowSuite) TestOneCentRefundLeavesTheRest() {
	s.machine.always[activities.StepReserve] = errors.New("no machine")
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	cent := s.updateAt(time.Hour, UpdateRefund, Refund{ActionID: 12, Agent: "alice", AmountCents: 1, Reason: "test"})
	mid := s.queryAt(2 * time.Hour)
	rest := s.updateAt(3*time.Hour, UpdateRefund, Refund{ActionID: 13, Agent: "alice", AmountCents: totalCents - 1, Reason: "reste"})
	st := s.run(rentalInput(3))

	s.NoError(cent.err)
	s.Equal(PhaseProvisioningFailed, mid.Status)
	s.Equal(int64(1), mid.RefundedCents)
	s.NoError(rest.rejectErr)
	s.NoError(rest.err)
	s.Equal(PhaseRefunded, st.Status)
	s.Equal(totalCents, st.RefundedCents)
}

func (s *RentalWorkflowSuite) TestPartialRefundWhileActiveKeepsRental() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	ok := s.updateAt(day, UpdateRefund, Refund{ActionID: 13, Agent: "alice", AmountCents: 1000, Reason: "geste"})
	tooMuch := s.updateAt(day+time.Hour, UpdateRefund, Refund{ActionID: 14, Agent: "alice", AmountCents: totalCents, Reason: "geste"})
	st := s.run(rentalInput(3))

	s.NoError(ok.err)
	s.requireAppError(tooMuch.rejectErr, domain.ECodeConflict)
	s.Equal(int64(1000), st.RefundedCents)
	s.Equal(PhaseEnded, st.Status)
	s.True(st.EndedAt.Equal(st.PeriodStart.Add(3 * day)))
}

func (s *RentalWorkflowSuite) TestPayFromBalance() {
	s.mockAllMachine()
	s.env.OnActivity(a.PayOrderFromBalance, mock.Anything, mock.MatchedBy(func(in activities.PayFromBalanceInput) bool {
		return in.OrderRef == "KD-TEST000001" && in.AccountID == 42 && in.AmountCents == totalCents && in.At.Equal(testStart.Add(time.Minute))
	})).Return(nil).Once()
	pay := s.updateAt(time.Minute, UpdatePayFromBalance)
	st := s.run(rentalInput(3))

	s.Require().True(pay.done)
	s.NoError(pay.rejectErr)
	s.NoError(pay.err)
	s.Equal(methodBalance, st.PaymentMethod)
	s.Equal(totalCents, st.PaidCents)
	s.Equal(PhaseEnded, st.Status)
	// The debit transaction wrote the "paid" event; the workflow must not.
	s.Empty(s.eventsOf(domain.EventPaid))
	s.Equal(1, s.machine.called(activities.StepReserve))
}

func (s *RentalWorkflowSuite) TestPayFromBalanceInsufficient() {
	s.mockAllMachine()
	s.env.OnActivity(a.PayOrderFromBalance, mock.Anything, mock.Anything).
		Return(temporal.NewNonRetryableApplicationError("Solde insuffisant pour régler cette commande.", domain.ECodeInsufficient, nil)).Once()
	pay := s.updateAt(time.Minute, UpdatePayFromBalance)
	after := s.queryAt(2 * time.Minute)
	in := rentalInput(3)
	in.Config.UnpaidTimeout = 2 * time.Hour
	st := s.run(in)

	s.Require().True(pay.done)
	s.NoError(pay.rejectErr)
	s.requireAppError(pay.err, domain.ECodeInsufficient)
	var appErr *temporal.ApplicationError
	s.Require().True(errors.As(pay.err, &appErr))
	s.Contains(appErr.Error(), "Solde insuffisant")
	s.Equal(PhaseAwaitingPayment, after.Status)
	s.Zero(after.PaidCents)
	s.Equal(PhaseExpired, st.Status)
	s.Zero(s.machine.called(activities.StepReserve))
}

func (s *RentalWorkflowSuite) TestPartialThenRemainingPayment() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", 2000))
	partial := s.queryAt(2 * time.Minute)
	s.signalAt(3*time.Minute, SignalPaymentConfirmed, payment("tx2", totalCents-2000))
	st := s.run(rentalInput(3))

	s.Equal(PhaseAwaitingPayment, partial.Status)
	s.Equal(int64(2000), partial.PaidCents)
	pp := s.eventsOf(domain.EventPaymentPartial)
	s.Require().Len(pp, 1)
	s.EqualValues(totalCents-2000, pp[0].Data["missing_cents"]) // JSON round trip: float64
	s.Contains(pp[0].Message, domain.FormatUSD(totalCents-2000))
	paid := s.eventsOf(domain.EventPaid)
	s.Require().Len(paid, 1)
	s.Equal(totalCents, *paid[0].PaidCents)
	s.True(paid[0].PaidAt.Equal(testStart.Add(3 * time.Minute)))
	s.Equal(totalCents, st.PaidCents)
	s.True(st.PeriodStart.Equal(testStart.Add(3 * time.Minute)))
	s.Equal(1, s.machine.called(activities.StepReserve))
}

func (s *RentalWorkflowSuite) TestRevertedBeforeConfirmation() {
	s.mockAllMachine()
	in := rentalInput(3)
	in.Config.UnpaidTimeout = 2 * time.Hour
	s.signalAt(time.Minute, SignalPaymentSeen, payment("tx1", totalCents))
	seen := s.queryAt(2 * time.Minute)
	s.signalAt(3*time.Minute, SignalPaymentReverted, payment("tx1", totalCents))
	reverted := s.queryAt(4 * time.Minute)
	st := s.run(in)

	s.Equal(PhasePaymentDetected, seen.Status)
	s.Equal(PhaseAwaitingPayment, reverted.Status)
	s.Empty(reverted.PaymentsSeen)
	rv := s.eventsOf(domain.EventPaymentReverted)
	s.Require().Len(rv, 1)
	s.Equal(domain.StatusAwaitingPayment, rv[0].Status)
	s.Equal(PhaseExpired, st.Status)
}

// signalsTogether sends the signals in one callback: the workflow reads
// them in one batch, by kind (seen, confirmed, reverted, dust), not in the
// order they were sent.
func (s *RentalWorkflowSuite) signalsTogether(d time.Duration, sigs ...func()) {
	s.env.RegisterDelayedCallback(func() {
		for _, send := range sigs {
			send()
		}
	}, d)
}

// send sends p as the watchers do: addressed to the rental's workflow.
func (s *RentalWorkflowSuite) send(name string, p PaymentEvent) func() {
	p.Target = RentalWorkflowID(testOrderRef)
	return func() { s.env.SignalWorkflow(name, p) }
}

// A deep reorganisation removes a confirmed payment and the same
// transaction is mined and confirmed again before the workflow reads
// either signal: even with the confirmation read first, the payment stays
// counted once (generation 1), and the rental keeps its money.
func (s *RentalWorkflowSuite) TestReversalAndRemineInOneBatchCountOnce() {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	reverted := payment("tx1", totalCents)
	reverted.AfterConfirmation, reverted.Reversals = true, 1
	again := payment("tx1", totalCents)
	again.Reversals = 1
	// Read in the order the watcher did not send them (it sent the
	// reversal first).
	s.signalsTogether(time.Hour, s.send(SignalPaymentConfirmed, again), s.send(SignalPaymentReverted, reverted))
	after := s.queryAt(2 * time.Hour)
	st := s.run(rentalInput(3))

	s.Equal(PhaseActive, after.Status)
	s.Equal(totalCents, after.PaidCents)
	s.Equal(PhaseEnded, st.Status)
	rv := s.eventsOf(domain.EventPaymentReverted)
	s.Require().Len(rv, 1)
	s.Equal(domain.KeyRevertedConfirmed(payment("tx1", 0).Key()), rv[0].Key)
	var remined int
	for _, ev := range s.eventsOf(domain.EventPaymentConfirmed) {
		if ev.Reversal != nil && ev.Reversal.Remined {
			remined++
			s.Equal(domain.KeyConfirmed(payment("tx1", 0).Key()+"~1"), ev.Key)
		}
	}
	s.Equal(1, remined)
}

// The other order: a confirmation re-sent by the watcher (generation 0) and
// the payment's reversal after confirmation, read in one batch: the
// payment is uncounted, and a stale confirmation read later counts nothing.
func (s *RentalWorkflowSuite) TestStaleConfirmationAfterReversalCountsNothing() {
	s.mockAllMachine()
	in := rentalInput(3)
	in.Config.UnpaidTimeout = 2 * time.Hour
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	reverted := payment("tx1", totalCents)
	reverted.AfterConfirmation, reverted.Reversals = true, 1
	s.signalsTogether(30*time.Second+time.Minute, s.send(SignalPaymentConfirmed, payment("tx1", totalCents)), s.send(SignalPaymentReverted, reverted))
	s.signalAt(3*time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents)) // stale: generation 0
	after := s.queryAt(4 * time.Minute)
	s.run(in)

	s.Zero(after.PaidCents)
	s.Require().Len(s.eventsOf(domain.EventPaymentReverted), 1)
}

func (s *RentalWorkflowSuite) TestLatePaymentWaitsForSupportAttribution() {
	s.mockAllMachine()
	late := payment("tx1", totalCents)
	late.Late = true
	s.signalAt(time.Minute, SignalPaymentConfirmed, late)
	waiting := s.queryAt(time.Hour)
	attr := s.updateAt(2*time.Hour, UpdateAttributePayment, Attribution{ActionID: 21, Agent: "alice", Reason: "paiement en retard"})
	st := s.run(rentalInput(3))

	s.Equal(PhaseAwaitingPayment, waiting.Status)
	s.Zero(waiting.PaidCents)
	conf := s.eventsOf(domain.EventPaymentConfirmed)
	s.Require().Len(conf, 2)
	s.Contains(conf[0].Message, "support")
	s.Require().True(attr.done)
	s.NoError(attr.err)
	s.Equal(methodSupport, st.PaymentMethod)
	s.Equal(totalCents, st.PaidCents)
	s.Contains(st.PaymentsConfirmed, "support:21")
	s.True(st.PeriodStart.Equal(testStart.Add(2 * time.Hour)))
	support := s.eventsOf(domain.EventSupportAction)
	s.Require().Len(support, 1)
	s.Equal("support:21:attribute_payment", support[0].Key)
}

func (s *RentalWorkflowSuite) TestUnpaidTimeoutExpires() {
	s.mockAllMachine()
	in := rentalInput(3)
	in.Config.UnpaidTimeout = 2 * time.Hour
	st := s.run(in)

	s.Equal(PhaseExpired, st.Status)
	expired := s.eventsOf(domain.EventExpired)
	s.Require().Len(expired, 1)
	s.True(expired[0].At.Equal(testStart.Add(2 * time.Hour)))
	s.Equal(domain.StatusExpired, expired[0].Status)
	s.Zero(s.machine.called(activities.StepReserve))
}

func (s *RentalWorkflowSuite) TestDefaultUnpaidTimeout() {
	s.mockAllMachine()
	s.run(rentalInput(3))

	expired := s.eventsOf(domain.EventExpired)
	s.Require().Len(expired, 1)
	s.True(expired[0].At.Equal(testStart.Add(DefaultUnpaidTimeout)))
}

// A timeline write that keeps failing past its 10 s attempt timeout (the
// database away for a while) is retried until it succeeds: the rental
// neither fails nor loses the write. Without a schedule-to-close of its
// own, the SDK bounds a local activity's retries by the attempt timeout
// (seen failing 1,862 rentals in a 5,000-order burst).
func (s *RentalWorkflowSuite) TestTimelineWriteRetriedPastItsAttemptTimeout() {
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(testStart)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: RentalWorkflowID(testOrderRef)})
	mockOwnRequests(env, domain.TargetOrder, testOrderRef, nil)
	var mu sync.Mutex
	var calls []time.Time
	var written []activities.OrderEvent
	env.OnActivity(a.RecordOrderEvent, mock.Anything, mock.Anything).Return(nil).Maybe()
	env.OnActivity(a.RecordOrderEvents, mock.Anything, mock.Anything).Return(
		func(_ context.Context, evs []activities.OrderEvent) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, env.Now())
			if len(calls) <= 5 { // 15 s of backoff (1, 2, 4, 8 s) in workflow time
				return errors.New("database unavailable")
			}
			written = append(written, evs...)
			return nil
		})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPaymentConfirmed, PaymentEvent{Addressed: domain.Addressed{Target: RentalWorkflowID(testOrderRef)},
			Network: "bitcoin", Asset: "BTC", TxID: "tx-db-down", AmountBase: "70000", AmountCents: 100,
			IntentID: "pi-1", Address: testAddress})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		mu.Lock()
		defer mu.Unlock()
		if len(written) > 0 {
			env.CancelWorkflow()
		}
	}, 2*time.Minute)
	env.ExecuteWorkflow(RentalWorkflow, rentalInput(3))

	mu.Lock()
	defer mu.Unlock()
	s.Require().Greater(len(calls), 5)
	s.Greater(calls[len(calls)-1].Sub(calls[0]), 10*time.Second, "the retries outlasted the attempt timeout")
	s.Require().NotEmpty(written, "the payment's timeline write was lost")
	s.Equal(domain.EventPaymentConfirmed, written[0].Kind, "the write that failed is the one that went through")
}
