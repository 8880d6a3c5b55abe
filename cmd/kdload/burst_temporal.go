package main

import (
	"context"
	"fmt"
	"io"
	"maps"

	dto "github.com/prometheus/client_model/go"

	"github.com/kernodeck/kernodeck/workflows"
)

// activityDispatch is how the Temporal server handed Kernodeck's activity
// tasks to the workers, from its metrics: eagerly, in the response to the
// workflow task that scheduled them (deploy/temporal/dynamicconfig.yaml
// turns it on), or through matching, to a worker's poll.
type activityDispatch struct{ eager, polled float64 }

// readDispatch reads the counters of the namespace's Kernodeck task
// queue on the Temporal server's metrics endpoint.
func (b *burst) readDispatch(ctx context.Context) (activityDispatch, error) {
	fams, err := scrape(ctx, b.http, b.temporalMetrics)
	if err != nil {
		return activityDispatch{}, fmt.Errorf("scrape %s: %w", b.temporalMetrics, err)
	}
	on := map[string]string{"namespace": b.namespace, "taskqueue": workflows.TaskQueue}
	polled := maps.Clone(on)
	polled["task_type"] = "Activity"
	return activityDispatch{
		eager:  counterSum(fams, "activity_eager_execution", on),
		polled: counterSum(fams, "poll_success", polled),
	}, nil
}

// reportDispatch prints what the server's counters did since before.
func (b *burst) reportDispatch(ctx context.Context, out io.Writer, before activityDispatch) {
	after, err := b.readDispatch(ctx)
	if err != nil {
		fmt.Fprintf(out, "Temporal server's activity dispatch: not read: %v\n", err)
		return
	}
	fmt.Fprintf(out, "Temporal server: %.0f activity tasks started eagerly (activity_eager_execution), %.0f polled through matching (poll_success, Activity)\n",
		after.eager-before.eager, after.polled-before.polled)
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
