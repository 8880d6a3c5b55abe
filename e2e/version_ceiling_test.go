package e2e

import (
	"context"
	"testing"

	"github.com/kernodeck/kernodeck/codec"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/wfclient"
	"github.com/kernodeck/kernodeck/workflows"
)

// A rental started under a version ceiling (wfclient.Client.MaxVersion,
// KERNODECK_WORKFLOW_VERSION) records that version, not the worker's
// newest, and runs to its end on it; one started without records the
// newest. In the release build both are the same version; built with
// -tags kdrollout (one version ahead) the ceiling holds it back, and its
// recorded history (rental_version_ceiling.json, recorded from that build)
// replays on the release build: the workers of the previous release can
// run every task of a workflow a new starter began during a rolling
// restart.
func TestRentalStartedUnderVersionCeiling(t *testing.T) {
	e := newEnv(t)
	acc := e.account("ceiling@example.com")

	held := e.startOrder(acc, workflows.RentalConfig{MaxVersion: workflows.OldestStartVersion})
	newest := e.startOrder(acc, workflows.RentalConfig{})
	// kernodeck versions: the held run counts at its version while open.
	wc := &wfclient.Client{Temporal: e.tc}
	e.waitFor("open runs counted per version", func() bool {
		counts, err := wc.OpenRunsByVersion(context.Background())
		if err != nil || len(counts) != workflows.NewestVersion {
			return false
		}
		return counts[workflows.OldestStartVersion-1].Open >= 1 && counts[workflows.NewestVersion-1].Open >= 1
	})
	for _, ref := range []string{held.Ref, newest.Ref} {
		e.support("orders/"+ref+"/attribute-payment", map[string]any{"reason": "test du plafond de version"})
		e.waitOrder(ref, domain.StatusActive)
		e.support("orders/"+ref+"/end-early", map[string]any{"reason": "fin du test"})
		e.waitOrder(ref, domain.StatusEnded)
	}
	if v := e.historyVersion(workflows.RentalWorkflowID(held.Ref)); v != workflows.OldestStartVersion {
		t.Errorf("started under ceiling %d: recorded version %d", workflows.OldestStartVersion, v)
	}
	if v := e.historyVersion(workflows.RentalWorkflowID(newest.Ref)); v != workflows.NewestVersion {
		t.Errorf("started without a ceiling: recorded version %d, want the newest %d", v, workflows.NewestVersion)
	}
	e.waitFor("workflow closed", func() bool { return e.closed(workflows.RentalWorkflowID(held.Ref)) })
	replayHistory(t, e.tc, workflows.RentalWorkflowID(held.Ref), "rental_version_ceiling.json")
}

// historyVersion reads the command version a workflow recorded; -1 if
// none.
func (e *env) historyVersion(workflowID string) int {
	e.t.Helper()
	dc := codec.DataConverter(e2eKeyring(e.t))
	for _, ev := range historyOf(e.t, e.tc, workflowID).GetEvents() {
		if v, ok := workflows.RecordedVersion(ev, dc); ok {
			return v
		}
	}
	return -1
}
