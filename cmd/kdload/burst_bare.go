package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jmoiron/sqlx"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// --- the bare loop -----------------------------------------------------------

const bareSignal = "pay"

// BareWorkflow waits for one signal, writes one row through an activity, and
// ends: the least a payment signal can cost on this deployment.
func BareWorkflow(ctx workflow.Context, key string) error {
	workflow.GetSignalChannel(ctx, bareSignal).Receive(ctx, nil)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second},
	})
	return workflow.ExecuteActivity(ctx, "BareWrite", key).Get(ctx, nil)
}

func (b *burst) bareWrite(ctx context.Context, key string) error {
	_, err := b.bareDB.ExecContext(ctx, `INSERT INTO kdload_bare (run, key) VALUES ($1, $2) ON CONFLICT DO NOTHING`, b.bareRun, key)
	if err != nil {
		activity.GetLogger(ctx).Warn("bare write", "err", err)
	}
	return err
}

// bareLoop starts n minimal workflows (not timed), then signals them all at
// once, b.conc at a time, and times the signals until the n-th row.
func (b *burst) bareLoop(ctx context.Context, out io.Writer, db *sqlx.DB) (float64, error) {
	tc, err := b.dialTemporal()
	if err != nil {
		return 0, err
	}
	defer tc.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS kdload_bare (run TEXT NOT NULL, key TEXT NOT NULL,
		at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (run, key))`); err != nil {
		return 0, err
	}
	b.bareDB = db
	b.bareRun = fmt.Sprintf("bare-%d", time.Now().UnixNano())
	queue := "kdload-" + b.bareRun
	w := worker.New(tc, queue, worker.Options{})
	w.RegisterWorkflow(BareWorkflow)
	w.RegisterActivityWithOptions(b.bareWrite, activity.RegisterOptions{Name: "BareWrite"})
	if err := w.Start(); err != nil {
		return 0, err
	}
	defer w.Stop()
	ids := make([]string, b.n)
	if err := parallel(ctx, b.n, b.conc, func(ctx context.Context, i int) error {
		ids[i] = fmt.Sprintf("%s-%d", b.bareRun, i)
		_, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ids[i], TaskQueue: queue}, BareWorkflow, ids[i])
		return err
	}); err != nil {
		return 0, err
	}
	// Let the first workflow tasks (the wait for the signal) run.
	time.Sleep(5 * time.Second)
	t0 := time.Now()
	if err := parallel(ctx, b.n, b.conc, func(ctx context.Context, i int) error {
		return tc.SignalWorkflow(ctx, ids[i], "", bareSignal, nil)
	}); err != nil {
		return 0, err
	}
	signalled := time.Since(t0)
	for {
		var n int
		if err := db.GetContext(ctx, &n, `SELECT count(*) FROM kdload_bare WHERE run = $1`, b.bareRun); err != nil {
			return 0, err
		}
		if n >= b.n {
			break
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%d of %d rows: %w", n, b.n, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	total := time.Since(t0)
	rate := float64(b.n) / total.Seconds()
	fmt.Fprintf(out, "bare loop: %d signals sent in %.1f s (c=%d), %d rows written by activities %.1f s after the first: %.0f/s\n",
		b.n, signalled.Seconds(), b.conc, b.n, total.Seconds(), rate)
	return rate, nil
}
