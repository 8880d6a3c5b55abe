package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // PostgreSQL driver

	"github.com/kernodeck/kernodeck/apiclient"
)

// rentals starts n rentals, has them paid until active, and measures the
// service as they accumulate.
type rentals struct {
	common
	n, conc       int
	every         int
	workerMetrics string
	workerPID     int
	temporalDBs   string
	sample        int
	timeout       time.Duration
}

const (
	ordersPerCustomer = 100
	// maxRentals bounds a run: issue 23's 100,000 live rentals on one worker.
	maxRentals = 100000
	// rentalDays is long enough that no rental of a run ends during it.
	rentalDays = 30
	// activePoll is how often a run counts its active rentals.
	activePoll = 5 * time.Second
)

func (r *rentals) flagsRentals(fs *flag.FlagSet) {
	r.flags(fs)
	r.prodlikeFlags(fs)
	// The deployment's first support agent (KERNODECK_SUPPORT_TOKENS:
	// agent:token,...), as prodlike and scripts/load.sh export it.
	first, _, _ := strings.Cut(os.Getenv("KERNODECK_SUPPORT_TOKENS"), ",")
	if _, tok, ok := strings.Cut(first, ":"); ok {
		_ = fs.Set("support-token", strings.TrimSpace(tok))
	}
	workerMetrics := "http://127.0.0.1:39092/metrics"
	if a := metricsAddr("worker-1"); a != "" {
		workerMetrics = "http://" + a + "/metrics"
	}
	fs.IntVar(&r.n, "n", 1000, fmt.Sprintf("rentals to start (at most %d)", maxRentals))
	fs.IntVar(&r.conc, "c", 16, "concurrent API clients")
	fs.IntVar(&r.every, "every", 10000, "print a checkpoint each time this many more of the run's rentals are active")
	fs.StringVar(&r.workerMetrics, "worker-metrics", workerMetrics, "the worker's /metrics")
	fs.IntVar(&r.workerPID, "worker-pid", 0, "the worker's PID, for its RSS (default: worker-1's in -dir, read at each checkpoint)")
	fs.StringVar(&r.temporalDBs, "temporal-dbs", envOr("KD_PRODLIKE_TEMPORAL_DBS", ""),
		"Temporal's databases on the service's PostgreSQL server, whose sizes checkpoints report (space-separated)")
	fs.IntVar(&r.sample, "history-sample", 200, "rentals whose history length is read")
	fs.DurationVar(&r.timeout, "timeout", 0, "give up after (default: 5 min + 1 s per rental)")
}

