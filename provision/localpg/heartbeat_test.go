package localpg_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/provision/localpg"
	"github.com/kernodeck/kernodeck/workflows"
)

// slowPrepare is a driver whose Prepare takes a while, as a machine's does.
type slowPrepare struct {
	activities.Provisioner
	took time.Duration
}

func (s slowPrepare) Prepare(ctx context.Context, in activities.PrepareInput) error {
	select { // the step's own duration, not a wait for a condition
	case <-time.After(s.took):
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Provisioner.Prepare(ctx, in)
}

// A Provision whose steps end within half the machine steps' heartbeat
// timeout sends no heartbeat: each one is a write of the workflow on the
// Temporal server, for every order a busy block pays. With the first beat
// after 2 s, this 3 s step sent one.
func TestProvisionUnderHalfTheHeartbeatTimeoutSendsNoBeat(t *testing.T) {
	db := pgtest.NewDB(t)
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash) VALUES ('a','b','h@x.io','h') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	ref := newOrder(t, db, acc, "b200", 1, 1)
	local := &localpg.Provisioner{DB: db.DB, Host: "gpu.local", Port: 22, Keyring: testKeyring(t)}
	acts := &activities.Activities{Store: db, Provisioner: slowPrepare{Provisioner: local, took: 3 * time.Second}}

	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute) // real time: the activity runs for real
	env.RegisterActivity(acts)
	var beats atomic.Int32
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { beats.Add(1) })
	run := func(ctx workflow.Context, in activities.ProvisionInput) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			HeartbeatTimeout: workflows.MachineHeartbeatTimeout, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		return workflow.ExecuteActivity(ctx, acts.Provision, in).Get(ctx, nil)
	}
	env.RegisterWorkflow(run)
	began := time.Now()
	env.ExecuteWorkflow(run, activities.ProvisionInput{OrderRef: ref, GPUModel: "b200", GPUs: 1, Preset: "pytorch", Attempt: 1})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took >= workflows.MachineHeartbeatTimeout/2 {
		t.Skipf("Provision took %s, not under half the heartbeat timeout: nothing to tell", took)
	}
	if n := beats.Load(); n != 0 {
		t.Errorf("%d heartbeats for a Provision of %s, want none", n, time.Since(began).Round(time.Millisecond))
	}
}
