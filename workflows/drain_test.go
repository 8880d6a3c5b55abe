package workflows

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// written is a timeline event as the tests of this file read it.
type written struct{ kind, key string }

// drainCase is a rental or a top-up for the tests of what a run leaves
// behind when it ends or continues as new.
type drainCase struct {
	name      string
	kind, ref string
	wid       string
	wf        any
	in        any
	one, many any // its Record*Event activities

	mu     sync.Mutex
	events []written
}

// ledgerOf reads the payment ledger a run continuing as new carries.
func (c *drainCase) ledgerOf(can *workflow.ContinueAsNewError) (*paymentLedger, error) {
	dc := converter.GetDefaultDataConverter()
	switch c.wf.(type) {
	case func(workflow.Context, RentalInput) (RentalStatus, error):
		var in RentalInput
		if err := dc.FromPayloads(can.Input, &in); err != nil || in.Carry == nil {
			return nil, errors.Join(err, errors.New("no carry"))
		}
		return in.Carry.Payments, nil
	default:
		var in TopUpInput
		if err := dc.FromPayloads(can.Input, &in); err != nil || in.Carry == nil {
			return nil, errors.Join(err, errors.New("no carry"))
		}
		return in.Carry.Payments, nil
	}
}

// keep records the events an activity mock was called with.
func (c *drainCase) keep(args mock.Arguments) {
	c.mu.Lock()
	defer c.mu.Unlock()
	add := func(kind string, data map[string]any) {
		key, _ := data["key"].(string)
		c.events = append(c.events, written{kind, key})
	}
	switch ev := args.Get(1).(type) {
	case activities.OrderEvent:
		add(ev.Kind, ev.Data)
	case []activities.OrderEvent:
		for _, e := range ev {
			add(e.Kind, e.Data)
		}
	case activities.TopUpEvent:
		add(ev.Kind, ev.Data)
	case []activities.TopUpEvent:
		for _, e := range ev {
			add(e.Kind, e.Data)
		}
	}
}

// about is how many events were written about the payment key.
func (c *drainCase) about(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, ev := range c.events {
		if ev.key == key {
			n++
		}
	}
	return n
}

func drainCases(unpaid time.Duration) []*drainCase {
	rin := rentalInput(3)
	rin.Config.UnpaidTimeout = unpaid
	tin := topUpInput()
	tin.PaymentTimeout = unpaid
	return []*drainCase{
		{name: "rental", kind: domain.TargetOrder, ref: testOrderRef, wid: RentalWorkflowID(testOrderRef),
			wf: RentalWorkflow, in: rin, one: a.RecordOrderEvent, many: a.RecordOrderEvents},
		{name: "top-up", kind: domain.TargetTopUp, ref: testTopUpRef, wid: TopUpWorkflowID(testTopUpRef),
			wf: TopUpWorkflow, in: tin, one: a.RecordTopUpEvent, many: a.RecordTopUpEvents},
	}
}

// env is a test environment for c whose payment requests pi-1 and pi-2
// are c's, unknown to the run: reading pi-2 takes checkPi2 of workflow
// time. The first batch write takes firstWrite, and brings the history
// to its bound.
func (c *drainCase) env(checkPi2, firstWrite time.Duration) *testsuite.TestWorkflowEnvironment {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	bound := func(args mock.Arguments) {
		env.SetCurrentHistoryLength(DefaultMaxHistory)
		c.keep(args)
	}
	env.SetStartTime(testStart)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: c.wid})
	namesPi2 := mock.MatchedBy(func(cs []domain.PaymentClaim) bool {
		return slices.ContainsFunc(cs, func(c domain.PaymentClaim) bool { return c.IntentID == "pi-2" })
	})
	env.OnActivity(a.CheckPayments, mock.Anything, namesPi2).After(checkPi2).Return(recordedAs(c.kind, c.ref, nil)).Once()
	env.OnActivity(a.CheckPayments, mock.Anything, mock.Anything).Return(recordedAs(c.kind, c.ref, nil)).Maybe()
	if firstWrite > 0 {
		env.OnActivity(c.many, mock.Anything, mock.Anything).After(firstWrite).Return(nil).Run(bound).Once()
	}
	env.OnActivity(c.many, mock.Anything, mock.Anything).Return(nil).Run(c.keep).Maybe()
	env.OnActivity(c.one, mock.Anything, mock.Anything).Return(nil).Run(c.keep).Maybe()
	return env
}

// signalAt sends p to c's workflow at d, as a watcher does.
func (c *drainCase) signalAt(env *testsuite.TestWorkflowEnvironment, d time.Duration, name string, p PaymentEvent) {
	p.Target = c.wid
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(name, p) }, d)
}

// TestPaymentInItsCheckWhenTheRunContinuesIsCarried: a payment signal
// taken from its channel while its payment request is read from
// PostgreSQL (a request the run does not know) is busy from that moment.
// Here the run passes its history bound with the first payment's batch,
// and the second payment is taken during that batch's write, its check
// taking a minute: the run continues as new only once it is handled, and
// the next run holds it. Before vDrain the run continued while the check
// was pending and the payment was lost (the watcher had it delivered).
func TestPaymentInItsCheckWhenTheRunContinuesIsCarried(t *testing.T) {
	for _, c := range drainCases(24 * time.Hour) {
		t.Run(c.name, func(t *testing.T) {
			env := c.env(time.Minute, time.Minute)
			first := payment("tx-first", 1000)
			late := payment("tx-late", 1000)
			late.IntentID = "pi-2"
			c.signalAt(env, time.Minute, SignalPaymentSeen, first)
			c.signalAt(env, 90*time.Second, SignalPaymentSeen, late)
			env.ExecuteWorkflow(c.wf, c.in)

			require.True(t, env.IsWorkflowCompleted())
			var can *workflow.ContinueAsNewError
			require.ErrorAs(t, env.GetWorkflowError(), &can, "the run continues as new")
			ledger, err := c.ledgerOf(can)
			require.NoError(t, err)
			require.True(t, ledger.Pending[first.Key()], "the first payment is carried")
			require.True(t, ledger.Pending[late.Key()], "the payment whose check was pending is carried")
			require.Equal(t, 1, c.about(late.Key()), "the late payment's \"seen\" event is written")
			env.AssertExpectations(t)
		})
	}
}

// TestPaymentInItsCheckWhenTheRunEndsIsHandled: an order or a top-up
// expires unpaid while a payment's check against its request is pending:
// the run ends only once the payment is handled (here: confirmed after
// the expiry, so it goes to support's queue), never with it dropped.
func TestPaymentInItsCheckWhenTheRunEndsIsHandled(t *testing.T) {
	const unpaid = 2 * time.Hour
	for _, c := range drainCases(unpaid) {
		t.Run(c.name, func(t *testing.T) {
			env := c.env(time.Minute, 0)
			late := payment("tx-late", 1000)
			late.IntentID = "pi-2"
			c.signalAt(env, unpaid-30*time.Second, SignalPaymentConfirmed, late)
			env.ExecuteWorkflow(c.wf, c.in)

			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			require.Equal(t, 1, c.about(late.Key()), "the payment confirmed at the expiry is written once")
			env.AssertExpectations(t)
		})
	}
}
