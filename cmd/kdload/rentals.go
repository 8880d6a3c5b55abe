package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // PostgreSQL driver
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kernodeck/kernodeck/apiclient"
	"github.com/kernodeck/kernodeck/workflows"
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

const activeSQL = `SELECT count(*) FROM orders WHERE status = 'active'`

// follow counts the run's active rentals every poll until n are (nil) or
// ctx ends (its error), calling checkpoint each time the count has passed
// a further multiple of every below n (n itself is the caller's final line).
func follow(ctx context.Context, poll time.Duration, n, every int, count func(context.Context) (int, error), checkpoint func(active int)) error {
	next := every
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		active, err := count(ctx)
		switch {
		case err != nil:
			fmt.Fprintln(os.Stderr, "counting active rentals:", err)
		case active >= n:
			return nil
		case active >= next:
			checkpoint(active)
			next = (active/every + 1) * every
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// progress is a run's measurements as it goes; checkpoint lines are printed
// as they are reached, so a long run cut short keeps what it printed.
type progress struct {
	r             *rentals
	mu            sync.Mutex // out
	out           io.Writer
	db            *sqlx.DB
	activeBefore  int
	start         time.Time
	base, last    snapshot
	created, paid atomic.Int64
}

// snapshot is what one checkpoint line reports. Memory is in bytes, NaN
// when unknown.
type snapshot struct {
	at          time.Duration // since the first order of the run
	active      int           // the run's active rentals
	workerPID   int
	workerRSS   float64
	workerPeak  float64
	temporalRSS float64
	selfRSS     float64
	dbs         []dbSize
}

type dbSize struct {
	name  string
	bytes int64
}

// count is the run's active rentals.
func (p *progress) count(ctx context.Context) (int, error) {
	var all int
	err := p.db.GetContext(ctx, &all, activeSQL)
	return all - p.activeBefore, err
}

func (p *progress) measure(ctx context.Context) (snapshot, error) {
	s := snapshot{workerRSS: math.NaN(), workerPeak: math.NaN(), temporalRSS: math.NaN()}
	if !p.start.IsZero() {
		s.at = time.Since(p.start)
	}
	var err error
	if s.active, err = p.count(ctx); err != nil {
		return s, err
	}
	// The PIDs are read again each time: prodlike restarts a process that
	// exited.
	s.workerPID = p.r.workerPID
	if s.workerPID == 0 && p.r.dir != "" {
		s.workerPID, _ = p.r.prodlikePID("worker-1")
	}
	if s.workerPID > 0 {
		s.workerRSS, _ = procStatus(s.workerPID, "VmRSS")
		s.workerPeak, _ = procStatus(s.workerPID, "VmHWM")
	}
	if p.r.dir != "" {
		if pid, err := p.r.prodlikePID("temporal-server"); err == nil {
			s.temporalRSS, _ = procStatus(pid, "VmRSS")
		}
	}
	s.selfRSS, _ = procStatus(os.Getpid(), "VmRSS")
	var own dbSize
	if err := p.db.QueryRowContext(ctx, `SELECT current_database(), pg_database_size(current_database())`).Scan(&own.name, &own.bytes); err != nil {
		return s, fmt.Errorf("database size: %w", err)
	}
	s.dbs = append(s.dbs, own)
	for _, name := range strings.Fields(p.r.temporalDBs) {
		d := dbSize{name: name}
		if err := p.db.GetContext(ctx, &d.bytes, `SELECT pg_database_size($1)`, name); err != nil {
			return s, fmt.Errorf("size of database %s: %w", name, err)
		}
		s.dbs = append(s.dbs, d)
	}
	return s, nil
}

func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, format, args...)
}

