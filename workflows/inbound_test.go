package workflows_test

import (
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/metrics"
	"github.com/kernodeck/kernodeck/workflows"
)

// The worker's interceptor refuses an update addressed to another workflow
// or carrying no argument, before its validator, and counts each refusal in
// kernodeck_refused_workflow_calls_total (the family operators alert on);
// the same update addressed to the workflow is carried out.
func TestInboundInterceptorRefusesAndCounts(t *testing.T) {
	m, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(m.Temporal())
	env := suite.NewTestWorkflowEnvironment()
	const ref = "KD-INBOUND001"
	wid := workflows.RentalWorkflowID(ref)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: wid})
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&workflows.InboundInterceptor{}}})
	var a *activities.Activities
	env.OnActivity(a.RecordOrderEvent, mock.Anything, mock.Anything).Return(nil).Maybe()
	env.OnActivity(a.RecordOrderEvents, mock.Anything, mock.Anything).Return(nil).Maybe()

	outcome := map[string]error{}
	send := func(at time.Duration, key string, args ...any) {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(workflows.UpdateCancel, key, &testsuite.TestUpdateCallback{
				OnAccept:   func() {},
				OnReject:   func(err error) { outcome[key] = err },
				OnComplete: func(_ any, err error) { outcome[key] = err },
			}, args...)
		}, at)
	}
	send(time.Minute, "elsewhere", workflows.CancelRequest{Addressed: domain.Addressed{Target: workflows.RentalWorkflowID("KD-OTHER00001")}, By: "customer"})
	send(2*time.Minute, "unaddressed", workflows.CancelRequest{By: "customer"})
	send(3*time.Minute, "own", workflows.CancelRequest{Addressed: domain.Addressed{Target: wid}, By: "customer"})
	env.ExecuteWorkflow(workflows.RentalWorkflow, workflows.RentalInput{OrderRef: ref, AccountID: 1, GPUModel: "rtx-a5000",
		Lots: 1, GPUsPerLot: 1, TotalGPUs: 1, DurationDays: 3, Preset: "python", TotalCents: 2357})

	for _, key := range []string{"elsewhere", "unaddressed"} {
		var ae *temporal.ApplicationError
		if !errors.As(outcome[key], &ae) || ae.Type() != domain.ECodeInvalid {
			t.Errorf("%s: %v, want refused as invalid", key, outcome[key])
		}
	}
	if err, ok := outcome["own"]; !ok || err != nil {
		t.Fatalf("own cancel: %v (answered %v), want carried out", err, ok)
	}
	var st workflows.RentalStatus
	if err := env.GetWorkflowResult(&st); err != nil || st.Status != domain.StatusCancelled {
		t.Fatalf("status %q (%v), want cancelled by its own update only", st.Status, err)
	}

	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var refused float64
	for _, f := range fams {
		if f.GetName() != "kernodeck_refused_workflow_calls_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			if labels(metric)["call"] == "update" && labels(metric)["name"] == workflows.UpdateCancel && labels(metric)["reason"] == "address" {
				refused += metric.GetCounter().GetValue()
			}
		}
	}
	if refused != 2 {
		t.Fatalf("kernodeck_refused_workflow_calls_total{call=update,name=cancel,reason=address} = %v, want 2", refused)
	}
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
