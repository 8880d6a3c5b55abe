package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// The settlement workflow refunds at most what remains of a queued amount:
// a refund above it is refused and writes nothing (the check of its own,
// settlement.refundOf; PostgreSQL bounds it too, but a refusal there
// comes after the attempt); a refund of what remains goes through once.
func TestSettlementRefundsNoMoreThanRemains(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.SetStartTime(testStart)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: SettlementWorkflowID(testOrderRef)})
	env.OnActivity(a.CheckSupportAction, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.LoadException, mock.Anything, int64(7)).Return(domain.Exception{ID: 7, TargetKind: domain.TargetOrder,
		TargetRef: testOrderRef, AccountID: 42, Reason: domain.ExceptionOver, PaymentKey: "bitcoin:tx1:0",
		Asset: "BTC", Network: "bitcoin", AmountCents: 1000, RefundedCents: 400}, nil)
	var mu sync.Mutex
	var written []activities.OrderEvent
	env.OnActivity(a.RecordOrderEvent, mock.Anything, mock.Anything).Return(func(_ context.Context, ev activities.OrderEvent) error {
		mu.Lock()
		defer mu.Unlock()
		written = append(written, ev)
		return nil
	})
	refund := func(action, cents int64) domain.ExceptionRefund {
		return domain.ExceptionRefund{Addressed: domain.Addressed{Target: SettlementWorkflowID(testOrderRef)},
			ExceptionID: 7, ActionID: action, Agent: "alice", AmountCents: cents, Reason: "trop-perçu"}
	}
	over := updateAt(env, time.Minute, UpdateRefundException, refund(1, 601))
	exact := updateAt(env, 2*time.Minute, UpdateRefundException, refund(2, 600))
	env.ExecuteWorkflow(SettlementWorkflow, SettlementInput{TargetKind: domain.TargetOrder, TargetRef: testOrderRef})

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.True(t, over.done)
	var ae *temporal.ApplicationError
	require.ErrorAs(t, over.err, &ae, "refund above what remains")
	require.Equal(t, domain.ECodeConflict, ae.Type())
	require.NoError(t, exact.err)
	require.Len(t, written, 1, "only the refund of what remains is written")
	require.Equal(t, int64(600), written[0].Use.Cents)
	require.Equal(t, int64(600), written[0].Posting.Cents)
}

// A settlement refund whose write PostgreSQL refuses past handlerPatience
// answers in_progress; a second action is refused meanwhile (the run is
// busy, nothing written for it), and the refund is written once the
// database is back, before the run ends. (A 4-minute outage: the SDK's
// test environment stops an activity's retries at 10 attempts.)
func TestSettlementRefundOutlastingItsCallerGoesOnInTheRun(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.SetStartTime(testStart)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: SettlementWorkflowID(testOrderRef)})
	env.OnActivity(a.CheckSupportAction, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.LoadException, mock.Anything, int64(7)).Return(domain.Exception{ID: 7, TargetKind: domain.TargetOrder,
		TargetRef: testOrderRef, AccountID: 42, Reason: domain.ExceptionOver, PaymentKey: "bitcoin:tx1:0",
		Asset: "BTC", Network: "bitcoin", AmountCents: 1000}, nil)
	back := testStart.Add(5 * time.Minute)
	var written []activities.OrderEvent
	env.OnActivity(a.RecordOrderEvent, mock.Anything, mock.Anything).Return(func(_ context.Context, ev activities.OrderEvent) error {
		if env.Now().Before(back) {
			return errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
		}
		written = append(written, ev)
		return nil
	})
	refund := func(action, cents int64) domain.ExceptionRefund {
		return domain.ExceptionRefund{Addressed: domain.Addressed{Target: SettlementWorkflowID(testOrderRef)},
			ExceptionID: 7, ActionID: action, Agent: "alice", AmountCents: cents, Reason: "trop-perçu"}
	}
	first := updateAt(env, time.Minute, UpdateRefundException, refund(1, 600))
	second := updateAt(env, 2*time.Minute, UpdateRefundException, refund(2, 400))
	env.ExecuteWorkflow(SettlementWorkflow, SettlementInput{TargetKind: domain.TargetOrder, TargetRef: testOrderRef})

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var ae *temporal.ApplicationError
	require.True(t, first.done)
	require.ErrorAs(t, first.err, &ae)
	require.Equal(t, domain.ECodeInProgress, ae.Type())
	require.True(t, second.done)
	require.ErrorAs(t, second.rejectErr, &ae, "refused while the first is in progress")
	require.Equal(t, domain.ECodeUnavailable, ae.Type())
	require.Len(t, written, 1, "the first refund, written once the database is back")
	require.Equal(t, int64(600), written[0].Use.Cents)
}
