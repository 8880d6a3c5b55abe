package workflows

// The counters the workflows increment (through the worker's metrics
// handler: the SDK's Prometheus exporter adds _total), in one place.

import "go.temporal.io/sdk/client"

// MetricRefusedCalls counts the inbound calls a worker refused (labels:
// call = start, signal or update; name; reason = payloads, address,
// request, action or unrecorded). The SDK's Prometheus exporter adds _total.
const MetricRefusedCalls = "kernodeck_refused_workflow_calls"

// MetricHandedOver counts the local activities that retried for
// localRetryBound and handed over to an activity (label: activity): the
// database has refused a workflow's writes for that long.
const MetricHandedOver = "kernodeck_workflow_calls_handed_over"

// MetricUpdatesHandedOver counts the updates whose work outlasted
// handlerPatience and went on in the run while they answered in_progress
// (label: update, vHandOver).
const MetricUpdatesHandedOver = "kernodeck_workflow_updates_handed_over"

// MetricTeardownStuck counts the teardowns reported stuck (label: step).
const MetricTeardownStuck = "kernodeck_teardowns_stuck"

// ExportMetrics exports the workflows' counters that alerts read at 0,
// so that the alerts read a series before the first event.
func ExportMetrics(h client.MetricsHandler) {
	h.WithTags(map[string]string{"step": "RevokeAccess"}).Counter(MetricTeardownStuck).Inc(0)
	h.WithTags(map[string]string{"activity": "RecordOrderEvents"}).Counter(MetricHandedOver).Inc(0)
	h.WithTags(map[string]string{"update": UpdatePayFromBalance}).Counter(MetricUpdatesHandedOver).Inc(0)
}
