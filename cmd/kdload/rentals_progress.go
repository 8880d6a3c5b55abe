package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
)

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
