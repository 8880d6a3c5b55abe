package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/kernodeck/kernodeck/codec"
	"github.com/kernodeck/kernodeck/devserver"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/workflows"
)

// temporalCLI runs the temporal CLI against the test's frontend, without
// any codec: what anyone who can reach the frontend can do.
func (e *env) temporalCLI(args ...string) (string, error) {
	e.t.Helper()
	cli, err := devserver.FindCLI(os.Getenv("KERNODECK_TEMPORAL_CLI"))
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := exec.Command(cli, append(args, "--address", e.addr)...).CombinedOutput()
	return string(out), err
}

// settled waits until every event of the workflow's history is followed by
// a completed workflow task: the worker has seen everything sent so far.
func (e *env) settled(workflowID string) int {
	e.t.Helper()
	n := 0
	e.waitFor("workflow "+workflowID+" to process its history", func() bool {
		it := e.tc.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		lastSignal, lastCompleted := int64(0), int64(0)
		n = 0
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				e.t.Fatal(err)
			}
			n++
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
				lastSignal = ev.GetEventId()
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				lastCompleted = ev.GetEventId()
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
				e.t.Fatalf("workflow task failed in %s: a forged payload must not wedge the workflow", workflowID)
			}
		}
		return lastCompleted > lastSignal
	})
	return n
}

