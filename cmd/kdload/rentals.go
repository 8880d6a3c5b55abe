package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // PostgreSQL driver
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.temporal.io/sdk/client"

	"github.com/kernodeck/kernodeck/apiclient"
)

// rentals starts n rentals and measures the service once they are active.
type rentals struct {
	common
	n, conc       int
	workerMetrics string
	workerPID     int
	sample        int
	timeout       time.Duration
}

const ordersPerCustomer = 100

func (r *rentals) run(ctx context.Context, out io.Writer) error {
	if r.n < 1 || r.n > 20000 || r.conc < 1 || r.conc > 256 {
		return fmt.Errorf("-n must be 1..20000 and -c 1..256")
	}
	if err := r.loopbackOnly(); err != nil {
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
	var activeBefore int
	if err := db.GetContext(ctx, &activeBefore, `SELECT count(*) FROM orders WHERE status = 'active'`); err != nil {
		return err
	}
	before, err := scrape(ctx, r.http, r.workerMetrics)
	if err != nil {
		return fmt.Errorf("worker metrics: %w", err)
	}

	run := time.Now().UnixNano()
	tokens := make([]string, (r.n+ordersPerCustomer-1)/ordersPerCustomer)
	if err := parallel(ctx, len(tokens), min(r.conc, 4), func(ctx context.Context, i int) error {
		t, err := r.customer(ctx, fmt.Sprintf("load-%d-%d@example.com", run, i), i)
		tokens[i] = t
		return err
	}); err != nil {
		return err
	}
	// A hundred unpaid orders each: the load customers' addresses count as
	// confirmed (an unconfirmed account holds one unpaid order at most).
	if _, err := db.ExecContext(ctx, `UPDATE accounts SET email_verified_at = now() WHERE email LIKE $1`,
		fmt.Sprintf("load-%d-%%@example.com", run)); err != nil {
		return err
	}

	refs := make([]string, r.n)
	var createLat, payLat latencies
	var mu sync.Mutex
	start := time.Now()
	if err := parallel(ctx, r.n, r.conc, func(ctx context.Context, i int) error {
		t0 := time.Now()
		ref, err := r.createOrder(ctx, tokens[i/ordersPerCustomer])
		if err != nil {
			return err
		}
		mu.Lock()
		refs[i] = ref
		createLat = append(createLat, time.Since(t0))
		mu.Unlock()
		return nil
	}); err != nil {
		return err
	}
	created := time.Since(start)
	fmt.Fprintf(out, "created %d orders in %.1f s: %.0f/s (c=%d), latency p50 %s p99 %s\n",
		r.n, created.Seconds(), float64(r.n)/created.Seconds(), r.conc, ms(createLat.q(.5)), ms(createLat.q(.99)))

	var paid, retries atomic.Int64
	start = time.Now()
	if err := parallel(ctx, r.n, r.conc, func(ctx context.Context, i int) error {
		t0 := time.Now()
		// The workflow may not be started yet when the API answered 201
		// through the starter: retry a refusal a few times.
		var err error
		for attempt := 0; attempt < 20; attempt++ {
			err = r.attribute(ctx, refs[i])
			if err == nil || (attempt > 0 && errors.Is(err, apiclient.ErrConflict)) {
				err = nil
				break
			}
			if retries.Add(1) == 1 {
				fmt.Fprintln(os.Stderr, "first retried attribution:", err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
		if err != nil {
			return err
		}
		paid.Add(1)
		mu.Lock()
		payLat = append(payLat, time.Since(t0))
		mu.Unlock()
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(out, "paid %d orders by support attribution in %.1f s: %.0f/s, latency p50 %s p99 %s (%d retried)\n",
		paid.Load(), time.Since(start).Seconds(), float64(paid.Load())/time.Since(start).Seconds(), ms(payLat.q(.5)), ms(payLat.q(.99)), retries.Load())

	// Wait for every order to be active.
	var active int
	for {
		if err := db.GetContext(ctx, &active, `SELECT count(*) FROM orders WHERE status = 'active'`); err != nil {
			return err
		}
		if active-activeBefore >= r.n {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d rentals active: %w", active-activeBefore, r.n, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	fmt.Fprintf(out, "all %d active %.1f s after the first creation (%d active rentals in total)\n",
		r.n, time.Since(start.Add(-created)).Seconds(), active)
	// Let the SDK's metrics reach the exporter, then read them.
	after, err := scrape(ctx, r.http, r.workerMetrics)
	if err != nil {
		return err
	}
	r.reportWorker(out, before, after)
	if err := r.reportHistory(ctx, out, refs); err != nil {
		return err
	}
	return reportDatabase(ctx, out, db)
}

func (r *rentals) reportWorker(out io.Writer, before, after map[string]*dto.MetricFamily) {
	rss := gauge(after, "process_resident_memory_bytes")
	fmt.Fprintf(out, "worker RSS %.0f MiB", rss/(1<<20))
	if r.workerPID > 0 {
		if hwm, err := vmHWM(r.workerPID); err == nil {
			fmt.Fprintf(out, ", peak %.0f MiB", hwm/(1<<20))
		}
	}
	fmt.Fprintf(out, ", goroutines %.0f\n", gauge(after, "go_goroutines"))
	for _, h := range []string{
		"temporal_workflow_task_schedule_to_start_latency_seconds",
		"temporal_workflow_task_execution_latency_seconds",
		"temporal_activity_schedule_to_start_latency_seconds",
		"temporal_activity_execution_latency_seconds",
	} {
		b := histDelta(before, after, h)
		fmt.Fprintf(out, "%s: n=%.0f p50 %s p99 %s\n", strings.TrimPrefix(h, "temporal_"), b.count,
			msq(b.quantile(.5)), msq(b.quantile(.99)))
	}
}

func (r *rentals) reportHistory(ctx context.Context, out io.Writer, refs []string) error {
	tc, err := client.Dial(client.Options{HostPort: r.temporal, Namespace: r.namespace})
	if err != nil {
		return err
	}
	defer tc.Close()
	n := min(r.sample, len(refs))
	var total, most int64
	for i := range n {
		ref := refs[i*len(refs)/n]
		d, err := tc.DescribeWorkflow(ctx, "rental-"+ref, "")
		if err != nil {
			return err
		}
		l := d.RawResponse.GetWorkflowExecutionInfo().GetHistoryLength()
		total += l
		most = max(most, l)
	}
	fmt.Fprintf(out, "history events per active rental (sample of %d): mean %.1f, max %d\n", n, float64(total)/float64(n), most)
	return nil
}

func reportDatabase(ctx context.Context, out io.Writer, db *sqlx.DB) error {
	var size int64
	if err := db.GetContext(ctx, &size, `SELECT pg_database_size(current_database())`); err != nil {
		return err
	}
	fmt.Fprintf(out, "PostgreSQL database %.1f MiB;", float64(size)/(1<<20))
	for _, table := range []string{"orders", "timeline_events", "ledger_entries", "mail_outbox", "gpu_reservations", "order_access"} {
		var n int64
		if err := db.GetContext(ctx, &n, `SELECT count(*) FROM `+table); err != nil {
			return err
		}
		fmt.Fprintf(out, " %s %d", table, n)
	}
	var all int64
	if err := db.GetContext(ctx, &all, `SELECT COALESCE(sum(n_live_tup), 0)::bigint FROM pg_stat_user_tables`); err != nil {
		return err
	}
	fmt.Fprintf(out, "; all tables ~%d rows\n", all)
	return nil
}

func vmHWM(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		var kb float64
		if _, err := fmt.Sscanf(s.Text(), "VmHWM: %f kB", &kb); err == nil {
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM for %d", pid)
}

// --- Prometheus scrapes ---

func scrape(ctx context.Context, hc *http.Client, u string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

func gauge(fams map[string]*dto.MetricFamily, name string) float64 {
	if f := fams[name]; f != nil && len(f.GetMetric()) > 0 {
		return f.GetMetric()[0].GetGauge().GetValue()
	}
	return math.NaN()
}

// buckets is a histogram summed over its series: cumulative counts per
// upper bound.
type buckets struct {
	bounds []float64
	counts []float64
	count  float64
}

func sumHist(fams map[string]*dto.MetricFamily, name string) buckets {
	var b buckets
	f := fams[name]
	if f == nil {
		return b
	}
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		if b.bounds == nil {
			for _, bk := range h.GetBucket() {
				b.bounds = append(b.bounds, bk.GetUpperBound())
			}
			b.counts = make([]float64, len(b.bounds))
		}
		for i, bk := range h.GetBucket() {
			if i < len(b.counts) {
				b.counts[i] += float64(bk.GetCumulativeCount())
			}
		}
		b.count += float64(h.GetSampleCount())
	}
	return b
}

// histDelta is what a histogram observed between two scrapes.
func histDelta(before, after map[string]*dto.MetricFamily, name string) buckets {
	a, b := sumHist(after, name), sumHist(before, name)
	if len(b.counts) == len(a.counts) {
		for i := range a.counts {
			a.counts[i] -= b.counts[i]
		}
		a.count -= b.count
	}
	return a
}

// quantile interpolates linearly inside the bucket holding q, as
// Prometheus' histogram_quantile does; past the last finite bound it returns
// that bound negated (printed "> bound" by msq).
func (b buckets) quantile(q float64) time.Duration {
	if b.count <= 0 {
		return 0
	}
	rank := q * b.count
	lower, prev := 0.0, 0.0
	for i, c := range b.counts {
		if c >= rank && math.IsInf(b.bounds[i], 1) {
			return -time.Duration(lower * float64(time.Second)) // above the last bound: "> lower"
		}
		if c >= rank {
			frac := 0.0
			if c > prev {
				frac = (rank - prev) / (c - prev)
			}
			return time.Duration((lower + (b.bounds[i]-lower)*frac) * float64(time.Second))
		}
		lower, prev = b.bounds[i], c
	}
	return time.Duration(lower * float64(time.Second)) // above the last bound
}

// msq prints a quantile, "> bound" when it lies past the last bucket.
func msq(d time.Duration) string {
	if d < 0 {
		return "> " + ms(-d)
	}
	return ms(d)
}
