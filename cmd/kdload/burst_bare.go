package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
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

// bare is the ceiling the burst is compared with: n minimal workflows, each
// waiting for one signal, then writing one row through an activity. It runs
// several times on the same deployment (its own task queue, a worker in
// this process), each run on a settled database, and the burst is compared
// with the median run and with the fastest.
type bare struct {
	db    *sqlx.DB
	tc    client.Client
	n     int
	conc  int
	run   string       // the current run's key prefix and rows
	ready atomic.Int64 // workflows of the current run that reached their wait for the signal
	// counters reads the Temporal server's (burst.readCounters); nil
	// when its metrics endpoint is not known.
	counters func(context.Context) (serverCounters, error)
	// reads, if not nil, starts the customers' reads for a run.
	reads func(context.Context) func() *readReport
}

// Workflow waits for one signal, writes one row through an activity, and
// ends: the least a payment signal can cost on this deployment.
func (b *bare) Workflow(ctx workflow.Context, key string) error {
	if !workflow.IsReplaying(ctx) {
		b.ready.Add(1)
	}
	workflow.GetSignalChannel(ctx, bareSignal).Receive(ctx, nil)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second},
	})
	return workflow.ExecuteActivity(ctx, "BareWrite", key).Get(ctx, nil)
}

func (b *bare) write(ctx context.Context, run, key string) error {
	_, err := b.db.ExecContext(ctx, `INSERT INTO kdload_bare (run, key) VALUES ($1, $2) ON CONFLICT DO NOTHING`, run, key)
	if err != nil {
		activity.GetLogger(ctx).Warn("bare write", "err", err)
	}
	return err
}

