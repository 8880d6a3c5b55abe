package main

import (
	"context"
	"fmt"
	"io"
	"maps"

	dto "github.com/prometheus/client_model/go"

	"github.com/kernodeck/kernodeck/workflows"
)

// serverCounters are the Temporal server's counters for the namespace
// (its metrics endpoint), read at points of a run and compared.
type serverCounters struct {
	// How the server handed Kernodeck's activity tasks to the workers:
	// eagerly, in the response to the workflow task that scheduled them
	// (deploy/temporal/dynamicconfig.yaml turns it on), or through
	// matching, to a worker's poll.
	eager, polled float64
	// writes are the history service's updates of an execution
	// (UpdateWorkflowExecution), one per signal, task start or
	// completion: the count to compare between the burst and the bare
	// loop (BENCHMARKS.md).
	writes float64
	// stickyTimeouts are workflow tasks that waited out their sticky
	// queue's schedule-to-start timeout: each is scheduled again on the
	// task queue (another write) and replayed in full by the worker
	// that takes it.
	stickyTimeouts float64
	// heartbeats are activity heartbeats (each one more write).
	heartbeats float64
}

// readCounters reads the namespace's counters; the zero value when the
// server's metrics endpoint is not known.
func (b *burst) readCounters(ctx context.Context) (serverCounters, error) {
	if b.temporalMetrics == "" {
		return serverCounters{}, nil
	}
	fams, err := scrape(ctx, b.http, b.temporalMetrics)
	if err != nil {
		return serverCounters{}, fmt.Errorf("scrape %s: %w", b.temporalMetrics, err)
	}
	ns := map[string]string{"namespace": b.namespace}
	on := map[string]string{"namespace": b.namespace, "taskqueue": workflows.TaskQueue}
	polled := maps.Clone(on)
	polled["task_type"] = "Activity"
	return serverCounters{
		eager:          counterSum(fams, "activity_eager_execution", on),
		polled:         counterSum(fams, "poll_success", polled),
		writes:         counterSum(fams, "persistence_requests", with(ns, "operation", "UpdateWorkflowExecution")),
		stickyTimeouts: counterSum(fams, "schedule_to_start_timeout", ns),
		heartbeats: counterSum(fams, "service_requests",
			with(with(ns, "operation", "RecordActivityTaskHeartbeat"), "service_name", "frontend")),
	}, nil
}

// with is labels and name=value.
func with(labels map[string]string, name, value string) map[string]string {
	l := maps.Clone(labels)
	l[name] = value
	return l
}

// since is what the counters did from before to c.
func (c serverCounters) since(before serverCounters) serverCounters {
	return serverCounters{eager: c.eager - before.eager, polled: c.polled - before.polled, writes: c.writes - before.writes,
		stickyTimeouts: c.stickyTimeouts - before.stickyTimeouts, heartbeats: c.heartbeats - before.heartbeats}
}

// work describes the server's work for n workflows.
func (c serverCounters) work(n int) string {
	return fmt.Sprintf("%.0f execution writes (%.2f per workflow), %.0f workflow tasks past their sticky queue's timeout, %.0f activity heartbeats",
		c.writes, c.writes/float64(n), c.stickyTimeouts, c.heartbeats)
}

// reportCounters prints what the server's counters did from the start of
// the run, and from the block to the last order active.
func (b *burst) reportCounters(ctx context.Context, out io.Writer, start, block, active serverCounters) {
	if b.temporalMetrics == "" {
		return
	}
	now, err := b.readCounters(ctx)
	if err != nil {
		fmt.Fprintf(out, "Temporal server's counters: not read: %v\n", err)
		return
	}
	d := now.since(start)
	fmt.Fprintf(out, "Temporal server: %.0f activity tasks started eagerly (activity_eager_execution), %.0f polled through matching (poll_success, Activity)\n",
		d.eager, d.polled)
	fmt.Fprintf(out, "Temporal server, from the block to the last order active: %s\n", active.since(block).work(b.n))
}

// counterSum sums a counter over its series that carry every one of labels.
func counterSum(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	sum := 0.0
	for _, m := range fams[name].GetMetric() {
		matched := 0
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
				matched++
			}
		}
		if matched == len(labels) {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
