package localpg_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/postgres"
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

// A Provision sends no heartbeat before half the machine steps' heartbeat
// timeout, so one that ends sooner sends none: each beat is a write of the
// workflow on the Temporal server, for every order a busy block pays. With
// the first beat after 2 s, this 3 s step sent one. Beats are timed from
// before the run, so a loaded machine (a Provision past 5 s, a beat then
// being due) neither skips the check nor fails it falsely.
func TestProvisionUnderHalfTheHeartbeatTimeoutSendsNoBeat(t *testing.T) {
	db := pgtest.NewDB(t)
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash) VALUES ('a','b','h@x.io','h') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	ref := newOrder(t, db, acc, "b200", 1, 1)
	local := &localpg.Provisioner{Store: postgres.LocalGPUs{DB: db}, Host: "gpu.local", Port: 22, Keyring: testKeyring(t)}
	acts := &activities.Activities{Store: db, Provisioner: slowPrepare{Provisioner: local, took: 3 * time.Second}}

	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute) // real time: the activity runs for real
	env.RegisterActivity(acts)
	var mu sync.Mutex
	var beats []time.Duration // since began, an upper bound of each beat's time into the activity
	var began time.Time
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
		mu.Lock()
		defer mu.Unlock()
		beats = append(beats, time.Since(began))
	})
	run := func(ctx workflow.Context, in activities.ProvisionInput) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			HeartbeatTimeout: workflows.MachineHeartbeatTimeout, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		return workflow.ExecuteActivity(ctx, acts.Provision, in).Get(ctx, nil)
	}
	env.RegisterWorkflow(run)
	began = time.Now()
	env.ExecuteWorkflow(run, activities.ProvisionInput{OrderRef: ref, GPUModel: "b200", GPUs: 1, Preset: "pytorch", Attempt: 1})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	mu.Lock()
	defer mu.Unlock()
	for _, at := range beats {
		if at < workflows.MachineHeartbeatTimeout/2 {
			t.Fatalf("heartbeats at %v into a Provision of %s, want none before %s",
				beats, took.Round(time.Millisecond), workflows.MachineHeartbeatTimeout/2)
		}
	}
	t.Logf("Provision took %s, heartbeats at %v", took.Round(time.Millisecond), beats)
}