// bareLoop runs the bare loop b.rounds times and returns the median rate
// and the fastest, per second.
//
// reads, if not nil, starts the customers' reads that ran during the burst
// (-kill) for each run, and returns what stops them.
func (b *burst) bareLoop(ctx context.Context, out io.Writer, db *sqlx.DB, reads func(context.Context) func() *readReport) (median, best float64, err error) {
	tc, err := b.dialTemporal()
	if err != nil {
		return 0, 0, err
	}
	defer tc.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS kdload_bare (run TEXT NOT NULL, key TEXT NOT NULL,
		at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (run, key))`); err != nil {
		return 0, 0, err
	}
	bl := &bare{db: db, tc: tc, n: b.n, conc: b.conc, reads: reads}
	if b.temporalMetrics != "" {
		bl.counters = b.readCounters
	}
	queue := fmt.Sprintf("kdload-bare-%d", time.Now().UnixNano())
	w := worker.New(tc, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(bl.Workflow, workflow.RegisterOptions{Name: "BareWorkflow"})
	w.RegisterActivityWithOptions(func(ctx context.Context, key string) error {
		return bl.write(ctx, bl.run, key)
	}, activity.RegisterOptions{Name: "BareWrite"})
	if err := w.Start(); err != nil {
		return 0, 0, err
	}
	defer w.Stop()
	rates := make([]float64, 0, b.bareRuns)
	for i := range b.bareRuns {
		if err := settle(ctx, out, db); err != nil {
			return 0, 0, err
		}
		rate, err := bl.once(ctx, out, queue, i+1)
		if err != nil {
			return 0, 0, err
		}
		rates = append(rates, rate)
	}
	slices.Sort(rates)
	return rates[len(rates)/2], rates[len(rates)-1], nil
}

// once is one run: n workflows started (not timed) and waiting for their
// signal, then the n signals sent at once, b.conc at a time, timed until
// the n-th row.
func (b *bare) once(ctx context.Context, out io.Writer, queue string, round int) (float64, error) {
	b.run = fmt.Sprintf("%s-%d", queue, round)
	b.ready.Store(0)
	ids := make([]string, b.n)
	if err := parallel(ctx, b.n, b.conc, func(ctx context.Context, i int) error {
		ids[i] = fmt.Sprintf("%s-%d", b.run, i)
		_, err := b.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ids[i], TaskQueue: queue}, "BareWorkflow", ids[i])
		return err
	}); err != nil {
		return 0, err
	}
	// Every workflow waits for its signal before the clock starts: its
	// first task ran here, and the server recorded its completion.
	if err := poll(ctx, 50*time.Millisecond, func() (bool, error) { return b.ready.Load() >= int64(b.n), nil }); err != nil {
		return 0, fmt.Errorf("%d of %d workflows ready: %w", b.ready.Load(), b.n, err)
	}
	if err := parallel(ctx, b.n, b.conc, func(ctx context.Context, i int) error {
		return poll(ctx, 50*time.Millisecond, func() (bool, error) {
			d, err := b.tc.DescribeWorkflow(ctx, ids[i], "")
			return err == nil && d.RawResponse.GetPendingWorkflowTask() == nil, err
		})
	}); err != nil {
		return 0, err
	}
	var before, after serverCounters
	var err error
	if b.counters != nil {
		if before, err = b.counters(ctx); err != nil {
			return 0, err
		}
	}
	stopReading := func() *readReport { return nil }
	if b.reads != nil {
		stopReading = b.reads(ctx)
		defer stopReading() // on an error; stopping twice is harmless
	}
	t0 := time.Now()
	if err := parallel(ctx, b.n, b.conc, func(ctx context.Context, i int) error {
		return b.tc.SignalWorkflow(ctx, ids[i], "", bareSignal, nil)
	}); err != nil {
		return 0, err
	}
	signalled := time.Since(t0)
	if err := poll(ctx, 50*time.Millisecond, func() (bool, error) {
		var n int
		err := b.db.GetContext(ctx, &n, `SELECT count(*) FROM kdload_bare WHERE run = $1`, b.run)
		return n >= b.n, err
	}); err != nil {
		return 0, fmt.Errorf("rows: %w", err)
	}
	total := time.Since(t0)
	readers := stopReading()
	rate := float64(b.n) / total.Seconds()
	if b.counters != nil {
		if after, err = b.counters(ctx); err != nil {
			return 0, err
		}
	}
	fmt.Fprintf(out, "bare loop %d: %d signals sent in %.1f s (c=%d), %d rows written by activities %.1f s after the first: %.0f/s\n",
		round, b.n, signalled.Seconds(), b.conc, b.n, total.Seconds(), rate)
	if readers != nil {
		fmt.Fprintf(out, "bare loop %d, customers' order reads meanwhile: %s\n", round, readers)
	}
	if b.counters != nil {
		fmt.Fprintf(out, "bare loop %d, Temporal server from the first signal to the last row: %s\n", round, after.since(before).work(b.n))
	}
	return rate, nil
}

// settle waits until no vacuum runs on the deployment's PostgreSQL server
// (after a burst, autovacuum works through the Temporal server's tables and
// their indexes for minutes): a bare run that shares the cores with it
// measures the vacuum, not the loop. It waits at most 5 minutes, and says
// so.
func settle(ctx context.Context, out io.Writer, db *sqlx.DB) error {
	t0 := time.Now()
	var running []string
	err := poll(ctx, time.Second, func() (bool, error) {
		running = running[:0]
		err := db.SelectContext(ctx, &running, `SELECT datname || ' relation ' || relid FROM pg_stat_progress_vacuum`)
		return len(running) == 0 || time.Since(t0) > 5*time.Minute, err
	})
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	switch {
	case len(running) > 0:
		fmt.Fprintf(out, "vacuum still running after %.0f s (%v): measuring anyway, load average %s\n", time.Since(t0).Seconds(), running, loadavg())
	case time.Since(t0) > time.Second:
		fmt.Fprintf(out, "waited %.0f s for vacuum to end, load average %s\n", time.Since(t0).Seconds(), loadavg())
	}
	return nil
}

// poll calls done every interval until it returns true or an error, or ctx
// ends.
func poll(ctx context.Context, interval time.Duration, done func() (bool, error)) error {
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
