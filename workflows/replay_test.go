package workflows

import (
	"path/filepath"
	"testing"

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
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
