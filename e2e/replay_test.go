package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/kernodeck/kernodeck/codec"
	"github.com/kernodeck/kernodeck/wfclient"
	"github.com/kernodeck/kernodeck/workflows"
)

// historyOf reads the history of a workflow's latest run.
func historyOf(t *testing.T, tc client.Client, workflowID string) *historypb.History {
	t.Helper()
	iter := tc.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		hist.Events = append(hist.Events, ev)
	}
	return hist
}

// replayHistory replays a finished workflow's real history against the
// current workflow code: a non-deterministic change fails here. With
// KERNODECK_RECORD_HISTORY=1 the history is also written to
// workflows/testdata, where a unit test replays it on every run.
func replayHistory(t *testing.T, tc client.Client, workflowID, file string) {
	t.Helper()
	ctx := context.Background()
	hist := historyOf(t, tc, workflowID)
	// Payloads are sealed (package codec): replay with the same converter.
	kr := e2eKeyring(t)
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{
		DataConverter: codec.DataConverter(kr), FailureConverter: codec.FailureConverter(kr)})
	if err != nil {
		t.Fatal(err)
	}
	r.RegisterWorkflowWithOptions(workflows.RentalWorkflow, workflow.RegisterOptions{Name: wfclient.RentalWorkflowType})
	r.RegisterWorkflowWithOptions(workflows.TopUpWorkflow, workflow.RegisterOptions{Name: wfclient.TopUpWorkflowType})
	// Under its own ID: the workflow checks its inputs against it, and its
	// payloads are sealed for it (the replayer's default is "ReplayId").
	if err := r.ReplayWorkflowHistoryWithOptions(nil, hist,
		worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: workflowID}}); err != nil {
		t.Fatalf("replay %s: %v", workflowID, err)
	}
	if os.Getenv("KERNODECK_RECORD_HISTORY") == "1" {
		// Recorded in clear, so the workflows' unit test replays it without
		// the e2e key.
		dec := &codec.Codec{Keyring: kr, AcceptUnsealed: true} // search attributes are plain
		if err := proxy.VisitPayloads(ctx, hist, proxy.VisitPayloadsOptions{
			Visitor: func(_ *proxy.VisitPayloadsContext, p []*commonpb.Payload) ([]*commonpb.Payload, error) {
				return dec.Decode(p)
			},
		}); err != nil {
			t.Fatal(err)
		}
		b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "workflows", "testdata", file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