// TestForgedSignalsAndUpdatesChangeNothing: payment-seen and
// payment-confirmed signals and an attribute-payment update sent in plain
// JSON through the Temporal frontend (temporal CLI, no codec) change nothing:
// order and timeline as before, the workflow keeps running. The codec
// endpoint seals only for a named workflow, with a reason, each seal
// audited (codec_seal); a payload it sealed for no workflow opens in none.
// Sealed for the workflow, the same work, a payment only once a watcher
// recorded it.
func TestForgedSignalsAndUpdatesChangeNothing(t *testing.T) {
	e := newEnv(t)
	alice := register(e, "Alice", "forged@example.com")
	ref := str(e.must(http.StatusCreated, "POST", "/v1/orders", alice, map[string]any{
		"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"})["order"].(map[string]any)["reference"])
	waitStatus(e, alice, ref, "awaiting_payment")
	wid := workflows.RentalWorkflowID(ref)
	e.settled(wid)
	before, beforeTL, _ := order(e, alice, ref)

	total := int64(before["total_cents"].(float64))
	payment, _ := json.Marshal(workflows.PaymentEvent{Network: "bitcoin", Asset: "BTC",
		TxID: strings.Repeat("ab", 32), Index: 0, AmountBase: "100000", AmountCents: total})
	for _, sig := range []string{workflows.SignalPaymentSeen, workflows.SignalPaymentConfirmed} {
		if out, err := e.temporalCLI("workflow", "signal", "--workflow-id", wid, "--name", sig, "--input", string(payment)); err != nil {
			t.Fatalf("temporal workflow signal %s: %v %s", sig, err, out)
		}
	}
	attribution, _ := json.Marshal(workflows.Attribution{ActionID: 4242, Agent: "mallory", Reason: "forged"})
	out, err := e.temporalCLI("workflow", "update", "execute", "--workflow-id", wid,
		"--name", workflows.UpdateAttributePayment, "--input", string(attribution))
	// Rejected before the handler runs (the rejection's message is itself
	// sealed by the worker's failure converter: "Encoded failure").
	if err == nil || !strings.Contains(out, "unable to update workflow") {
		t.Fatalf("unsealed update accepted: %v %s", err, out)
	}
	e.settled(wid)
	after, afterTL, _ := order(e, alice, ref)
	if !reflect.DeepEqual(before, after) || !reflect.DeepEqual(beforeTL, afterTL) {
		t.Fatalf("forged signals changed the order:\nbefore %v\nafter  %v\ntimeline before %v\nafter %v",
			before, after, kinds(beforeTL), kinds(afterTL))
	}

	// Sealed through the codec endpoint with an agent token: applied.
	codecSrv := httptest.NewServer(http.StripPrefix("/codec", codec.Handler(e.kr, "/codec", codec.HandlerOptions{
		AgentTokens: map[string]string{agentToken: "e2e-agent"}, Throttle: e.db, Audit: e.db})))
	t.Cleanup(codecSrv.Close)
	// remote seals through the endpoint for workflow forWID ("": none named).
	remoteFor := func(token, forWID string) client.Client {
		dc := converter.NewRemoteDataConverter(converter.GetDefaultDataConverter(), converter.RemoteDataConverterOptions{
			Endpoint: codecSrv.URL + "/codec",
			ModifyRequest: func(r *http.Request) error {
				r.Header.Set("Authorization", "Bearer "+token)
				if forWID != "" {
					r.Header.Set(codec.HeaderWorkflowID, forWID)
					r.Header.Set(codec.HeaderReason, "essai de bout en bout")
				}
				return nil
			},
		})
		c, err := client.Dial(client.Options{HostPort: e.addr, DataConverter: dc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	// Without a valid agent token the endpoint seals nothing, nor for no
	// named workflow.
	if err := remoteFor("not-an-agent-token-at-all", wid).SignalWorkflow(context.Background(), wid, "",
		workflows.SignalPaymentSeen, json.RawMessage(payment)); err == nil {
		t.Fatal("codec endpoint sealed without an agent token")
	}
	if err := remoteFor(agentToken, "").SignalWorkflow(context.Background(), wid, "",
		workflows.SignalPaymentSeen, json.RawMessage(payment)); err == nil {
		t.Fatal("codec endpoint sealed for no named workflow")
	}
	// Sealed for no workflow (as the endpoint did before): the worker's
	// codec refuses it in the workflow, fully addressed as it is.
	// A watcher recorded this one: sealed for the workflow it would count.
	var ev0 workflows.PaymentEvent
	_ = json.Unmarshal(payment, &ev0)
	ev0.TxID = strings.Repeat("cd", 32)
	ev0 = e.addressed(wid, ev0)
	pgtest.Recorded(t, e.db, ev0.Claim())
	e.stranger().signal(wid, workflows.SignalPaymentConfirmed, e.sealedLegacy(ev0))
	e.settled(wid)
	if after, afterTL, _ := order(e, alice, ref); !reflect.DeepEqual(before, after) || !reflect.DeepEqual(beforeTL, afterTL) {
		t.Fatalf("a payment sealed for no workflow changed the order:\nbefore %v\nafter  %v", before, after)
	}
	agent := remoteFor(agentToken, wid)
	var ev workflows.PaymentEvent
	_ = json.Unmarshal(payment, &ev)
	// Sealed for this workflow and fully addressed (its request, the
	// request's address, asset and network), but no watcher recorded the
	// payment: it changes nothing (vDrain: only money a watcher recorded
	// is counted).
	forged := e.addressed(wid, ev)
	if err := agent.SignalWorkflow(context.Background(), wid, "", workflows.SignalPaymentConfirmed, forged); err != nil {
		t.Fatal(err)
	}
	e.settled(wid)
	if after, afterTL, _ := order(e, alice, ref); !reflect.DeepEqual(before, after) || !reflect.DeepEqual(beforeTL, afterTL) {
		t.Fatalf("a sealed, fully addressed payment no watcher recorded changed the order:\nbefore %v\nafter  %v", before, after)
	}
	// Confirmed alone, once a watcher recorded it: counted. The dropped
	// forged "seen" must not leave the workflow waiting on the
	// payment-seen channel only.
	pgtest.Recorded(t, e.db, forged.Claim())
	if err := agent.SignalWorkflow(context.Background(), wid, "", workflows.SignalPaymentConfirmed, forged); err != nil {
		t.Fatal(err)
	}
	o := waitStatus(e, alice, ref, "active")
	if int64(o["paid_cents"].(float64)) != total {
		t.Fatalf("sealed payment not counted once: %v", o)
	}
	var seals int
	if err := e.db.Get(&seals, `SELECT count(*) FROM support_actions WHERE action = 'codec_seal' AND target_ref = $1
		AND agent = 'e2e-agent' AND outcome = 'done'`, wid); err != nil || seals < 2 {
		t.Fatalf("codec seals for %s audited: %d (%v), want one per seal", wid, seals, err)
	}

	// A second order: the sealed support update works too.
	ref2 := str(e.must(http.StatusCreated, "POST", "/v1/orders", alice, map[string]any{
		"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"})["order"].(map[string]any)["reference"])
	waitStatus(e, alice, ref2, "awaiting_payment")
	// The audited action is recorded first, as the API does: the workflow
	// checks the update against it.
	var actionID int64
	if err := e.db.Get(&actionID, `INSERT INTO support_actions (agent, action, target_ref, reason, params)
		VALUES ('e2e-agent', 'attribute_payment', $1, 'virement vu', '{"amount_cents": 0}') RETURNING id`, ref2); err != nil {
		t.Fatal(err)
	}
	wid2 := workflows.RentalWorkflowID(ref2)
	h, err := remoteFor(agentToken, wid2).UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{
		WorkflowID: wid2, UpdateName: workflows.UpdateAttributePayment,
		Args: []any{workflows.Attribution{Addressed: domain.Addressed{Target: wid2}, ActionID: actionID,
			Agent: "e2e-agent", Reason: "virement vu"}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Get(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	waitStatus(e, alice, ref2, "active")
}
