package workers_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/devserver/devservertest"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/provision/localpg"
	"github.com/kernodeck/kernodeck/secrets"
	"github.com/kernodeck/kernodeck/wfclient"
	"github.com/kernodeck/kernodeck/workers"
	"github.com/kernodeck/kernodeck/workflows"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadPrepare is a driver whose Prepare never returns and ignores
// cancellation: the step of a worker that died mid-way. Nothing is reported
// to Temporal; only the missing heartbeats tell.
type deadPrepare struct {
	activities.Provisioner
	started chan struct{}
	once    sync.Once
	release chan struct{}
}

func (d *deadPrepare) Prepare(ctx context.Context, in activities.PrepareInput) error {
	d.once.Do(func() { close(d.started) })
	<-d.release
	return context.Canceled
}

// reserveCounter counts the reservations of the drivers it wraps.
type reserveCounter struct {
	activities.Provisioner
	n *atomic.Int32
}

func (c reserveCounter) Reserve(ctx context.Context, in activities.ReserveInput) error {
	c.n.Add(1)
	return c.Provisioner.Reserve(ctx, in)
}

// A machine step in flight on a worker that dies is retried on the next
// worker after the step's heartbeat timeout, not its start-to-close timeout:
// the retry's last failure is a heartbeat timeout, and the order reaches
// active, the retry resuming at the step that died (the heartbeat's
// progress: the reservation is not made again). The time from the restart
// to active is logged (BENCHMARKS.md).
func TestStepOfADeadWorkerResumesAfterItsHeartbeatTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError}))
	db := pgtest.NewDB(t)
	tc, err := client.Dial(client.Options{HostPort: devservertest.Start(t), Logger: tlog.NewStructuredLogger(logger)})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	kr, err := secrets.Parse("t1:ZTJlLXRlc3Qta2V5LW5vdC1mb3ItcHJvZHVjdGlvbiE=")
	if err != nil {
		t.Fatal(err)
	}
	var reserves atomic.Int32
	local := reserveCounter{Provisioner: &localpg.Provisioner{Store: postgres.LocalGPUs{DB: db}, Host: "gpu.test", Port: 22, Keyring: kr}, n: &reserves}
	dead := &deadPrepare{Provisioner: local, started: make(chan struct{}), release: make(chan struct{})}
	defer close(dead.release)

	first := workers.New(tc, &activities.Activities{Store: db, Provisioner: dead, Logger: logger}, 0, 0)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	acc, err := db.CreateAccount(ctx, domain.Account{FirstName: "Re", LastName: "Sume", Email: "resume@example.com"}, "x")
	if err != nil {
		t.Fatal(err)
	}
	item, err := db.CatalogItem(ctx, "rtx-a5000")
	if err != nil {
		t.Fatal(err)
	}
	q, err := domain.PriceQuote(item, domain.Configuration{Model: "rtx-a5000", Lots: 1, DurationDays: 3, Preset: "python"})
	if err != nil {
		t.Fatal(err)
	}
	o, err := db.CreateOrder(ctx, acc.ID, q)
	if err != nil {
		t.Fatal(err)
	}
	wf := &wfclient.Client{Temporal: tc}
	if err := wf.StartRental(ctx, workflows.NewRentalInput(o, workflows.RentalConfig{
		UnpaidTimeout: time.Hour, ProvisioningAttempts: 3})); err != nil {
		t.Fatal(err)
	}
	// Audited first, as the API does: the workflow checks the update against its row.
	act, err := db.InsertSupportAction(ctx, domain.SupportAction{Agent: "test", Action: domain.ActionAttributePayment,
		TargetRef: o.Ref, Reason: "virement", Params: []byte(`{"amount_cents": 0}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := wf.AttributeOrderPayment(ctx, o.Ref, workflows.Attribution{ActionID: act, Agent: "test", Reason: "virement"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dead.started:
	case <-time.After(60 * time.Second):
		t.Fatal("Prepare never started")
	}
	// Reserve was quick: its end reaches the server with Provision's next
	// background beat, not at once.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		d, err := tc.DescribeWorkflow(ctx, "rental-"+o.Ref, "")
		require.NoError(c, err)
		pending := d.RawResponse.GetPendingActivities()
		require.Len(c, pending, 1)
		assert.NotNil(c, pending[0].GetHeartbeatDetails(), "Provision's progress heartbeated")
	}, 30*time.Second, 100*time.Millisecond)
	first.Stop() // the worker is gone; its Prepare never answers
	restarted := time.Now()
	// The paid order took its machine (TakeMachine) and Provision's reserve
	// step ran on the first worker: the second one reserves nothing again.
	var resumedReserves atomic.Int32
	resumed := reserveCounter{Provisioner: local.Provisioner, n: &resumedReserves}
	second := workers.New(tc, &activities.Activities{Store: db, Provisioner: resumed, Logger: logger}, 0, 0)
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	defer second.Stop()

	deadline := time.Now().Add(3 * time.Minute)
	for {
		got, err := db.GetOrder(ctx, o.Ref)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == domain.StatusActive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("order still %s", got.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("active %.1f s after the worker restart (heartbeat timeout %s)", time.Since(restarted).Seconds(), workflows.MachineHeartbeatTimeout)

	iter := tc.GetWorkflowHistory(ctx, "rental-"+o.Ref, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var heartbeatRetry bool
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
			tt := a.GetLastFailure().GetTimeoutFailureInfo().GetTimeoutType()
			heartbeatRetry = heartbeatRetry || tt == enumspb.TIMEOUT_TYPE_HEARTBEAT
		}
	}
	if !heartbeatRetry {
		t.Fatal("no step was retried after a heartbeat timeout")
	}
	if reserves.Load() == 0 {
		t.Fatal("the first worker reserved nothing")
	}
	if n := resumedReserves.Load(); n != 0 {
		t.Fatalf("%d reservations after the restart: the retry did not resume at the step that died", n)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