// print writes one checkpoint line: the run's active rentals, elapsed time
// and rate (overall and since the previous line), the processes' memory
// and the databases' sizes (and growth since the run started).
func (p *progress) print(label string, s snapshot) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d active after %.1f s", label, s.active, s.at.Seconds())
	if s.at > 0 {
		fmt.Fprintf(&b, ", %.2f/s", float64(s.active)/s.at.Seconds())
		if d := s.at - p.last.at; d > 0 && p.last.at > 0 {
			fmt.Fprintf(&b, " (%.2f/s since the last line)", float64(s.active-p.last.active)/d.Seconds())
		}
	}
	fmt.Fprintf(&b, "; created %d, paid %d", p.created.Load(), p.paid.Load())
	fmt.Fprintf(&b, "; worker pid %d RSS %s (peak %s); temporal-server RSS %s; PostgreSQL", s.workerPID,
		mib(s.workerRSS), mib(s.workerPeak), mib(s.temporalRSS))
	for i, d := range s.dbs {
		fmt.Fprintf(&b, " %s %.1f MiB", d.name, float64(d.bytes)/(1<<20))
		if i < len(p.base.dbs) && label != "before" {
			fmt.Fprintf(&b, " (%+.1f)", float64(d.bytes-p.base.dbs[i].bytes)/(1<<20))
		}
		if i < len(s.dbs)-1 {
			b.WriteByte(',')
		}
	}
	fmt.Fprintf(&b, "; kdload RSS %s; load average %s\n", mib(s.selfRSS), loadavg())
	p.printf("%s", b.String())
	p.last = s
}

func mib(bytes float64) string {
	if math.IsNaN(bytes) {
		return "?"
	}
	return fmt.Sprintf("%.0f MiB", bytes/(1<<20))
}

// durations is a histogram of durations in buckets 2 % wide: quantiles
// within 2 % in constant memory, however many rentals a run times.
type durations struct {
	mu     sync.Mutex
	counts [durBuckets]int64
	n      int64
}

// durBuckets: bucket i holds [1.02^i, 1.02^(i+1)) µs; the last, everything
// from 1.02^1199 µs (5.8 hours) on.
const durBuckets = 1200

var durGrowth = math.Log(1.02)

func (h *durations) add(d time.Duration) {
	i := 0
	if us := float64(d) / float64(time.Microsecond); us > 1 {
		i = min(int(math.Log(us)/durGrowth), durBuckets-1)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[i]++
	h.n++
}

// q is the p-quantile, the middle of the bucket that holds it.
func (h *durations) q(p float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	rank := max(int64(math.Ceil(p*float64(h.n))), 1)
	var seen int64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			return time.Duration(math.Exp((float64(i)+0.5)*durGrowth) * float64(time.Microsecond))
		}
	}
	return 0
}

func reportWorker(out io.Writer, before, after map[string]*dto.MetricFamily) {
	fmt.Fprintf(out, "worker (its /metrics): RSS %s, goroutines %.0f\n",
		mib(gauge(after, "process_resident_memory_bytes")), gauge(after, "go_goroutines"))
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
	tc, err := r.dialTemporal()
	if err != nil {
		return err
	}
	defer tc.Close()
	var total, most int64
	for _, ref := range refs {
		d, err := tc.DescribeWorkflow(ctx, workflows.RentalWorkflowID(ref), "")
		if err != nil {
			return err
		}
		l := d.RawResponse.GetWorkflowExecutionInfo().GetHistoryLength()
		total += l
		most = max(most, l)
	}
	fmt.Fprintf(out, "history events per active rental (sample of %d): mean %.1f, max %d\n", len(refs), float64(total)/float64(len(refs)), most)
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

// procStatus reads a memory field of /proc/PID/status (VmRSS, VmHWM) in
// bytes.
func procStatus(pid int, field string) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return math.NaN(), err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		var kb float64
		if _, err := fmt.Sscanf(s.Text(), field+": %f kB", &kb); err == nil {
			return kb * 1024, nil
		}
	}
	return math.NaN(), fmt.Errorf("no %s for %d", field, pid)
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
