package metrics

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The Temporal SDK's own names (go.temporal.io/sdk internal/common/metrics,
// constants.go and tags.go; not importable) of what the alert rules read.
const (
	sdkWorkflowTaskScheduleToStart = "temporal_workflow_task_schedule_to_start_latency"
	sdkActivityScheduleToStart     = "temporal_activity_schedule_to_start_latency"
	sdkWorkflowTaskFailed          = "temporal_workflow_task_execution_failed"
)

// Every temporal_* family the alert rules read is what this process's
// Temporal handler exports for the SDK's metrics (OpenTelemetry's
// Prometheus exporter: timers in seconds as histograms with the suffix
// _seconds, monotonic counters with _total), with the labels the rules
// select on: failure_reason (NonDeterminismError) and workflow_type.
func TestTemporalFamiliesTheRulesRead(t *testing.T) {
	raw, err := os.ReadFile("../deploy/monitoring/kernodeck.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	for _, name := range regexp.MustCompile(`\btemporal_[a-z_]+`).FindAllString(string(raw), -1) {
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			name = strings.TrimSuffix(name, suffix)
		}
		read[name] = true
	}
	if len(read) < 3 {
		t.Fatalf("the rules read %d temporal_* families: %v", len(read), read)
	}

	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	h := m.Temporal().WithTags(map[string]string{"namespace": "default", "task_queue": "kernodeck", "workflow_type": "RentalWorkflow"})
	h.Timer(sdkWorkflowTaskScheduleToStart).Record(30 * time.Millisecond)
	h.Timer(sdkActivityScheduleToStart).Record(2 * time.Second)
	h.WithTags(map[string]string{"failure_reason": "NonDeterminismError"}).Counter(sdkWorkflowTaskFailed).Inc(1)

	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string][]string{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				exported[f.GetName()] = append(exported[f.GetName()], l.GetName()+"="+l.GetValue())
			}
		}
	}
	for name := range read {
		if _, ok := exported[name]; !ok {
			t.Errorf("the rules read %s, which the Temporal handler does not export (exported: %v)", name, keys(exported))
		}
	}
	failed := strings.Join(exported[sdkWorkflowTaskFailed+"_total"], ",")
	if !strings.Contains(failed, "failure_reason=NonDeterminismError") || !strings.Contains(failed, "workflow_type=RentalWorkflow") {
		t.Errorf("%s_total labels: %s", sdkWorkflowTaskFailed, failed)
	}
}

func keys(m map[string][]string) []string {
	var out []string
	for k := range m {
		if strings.HasPrefix(k, "temporal_") {
			out = append(out, k)
		}
	}
	return out
}
