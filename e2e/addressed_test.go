package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/kernodeck/kernodeck/codec"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// stranger is a client of the Temporal frontend without the keyring: it
// reads histories and sends payloads as they are, through the raw service.
type stranger struct {
	t  *testing.T
	wf workflowservice.WorkflowServiceClient
}

func (e *env) stranger() stranger {
	c, err := client.Dial(client.Options{HostPort: e.addr}) // no codec
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return stranger{t: e.t, wf: c.WorkflowService()}
}

func (s stranger) signal(wid, name string, in *commonpb.Payloads) {
	s.t.Helper()
	if _, err := s.wf.SignalWorkflowExecution(context.Background(), &workflowservice.SignalWorkflowExecutionRequest{
		Namespace: "default", WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wid},
		SignalName: name, Input: in, Identity: "mallory", RequestId: uuid.NewString(),
	}); err != nil {
		s.t.Fatalf("signal %s to %s: %v", name, wid, err)
	}
}

// update runs an update with the given payloads and reports whether the
// workflow carried it out (false: refused or failed).
func (s stranger) update(wid, name string, in *commonpb.Payloads) bool {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := s.wf.UpdateWorkflowExecution(ctx, &workflowservice.UpdateWorkflowExecutionRequest{
		Namespace: "default", WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wid},
		WaitPolicy: &updatepb.WaitPolicy{LifecycleStage: enumspb.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED},
		Request: &updatepb.Request{Meta: &updatepb.Meta{UpdateId: uuid.NewString(), Identity: "mallory"},
			Input: &updatepb.Input{Name: name, Args: in}},
	})
	if err != nil {
		return false
	}
	return resp.GetOutcome().GetFailure() == nil && resp.GetOutcome().GetSuccess() != nil
}