func (r *rentals) run(ctx context.Context, out io.Writer) error {
	if r.n < 1 || r.n > maxRentals || r.conc < 1 || r.conc > 256 || r.every < 1 || r.sample < 1 {
		return fmt.Errorf("-n must be 1..%d, -c 1..256, -every and -history-sample at least 1", maxRentals)
	}
	clients, err := r.replicas()
	if err != nil {
		return err
	}
	if r.timeout == 0 {
		r.timeout = 5*time.Minute + time.Duration(r.n)*time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	db, err := sqlx.Open("postgres", r.dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	// Capacity for every rental on the local driver (a load database only).
	if _, err := db.ExecContext(ctx, `UPDATE gpu_inventory SET total_gpus = total_gpus + $1 WHERE gpu_model = $2`,
		2*r.n*8, r.model); err != nil {
		return fmt.Errorf("capacity: %w", err)
	}
	p := &progress{r: r, out: out, db: db}
	if err := db.GetContext(ctx, &p.activeBefore, activeSQL); err != nil {
		return err
	}
	before, err := scrape(ctx, r.http, r.workerMetrics)
	if err != nil {
		return fmt.Errorf("worker metrics: %w", err)
	}
	p.printf("# %d rentals of %d days, %s, %d cores, load average %s; workers: %s\n", r.n, rentalDays,
		time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), loadavg(), workerNames())

	run := time.Now().UnixNano()
	tokens := make([]string, (r.n+ordersPerCustomer-1)/ordersPerCustomer)
	if err := parallel(ctx, len(tokens), min(r.conc, 4), func(ctx context.Context, i int) error {
		t, err := r.customer(ctx, fmt.Sprintf("load-%d-%d@example.com", run, i), i)
		tokens[i] = t
		return err
	}); err != nil {
		return err
	}
	// A hundred orders each: the load customers' addresses count as
	// confirmed (an unconfirmed account holds one unpaid order at most).
	if _, err := db.ExecContext(ctx, `UPDATE accounts SET email_verified_at = now() WHERE email LIKE $1`,
		fmt.Sprintf("load-%d-%%@example.com", run)); err != nil {
		return err
	}

	if p.base, err = p.measure(ctx); err != nil {
		return err
	}
	p.last = p.base
	p.print("before", p.base)
	p.start = time.Now()
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	followed := make(chan struct{})
	var followErr error // set when followed is closed
	go func() {
		defer close(followed)
		followErr = follow(followCtx, activePoll, r.n, r.every, p.count, func(active int) {
			if s, err := p.measure(followCtx); err == nil {
				p.print("checkpoint", s)
			}
		})
	}()
	// stopped prints what the run reached before an error ended it.
	stopped := func(err error) error {
		stopFollowing()
		<-followed
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if s, merr := p.measure(mctx); merr == nil {
			p.print("stopped", s)
		}
		return err
	}

	// Each client creates a rental and pays it at once, so that rentals
	// become active all along the run; of the rentals, only an evenly spread
	// sample of references is kept (for their histories).
	stride := (r.n + r.sample - 1) / r.sample
	sampled := make([]string, (r.n+stride-1)/stride)
	var createLat, payLat durations
	var createRetries, payRetries atomic.Int64
	err = parallel(ctx, r.n, r.conc, func(ctx context.Context, i int) error {
		cl, tok := clients[i%2], tokens[i/ordersPerCustomer]
		t0 := time.Now()
		var ref string
		err := retry(ctx, 5, time.Second, &createRetries, "creation", func() (err error) {
			ref, err = cl.CreateOrder(ctx, tok, r.model, rentalDays)
			return err
		})
		if err != nil {
			return err
		}
		createLat.add(time.Since(t0))
		p.created.Add(1)
		if i%stride == 0 {
			sampled[i/stride] = ref
		}
		// The workflow may not be started yet when the API answered 201
		// through the starter: a refusal is retried; a conflict after a
		// retry is the earlier attempt's success.
		t1, tries := time.Now(), 0
		err = retry(ctx, 20, 500*time.Millisecond, &payRetries, "attribution", func() error {
			tries++
			err := cl.Attribute(ctx, r.supportToken, ref)
			if tries > 1 && errors.Is(err, apiclient.ErrConflict) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
		payLat.add(time.Since(t1))
		p.paid.Add(1)
		return nil
	})
	if err != nil {
		return stopped(err)
	}
	took := time.Since(p.start)
	p.printf("created and paid %d rentals in %.1f s: %.1f/s (c=%d); creation p50 %s p99 %s (%d retried), attribution p50 %s p99 %s (%d retried)\n",
		r.n, took.Seconds(), float64(r.n)/took.Seconds(), r.conc, ms(createLat.q(.5)), ms(createLat.q(.99)), createRetries.Load(),
		ms(payLat.q(.5)), ms(payLat.q(.99)), payRetries.Load())

	<-followed
	if followErr != nil {
		return stopped(fmt.Errorf("not every rental active: %w", followErr))
	}
	final, err := p.measure(ctx)
	if err != nil {
		return err
	}
	p.print("final", final)
	after, err := scrape(ctx, r.http, r.workerMetrics)
	if err != nil {
		return err
	}
	reportWorker(out, before, after)
	if err := r.reportHistory(ctx, out, sampled); err != nil {
		return err
	}
	return reportDatabase(ctx, out, db)
}

// retry calls fn up to attempts times, pause apart, counting the retries
// (the first retried error goes to stderr).
func retry(ctx context.Context, attempts int, pause time.Duration, retries *atomic.Int64, what string, fn func() error) error {
	var err error
	for a := range attempts {
		if err = fn(); err == nil || a == attempts-1 {
			return err
		}
		if retries.Add(1) == 1 {
			fmt.Fprintf(os.Stderr, "first retried %s: %v\n", what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
	return err
}

// workerNames are the workers of prodlike's deployment (KD_PRODLIKE_METRICS):
// with two, the load is shared and one worker's RSS is not the whole cost.
func workerNames() string {
	var names []string
	for _, kv := range strings.Fields(os.Getenv("KD_PRODLIKE_METRICS")) {
		if n, _, _ := strings.Cut(kv, "="); strings.HasPrefix(n, "worker-") {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "not prodlike's (-worker-pid, -worker-metrics)"
	}
	return fmt.Sprintf("%d (%s)", len(names), strings.Join(names, ", "))
}
