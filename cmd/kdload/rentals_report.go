package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/kernodeck/kernodeck/workflows"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

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
