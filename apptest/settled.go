package apptest

import (
	"context"
	"fmt"
	"testing"
	"time"

	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

// SettleHorizon is how far ahead a settled workflow has no timer due.
const SettleHorizon = time.Minute

// Settled reports whether a workflow has nothing left to do on its own:
// closed, or waiting with no workflow task, activity or child pending and
// no timer due within horizon. When it is not, why says what it waits
// for. A test checking that an input changed nothing waits for this
// rather than sleeping: whatever the input led to is then written.
func Settled(ctx context.Context, c client.Client, workflowID string, horizon time.Duration) (settled bool, why string, err error) {
	d, err := c.DescribeWorkflow(ctx, workflowID, "")
	if err != nil {
		return false, "", err
	}
	before := d.RawResponse
	info := before.GetWorkflowExecutionInfo()
	switch {
	case info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED:
		return false, "", fmt.Errorf("no status in the description of %s", workflowID)
	case info.GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return true, "", nil
	case before.GetPendingWorkflowTask() != nil:
		return false, "a workflow task", nil
	case len(before.GetPendingActivities()) > 0:
		return false, fmt.Sprintf("%d activities", len(before.GetPendingActivities())), nil
	case len(before.GetPendingChildren()) > 0:
		return false, fmt.Sprintf("%d child workflows", len(before.GetPendingChildren())), nil
	}
	due := map[string]time.Time{} // open timers by ID
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return false, "", err
		}
		if a := ev.GetTimerStartedEventAttributes(); a != nil {
			due[a.GetTimerId()] = ev.GetEventTime().AsTime().Add(a.GetStartToFireTimeout().AsDuration())
		} else if a := ev.GetTimerFiredEventAttributes(); a != nil {
			delete(due, a.GetTimerId())
		} else if a := ev.GetTimerCanceledEventAttributes(); a != nil {
			delete(due, a.GetTimerId())
		}
	}
	for id, at := range due {
		if time.Until(at) < horizon {
			return false, fmt.Sprintf("timer %s due at %s", id, at.Format(time.RFC3339Nano)), nil
		}
	}
	// The history read matches the description: nothing came between.
	after, err := c.DescribeWorkflow(ctx, workflowID, "")
	if err != nil {
		return false, "", err
	}
	if n := after.RawResponse.GetWorkflowExecutionInfo().GetHistoryLength(); n != info.GetHistoryLength() {
		return false, "new events while reading its history", nil
	}
	return true, "", nil
}

// WaitSettled waits (60 s at most) until Settled holds for a workflow.
func WaitSettled(t testing.TB, ctx context.Context, c client.Client, workflowID string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, why, err := Settled(ctx, c, workflowID, SettleHorizon)
		if err != nil {
			t.Fatalf("workflow %s: %v", workflowID, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s not settled after 60 s: it waits for %s", workflowID, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitSettled waits until a workflow of the harness is settled (Settled).
func (e *Env) WaitSettled(workflowID string) {
	e.T.Helper()
	WaitSettled(e.T, e.Ctx, e.Temporal, workflowID)
}
