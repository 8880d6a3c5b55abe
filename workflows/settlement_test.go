package workflows

import (
	"context"
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
