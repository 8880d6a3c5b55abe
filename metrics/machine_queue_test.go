package metrics

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/postgres"
)

// fakeLine is the line's statistics as the database would give them.
type fakeLine struct {
	stats []postgres.MachineQueueStat
	err   error
	after time.Duration // the threshold the collector asked with
}

func (f *fakeLine) MachineQueueStats(_ context.Context, after time.Duration) ([]postgres.MachineQueueStat, error) {
	f.after = after
	return f.stats, f.err
}

// lineSeries gathers m's registry: the line's series as family{gpu_model}
// → value, and the machine_queue scrape errors.
func lineSeries(t *testing.T, m *Metrics) (map[string]float64, float64) {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out, errs := map[string]float64{}, -1.0
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			labels := ""
			for _, l := range s.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue()
			}
			switch f.GetName() {
			case FamMachineQueueWaiting, FamMachineQueueOldest, FamMachineQueueOverdue:
				out[f.GetName()+"{"+labels+"}"] = s.GetGauge().GetValue()
			case FamScrapeErrors:
				if labels == "source=machine_queue" {
					errs = s.GetCounter().GetValue()
				}
			}
		}
	}
	return out, errs
}

// The line's gauges: per model its waiting orders and oldest wait, and in
// all the orders past the alert threshold (the collector's, passed to the
// query), summed over models. With nobody waiting the overdue count is
// still exported, at 0; a failed query is counted and leaves the families
// out of that scrape.
func TestMachineQueueGauges(t *testing.T) {
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	line := &fakeLine{}
	m.CollectMachineQueue(line, 45*time.Minute)

	got, errs := lineSeries(t, m)
	if want := map[string]float64{FamMachineQueueOverdue + "{}": 0}; !reflect.DeepEqual(got, want) || errs != 0 {
		t.Fatalf("nobody waiting: %v (scrape errors %v), want %v and 0 errors", got, errs, want)
	}
	if line.after != 45*time.Minute {
		t.Fatalf("threshold asked: %v, want 45m", line.after)
	}

	line.stats = []postgres.MachineQueueStat{
		{Model: "b200", Waiting: 2, OldestSeconds: 3000, Overdue: 1},
		{Model: "rtx-4090"},
		{Model: "rtx-a5000", Waiting: 3, OldestSeconds: 4000.5, Overdue: 2},
	}
	got, _ = lineSeries(t, m)
	want := map[string]float64{
		FamMachineQueueWaiting + "{gpu_model=b200}":      2,
		FamMachineQueueWaiting + "{gpu_model=rtx-4090}":  0,
		FamMachineQueueWaiting + "{gpu_model=rtx-a5000}": 3,
		FamMachineQueueOldest + "{gpu_model=b200}":       3000,
		FamMachineQueueOldest + "{gpu_model=rtx-4090}":   0,
		FamMachineQueueOldest + "{gpu_model=rtx-a5000}":  4000.5,
		FamMachineQueueOverdue + "{}":                    3,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("line: %v\nwant %v", got, want)
	}

	line.err = errors.New("database down")
	if got, _ = lineSeries(t, m); len(got) != 0 {
		t.Fatalf("failed query: %v, want no series", got)
	}
	// The registry gathers its collectors at once: the failure's count may
	// land after the counter was read in that scrape; the next one has it.
	line.err = nil
	if _, errs = lineSeries(t, m); errs != 1 {
		t.Fatalf("scrape errors after the failed query: %v, want 1", errs)
	}
}
