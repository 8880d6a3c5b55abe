package workflows

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Histories recorded from real runs on a Temporal dev server (the e2e tests
// with KERNODECK_RECORD_HISTORY=1) replay against the current code: a change
// that alters a running workflow's commands fails here, and needs
// workflow.GetVersion.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			// The names the worker registers (see wfclient).
			r.RegisterWorkflowWithOptions(RentalWorkflow, workflow.RegisterOptions{Name: "RentalWorkflow"})
			r.RegisterWorkflowWithOptions(TopUpWorkflow, workflow.RegisterOptions{Name: "TopUpWorkflow"})
			hist, err := client.HistoryFromJSON(mustOpen(t, f), client.HistoryJSONOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The workflow checks its inputs against its own ID (vAddressed):
			// replayed under it, not the replayer's "ReplayId".
			id := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId()
			if err := r.ReplayWorkflowHistoryWithOptions(nil, hist,
				worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: id}}); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}

func mustOpen(t *testing.T, name string) io.Reader {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}
