// Package workers wires the Temporal worker: the workflows, the activities
// with their dependencies, the namespace's search attributes, and the
// starter that makes sure every stored order and top-up has its workflow.
package workers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/wfclient"
	"github.com/kernodeck/kernodeck/workflows"
)

// New returns a worker on the Kernodeck task queue with both workflows and
// all activities registered (not started), with Options(maxVersion,
// stopTimeout).
func New(c client.Client, acts *activities.Activities, maxVersion int, stopTimeout time.Duration) worker.Worker {
	w := worker.New(c, workflows.TaskQueue, Options(maxVersion, stopTimeout))
	Register(w, acts)
	return w
}

// Options are the worker's options. Its interceptor refuses any start or
// update whose one argument is not addressed to its workflow and any
// signal without exactly one payload (workflows.InboundInterceptor).
// maxVersion (KERNODECK_WORKFLOW_VERSION; 0: none) caps the history version
// of every run it starts, a run continuing as new included
// (workflows.VersionCeiling). stopTimeout (KERNODECK_WORKER_STOP_TIMEOUT)
// is how long Stop (on SIGTERM) waits for running activities to finish
// before cancelling them: the SDK's default, 0, cancels them at once.
func Options(maxVersion int, stopTimeout time.Duration) worker.Options {
	return worker.Options{
		Interceptors:             []interceptor.WorkerInterceptor{&workflows.InboundInterceptor{}},
		PreferredVersionProvider: workflows.VersionCeiling(maxVersion),
		WorkerStopTimeout:        stopTimeout,
	}
}

// Register registers the workflows and activities on any worker registry
// (a real worker, a test environment or a replayer).
func Register(r worker.Registry, acts *activities.Activities) {
	r.RegisterWorkflowWithOptions(workflows.RentalWorkflow, workflow.RegisterOptions{Name: wfclient.RentalWorkflowType})
	r.RegisterWorkflowWithOptions(workflows.TopUpWorkflow, workflow.RegisterOptions{Name: wfclient.TopUpWorkflowType})
	r.RegisterWorkflowWithOptions(workflows.SettlementWorkflow, workflow.RegisterOptions{Name: workflows.SettlementWorkflowType})
	r.RegisterWorkflowWithOptions(workflows.PayoutWorkflow, workflow.RegisterOptions{Name: workflows.PayoutWorkflowType})
	r.RegisterActivity(acts)
}

// RegisterSearchAttributes adds Kernodeck's custom search attributes to the
// namespace if they are missing, so operators can filter in the Web UI.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string, logger *slog.Logger) error {
	op := c.OperatorService()
	have, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, name := range workflows.SearchAttributeNames {
		if _, ok := have.GetCustomAttributes()[name]; !ok {
			missing[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	}); err != nil {
		return fmt.Errorf("add search attributes: %w", err)
	}
	logger.Info("registered search attributes", "namespace", namespace, "count", len(missing))
	return nil
}