// sealedFor seals arg as the keyring's holders do for workflow wid: the
// exact payload that lands in wid's history, for a stranger to copy.
func (e *env) sealedFor(wid string, arg any) *commonpb.Payloads {
	e.t.Helper()
	dc := converter.WithDataConverterSerializationContext(codec.DataConverter(e.kr),
		converter.WorkflowSerializationContext{Namespace: "default", WorkflowID: wid})
	p, err := dc.ToPayloads(arg)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// sealedLegacy seals arg as payloads were before seals named their
// workflow (histories recorded then still hold such payloads).
func (e *env) sealedLegacy(arg any) *commonpb.Payloads {
	e.t.Helper()
	p, err := codec.DataConverter(e.kr).ToPayloads(arg)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// historyInput returns the input of the first signal named name, or of the
// first accepted update named name, in wid's history: what a stranger
// copies.
func (e *env) historyInput(wid, name string) *commonpb.Payloads {
	e.t.Helper()
	for _, ev := range historyOf(e.t, e.tc, wid).GetEvents() {
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == name {
			return a.GetInput()
		}
		if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil && a.GetAcceptedRequest().GetInput().GetName() == name {
			return a.GetAcceptedRequest().GetInput().GetArgs()
		}
	}
	e.t.Fatalf("no %s in the history of %s", name, wid)
	return nil
}

// supportRow records a support action on ref as the API does before it
// calls the workflow, and returns its ID.
func (e *env) supportRow(ref, action string, params map[string]any) int64 {
	e.t.Helper()
	raw, _ := json.Marshal(params)
	var id int64
	if err := e.db.Get(&id, `INSERT INTO support_actions (agent, action, target_ref, reason, params)
		VALUES ('e2e-agent', $1, $2, 'action du test', $3) RETURNING id`, action, ref, string(raw)); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// caseState is everything a refused call must leave as it was: the row,
// its timeline, the customer's balance and the workflow's own state.
type caseState struct {
	Status           string
	Paid, Refunded   int64
	PeriodEnd        string
	Timeline, Ledger int
	Balance          int64
	Query            string
}

func (e *env) caseState(wid string, account int64) caseState {
	e.t.Helper()
	ctx := context.Background()
	var st caseState
	ref := wid[strings.Index(wid, "-")+1:]
	if strings.HasPrefix(wid, "topup-") {
		tu, err := e.db.GetTopUp(ctx, ref)
		if err != nil {
			e.t.Fatal(err)
		}
		st.Status, st.Paid = tu.Status, tu.ReceivedCents
	} else {
		o, err := e.db.GetOrder(ctx, ref)
		if err != nil {
			e.t.Fatal(err)
		}
		st.Status, st.Paid, st.Refunded = o.Status, o.PaidCents, o.RefundedCents
		if o.PeriodEnd != nil {
			st.PeriodEnd = o.PeriodEnd.UTC().String()
		}
	}
	if err := e.db.Get(&st.Timeline, `SELECT count(*) FROM timeline_events WHERE ref = $1`, ref); err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.Get(&st.Ledger, `SELECT count(*) FROM ledger_transactions`); err != nil {
		e.t.Fatal(err)
	}
	st.Balance = e.balance(account)
	v, err := e.tc.QueryWorkflow(ctx, wid, "", workflows.QueryStatus)
	if err != nil {
		e.t.Fatal(err)
	}
	var q any
	if err := v.Get(&q); err != nil {
		e.t.Fatal(err)
	}
	raw, _ := json.Marshal(q)
	st.Query = string(raw)
	return st
}

// call is one signal or update a stranger sends.
type call struct {
	signal bool
	name   string
	in     *commonpb.Payloads
	what   string
}

// TestSealedPayloadsReplayedOntoAnotherWorkflowChangeNothing: a client
// without the keyring copies sealed payloads meant for one workflow (as
// its history holds them) and sends them, unchanged, to another: for every
// signal and update name the rental, top-up and settlement workflows
// accept, nothing changes on the other (status, paid and refunded amounts,
// period, timeline, ledger, balance, the workflow's state), whether the
// payload was sealed bound to its workflow (the codec's second lock) or
// as before the binding (the address inside the seal). The same payload on
// its own workflow still works, and a payment sealed for the right
// workflow that names another order's payment request is refused.
func TestSealedPayloadsReplayedOntoAnotherWorkflowChangeNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mallory := e.stranger()
	accA, accB := e.account("victim-a@example.com"), e.account("mallory-b@example.com")
	cfg := workflows.RentalConfig{UnpaidTimeout: time.Hour, ProvisioningAttempts: 1}

	// A: an active rental with money refundable; B1 unpaid, B2 active;
	// top-ups A and B unpaid; B's settlement workflow running.
	a := e.startOrder(accA, cfg)
	widA := workflows.RentalWorkflowID(a.Ref)
	e.paid(widA, btc("pay-a", a.TotalCents, false))
	e.waitOrder(a.Ref, domain.StatusActive)
	b1 := e.startOrder(accB, cfg)
	widB1 := workflows.RentalWorkflowID(b1.Ref)
	b2 := e.startOrder(accB, cfg)
	widB2 := workflows.RentalWorkflowID(b2.Ref)
	e.paid(widB2, btc("pay-b2", b2.TotalCents, false))
	e.waitOrder(b2.Ref, domain.StatusActive)
	ta, tb := e.startTopUp(accA, 100_00, time.Hour), e.startTopUp(accB, 100_00, time.Hour)
	widTA, widTB := workflows.TopUpWorkflowID(ta.Ref), workflows.TopUpWorkflowID(tb.Ref)
	widSA, widSB := workflows.SettlementWorkflowID(a.Ref), workflows.SettlementWorkflowID(b1.Ref)
	if _, err := e.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: widSB, TaskQueue: workflows.TaskQueue},
		workflows.SettlementWorkflowType, workflows.SettlementInput{TargetKind: domain.TargetOrder, TargetRef: b1.Ref}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("workflows of A and B", func() bool {
		for _, wid := range []string{widTA, widTB, widSB} {
			if _, err := e.tc.DescribeWorkflow(ctx, wid, ""); err != nil {
				return false
			}
		}
		return true
	})

	// What A's history holds: a watcher's payments (read back from the
	// history itself), the customer's and support's updates (sealed for A).
	payA := e.addressed(widA, btc("pay-a2", 500, false))
	dustA := workflows.DustSummary{Addressed: domain.Addressed{Target: widA}, Network: "bitcoin", Asset: "BTC",
		IntentID: payA.IntentID, Address: payA.Address, Version: 1, Outputs: 3, AmountBase: "900", AmountCents: 1}
	payTA := e.addressed(widTA, btc("pay-ta", 10_00, false))
	dustTA := dustA
	dustTA.Target, dustTA.IntentID, dustTA.Address = widTA, payTA.IntentID, payTA.Address
	to := func(wid string) domain.Addressed { return domain.Addressed{Target: wid} }
	act := func(ref, action string, params map[string]any) int64 { return e.supportRow(ref, action, params) }
	calls := func(seal func(wid string, arg any) *commonpb.Payloads) map[string][]call {
		sig := func(wid, name string, arg any) call {
			return call{signal: true, name: name, in: seal(wid, arg), what: "signal " + name}
		}
		upd := func(wid, name string, arg any) call {
			return call{name: name, in: seal(wid, arg), what: "update " + name}
		}
		return map[string][]call{
			// unpaid rental B1: payments, balance payment, attribution,
			// cancellation, payment request
			widB1: {
				sig(widA, workflows.SignalPaymentSeen, payA), sig(widA, workflows.SignalPaymentConfirmed, payA),
				sig(widA, workflows.SignalPaymentReverted, payA), sig(widA, workflows.SignalPaymentDust, dustA),
				upd(widA, workflows.UpdatePayFromBalance, workflows.PayFromBalance{Addressed: to(widA)}),
				upd(widA, workflows.UpdateAttributePayment, workflows.Attribution{Addressed: to(widA),
					ActionID: act(a.Ref, domain.ActionAttributePayment, map[string]any{"amount_cents": 0}), Agent: "e2e-agent", Reason: "vu"}),
				upd(widA, workflows.UpdateCancel, workflows.CancelRequest{Addressed: to(widA), By: "customer"}),
				upd(widA, workflows.UpdateCancel, workflows.CancelRequest{Addressed: to(widA), By: "support",
					ActionID: act(a.Ref, domain.ActionCancel, map[string]any{}), Agent: "e2e-agent", Reason: "demande"}),
				upd(widA, workflows.UpdateCreatePaymentIntent, workflows.IntentRequest{Addressed: to(widA), Asset: "BTC", Network: "bitcoin"}),
			},
			// active rental B2: extension, early end, retry, refund
			widB2: {
				upd(widA, workflows.UpdateExtend, workflows.Extension{Addressed: to(widA),
					ActionID: act(a.Ref, domain.ActionExtend, map[string]any{"days": 2}), Agent: "e2e-agent", Days: 2, Reason: "panne"}),
				upd(widA, workflows.UpdateEndEarly, workflows.SupportAction{Addressed: to(widA),
					ActionID: act(a.Ref, domain.ActionEndEarly, map[string]any{}), Agent: "e2e-agent", Reason: "fin"}),
				upd(widA, workflows.UpdateRetryProvisioning, workflows.SupportAction{Addressed: to(widA),
					ActionID: act(a.Ref, domain.ActionRetryProvisioning, map[string]any{}), Agent: "e2e-agent", Reason: "relance"}),
				upd(widA, workflows.UpdateRefund, workflows.Refund{Addressed: to(widA),
					ActionID: act(a.Ref, domain.ActionRefund, map[string]any{"amount_cents": 1000}), Agent: "e2e-agent",
					AmountCents: 1000, Reason: "geste"}),
			},
			widTB: {
				sig(widTA, workflows.SignalPaymentSeen, payTA), sig(widTA, workflows.SignalPaymentConfirmed, payTA),
				sig(widTA, workflows.SignalPaymentReverted, payTA), sig(widTA, workflows.SignalPaymentDust, dustTA),
				upd(widTA, workflows.UpdateAttributePayment, workflows.Attribution{Addressed: to(widTA),
					ActionID: act(ta.Ref, domain.ActionAttributePayment, map[string]any{"amount_cents": 0}), Agent: "e2e-agent", Reason: "vu"}),
				upd(widTA, workflows.UpdateCancel, workflows.CancelRequest{Addressed: to(widTA), By: "customer"}),
				upd(widTA, workflows.UpdateCreatePaymentIntent, workflows.IntentRequest{Addressed: to(widTA), Asset: "BTC", Network: "bitcoin"}),
			},
			widSB: {
				upd(widSA, workflows.UpdateRefundException, domain.ExceptionRefund{Addressed: to(widSA), ExceptionID: 1,
					ActionID: act(a.Ref, domain.ActionRefundException, map[string]any{"exception_id": 1}), Agent: "e2e-agent", Reason: "rendu"}),
				upd(widSA, workflows.UpdateResolveException, domain.ExceptionResolve{Addressed: to(widSA), ExceptionID: 1,
					ActionID: act(a.Ref, domain.ActionResolveException, map[string]any{"exception_id": 1}), Agent: "e2e-agent", Reason: "vu"}),
			},
		}
	}
	accounts := map[string]int64{widB1: accB, widB2: accB, widTB: accB, widSB: accB}
	stateOf := func(wid string) caseState {
		if wid == widSB {
			return e.caseState(widB1, accB) // a settlement moves its order's money
		}
		return e.caseState(wid, accounts[wid])
	}
	replayOnto := func(kind string, set map[string][]call) {
		for wid, cs := range set {
			if wid != widSB {
				e.settled(wid)
			}
			before := stateOf(wid)
			for _, c := range cs {
				if c.signal {
					mallory.signal(wid, c.name, c.in)
				} else if mallory.update(wid, c.name, c.in) {
					t.Errorf("%s: %s copied from another workflow was carried out on %s", kind, c.what, wid)
				}
			}
			if wid != widSB {
				e.settled(wid)
			}
			if after := stateOf(wid); after != before {
				t.Errorf("%s payloads changed %s:\nbefore %+v\nafter  %+v", kind, wid, before, after)
			}
		}
	}
	replayOnto("bound", calls(e.sealedFor))
	// Sealed as before the binding: only the address inside stops them.
	replayOnto("legacy", calls(func(_ string, arg any) *commonpb.Payloads { return e.sealedLegacy(arg) }))

	// A real copy out of A's history: the watcher's confirmation that
	// activated A, sent to unpaid B1.
	before := e.caseState(widB1, accB)
	mallory.signal(widB1, workflows.SignalPaymentConfirmed, e.historyInput(widA, workflows.SignalPaymentConfirmed))
	e.settled(widB1)
	if after := e.caseState(widB1, accB); after != before {
		t.Fatalf("A's confirmation copied from its history changed B1:\nbefore %+v\nafter  %+v", before, after)
	}

	// Sealed for B1 by a keyring holder but naming A's payment request:
	// refused all the same.
	wrong := payA
	wrong.Target, wrong.TxID = widB1, "names-a-request"
	if err := e.tc.SignalWorkflow(ctx, widB1, "", workflows.SignalPaymentConfirmed, wrong); err != nil {
		t.Fatal(err)
	}
	e.settled(widB1)
	if after := e.caseState(widB1, accB); after != before {
		t.Fatalf("a payment naming A's request changed B1:\nbefore %+v\nafter  %+v", before, after)
	}

	// Control: the same kind of payload on its own workflow works. A's
	// extension, sealed for A and sent by the stranger to A, moves A's end;
	// B1's own payment pays B1.
	endBefore := e.order(a.Ref).PeriodEnd
	ext := workflows.Extension{Addressed: to(widA), ActionID: act(a.Ref, domain.ActionExtend, map[string]any{"days": 1}),
		Agent: "e2e-agent", Days: 1, Reason: "contrôle"}
	if !mallory.update(widA, workflows.UpdateExtend, e.sealedFor(widA, ext)) {
		t.Fatal("A's own extension, sent to A, was refused")
	}
	if end := e.order(a.Ref).PeriodEnd; end == nil || !end.Equal(endBefore.Add(24*time.Hour)) {
		t.Fatalf("A's end %v, want one day after %v", end, endBefore)
	}
	e.paid(widB1, btc("pay-b1", b1.TotalCents, false))
	e.waitOrder(b1.Ref, domain.StatusActive)
}

// TestCallsWithoutPayloadRefused: for every update and signal name, and for
// a workflow start, a call with no payload at all (which the SDK would
// decode as zero values without the codec) is refused and changes nothing.
func TestCallsWithoutPayloadRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mallory := e.stranger()
	acc := e.account("nopayload@example.com")
	cfg := workflows.RentalConfig{UnpaidTimeout: time.Hour, ProvisioningAttempts: 1}
	unpaid := e.startOrder(acc, cfg)
	active := e.startOrder(acc, cfg)
	e.paid(workflows.RentalWorkflowID(active.Ref), btc("nopayload-pay", active.TotalCents, false))
	e.waitOrder(active.Ref, domain.StatusActive)
	tu := e.startTopUp(acc, 100_00, time.Hour)
	widS := workflows.SettlementWorkflowID(unpaid.Ref)
	if _, err := e.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: widS, TaskQueue: workflows.TaskQueue},
		workflows.SettlementWorkflowType, workflows.SettlementInput{TargetKind: domain.TargetOrder, TargetRef: unpaid.Ref}); err != nil {
		t.Fatal(err)
	}
	rentalUpdates := []string{workflows.UpdatePayFromBalance, workflows.UpdateAttributePayment, workflows.UpdateCancel,
		workflows.UpdateExtend, workflows.UpdateEndEarly, workflows.UpdateRetryProvisioning, workflows.UpdateRefund,
		workflows.UpdateCreatePaymentIntent}
	signals := []string{workflows.SignalPaymentSeen, workflows.SignalPaymentConfirmed, workflows.SignalPaymentReverted,
		workflows.SignalPaymentDust}
	targets := []struct {
		wid     string
		updates []string
		signals []string
	}{
		{workflows.RentalWorkflowID(unpaid.Ref), rentalUpdates, signals},
		{workflows.RentalWorkflowID(active.Ref), rentalUpdates, signals},
		{workflows.TopUpWorkflowID(tu.Ref), []string{workflows.UpdateAttributePayment, workflows.UpdateCancel,
			workflows.UpdateCreatePaymentIntent}, signals},
		{widS, []string{workflows.UpdateRefundException, workflows.UpdateResolveException}, nil},
	}
	for _, tg := range targets {
		state := func() caseState {
			if tg.wid == widS {
				return e.caseState(workflows.RentalWorkflowID(unpaid.Ref), acc)
			}
			e.settled(tg.wid)
			return e.caseState(tg.wid, acc)
		}
		before := state()
		for _, name := range tg.updates {
			if mallory.update(tg.wid, name, nil) {
				t.Errorf("update %s without payload carried out on %s", name, tg.wid)
			}
		}
		for _, name := range tg.signals {
			mallory.signal(tg.wid, name, nil)
		}
		if after := state(); after != before {
			t.Errorf("calls without payload changed %s:\nbefore %+v\nafter  %+v", tg.wid, before, after)
		}
	}

	// A start without input, and a start with another workflow's sealed
	// input: the workflow fails at once and writes nothing.
	before := e.caseState(workflows.RentalWorkflowID(unpaid.Ref), acc)
	for i, in := range []*commonpb.Payloads{nil, e.sealedFor(workflows.RentalWorkflowID(unpaid.Ref),
		workflows.NewRentalInput(unpaid, cfg)), e.sealedLegacy(workflows.NewRentalInput(unpaid, cfg))} {
		ref := fmt.Sprintf("KD-NOINPUT0%d", i)
		wid := workflows.RentalWorkflowID(ref)
		if _, err := mallory.wf.StartWorkflowExecution(ctx, &workflowservice.StartWorkflowExecutionRequest{
			Namespace: "default", WorkflowId: wid, WorkflowType: &commonpb.WorkflowType{Name: workflows.RentalWorkflowType},
			TaskQueue: &taskqueuepb.TaskQueue{Name: workflows.TaskQueue}, Input: in, Identity: "mallory", RequestId: uuid.NewString(),
		}); err != nil {
			t.Fatal(err)
		}
		e.waitFor(wid+" closed", func() bool { return e.closed(wid) })
		d, err := e.tc.DescribeWorkflow(ctx, wid, "")
		if err != nil {
			t.Fatal(err)
		}
		if st := d.RawResponse.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
			t.Errorf("start %d of %s: %v, want failed", i, wid, st)
		}
		var n int
		if err := e.db.Get(&n, `SELECT count(*) FROM timeline_events WHERE ref = $1`, ref); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("start %d of %s wrote %d timeline events", i, wid, n)
		}
	}
	if after := e.caseState(workflows.RentalWorkflowID(unpaid.Ref), acc); after != before {
		t.Fatalf("starts with the order's copied input changed it:\nbefore %+v\nafter  %+v", before, after)
	}
}
