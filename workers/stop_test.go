package workers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/devserver/devservertest"
	"github.com/kernodeck/kernodeck/workers"
)

// The worker's options carry the stop timeout they are given, so that
// KERNODECK_WORKER_STOP_TIMEOUT reaches the SDK.
func TestWorkerOptionsCarryTheStopTimeout(t *testing.T) {
	if got := workers.Options(0, 90*time.Second).WorkerStopTimeout; got != 90*time.Second {
		t.Fatalf("WorkerStopTimeout = %v, want 90s", got)
	}
}

// A worker built with the service's options, stopped (what SIGTERM does)
// while an activity runs, lets that activity finish its work: the activity
// is told the worker stops (its stop channel) and its context is not
// cancelled, so it returns its result and the workflow completes with it.
// With the SDK's default stop timeout (0) the context is cancelled at once.
func TestStoppingWorkerLetsRunningActivitiesFinish(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	tc, err := client.Dial(client.Options{HostPort: devservertest.Start(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()

	const queue = "stop-test"
	started := make(chan struct{})
	finished := make(chan error, 1)
	work := func(ctx context.Context) (string, error) {
		close(started)
		// The step in progress: it notices the stop, then needs a
		// little more time to reach a point where it may end.
		select {
		case <-activity.GetWorkerStopChannel(ctx):
		case <-ctx.Done():
			finished <- ctx.Err()
			return "", ctx.Err()
		}
		select {
		case <-time.After(500 * time.Millisecond):
			finished <- nil
			return "done", nil
		case <-ctx.Done():
			finished <- ctx.Err()
			return "", ctx.Err()
		}
	}
	flow := func(ctx workflow.Context) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		var out string
		err := workflow.ExecuteActivity(ctx, "Work").Get(ctx, &out)
		return out, err
	}
	// The service's options, but for its inbound interceptor (it refuses
	// this test workflow's start, addressed to no Kernodeck workflow).
	opts := workers.Options(0, 30*time.Second)
	opts.Interceptors = nil
	w := worker.New(tc, queue, opts)
	w.RegisterWorkflowWithOptions(flow, workflow.RegisterOptions{Name: "StopTest"})
	w.RegisterActivityWithOptions(work, activity.RegisterOptions{Name: "Work"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, "StopTest")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the activity never started")
	}
	w.Stop() // returns once the activity is done (or the timeout passed)
	select {
	case err := <-finished:
		if err != nil {
			t.Fatalf("the running activity was cancelled by the worker's stop: %v", err)
		}
	default:
		t.Fatal("Stop returned before the running activity finished")
	}

	// Its result reached the server: another worker finishes the workflow.
	w2 := worker.New(tc, queue, opts)
	w2.RegisterWorkflowWithOptions(flow, workflow.RegisterOptions{Name: "StopTest"})
	w2.RegisterActivityWithOptions(func(context.Context) (string, error) { return "", errors.New("not run again") },
		activity.RegisterOptions{Name: "Work"})
	if err := w2.Start(); err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	var out string
	if err := run.Get(ctx, &out); err != nil || out != "done" {
		t.Fatalf("workflow: %q, %v; want the activity's result", out, err)
	}
}
