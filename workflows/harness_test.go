package workflows

import (
	"sync"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
)

// The test environment's helpers the rental and top-up suites share.

// updateOutcome is what an update returned to its caller.
type updateOutcome struct {
	done      bool
	rejectErr error // refused by the validator
	err       error // refused by the handler
}

// updateAt runs update name with args at d of workflow time.
func updateAt(env *testsuite.TestWorkflowEnvironment, d time.Duration, name string, args ...any) *updateOutcome {
	out := &updateOutcome{}
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(name, name+"@"+d.String(), &testsuite.TestUpdateCallback{
			OnAccept:   func() {},
			OnReject:   func(err error) { out.done, out.rejectErr = true, err },
			OnComplete: func(_ any, err error) { out.done, out.err = true, err },
		}, args...)
	}, d)
	return out
}

// queryAt answers the status query at d of workflow time, in the status
// the caller reads once the workflow ran.
func queryAt[S any](r *require.Assertions, env *testsuite.TestWorkflowEnvironment, d time.Duration) *S {
	st := new(S)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		r.NoError(err)
		r.NoError(v.Get(st))
	}, d)
	return st
}

// runWorkflow runs wf with in to its end and returns its result.
func runWorkflow[S any](r *require.Assertions, env *testsuite.TestWorkflowEnvironment, wf, in any) S {
	env.ExecuteWorkflow(wf, in)
	r.True(env.IsWorkflowCompleted())
	r.NoError(env.GetWorkflowError())
	var st S
	r.NoError(env.GetWorkflowResult(&st))
	return st
}

// ofKind is the events of kind among those the mocks recorded under mu.
func ofKind[E any](mu *sync.Mutex, events []E, kind string, kindOf func(E) string) []E {
	mu.Lock()
	defer mu.Unlock()
	var out []E
	for _, ev := range events {
		if kindOf(ev) == kind {
			out = append(out, ev)
		}
	}
	return out
}

// newSuiteEnv is a test environment for the workflow of ref (ID id) whose
// timeline writes (one, many: the Record*Event activities) are kept in
// events under mu, and whose payments the watchers recorded but those of
// unrecorded (recordedAs).
func newSuiteEnv[E any](ts *testsuite.WorkflowTestSuite, id, kind, ref string, one, many any, mu *sync.Mutex, events *[]E,
	unrecorded map[string]bool) *testsuite.TestWorkflowEnvironment {
	env := ts.NewTestWorkflowEnvironment()
	env.SetStartTime(testStart)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	mockOwnRequests(env, kind, ref, unrecorded)
	env.OnActivity(a.CheckSupportAction, mock.Anything, mock.Anything).Return(nil).Maybe()
	keep := func(evs ...E) {
		mu.Lock()
		defer mu.Unlock()
		*events = append(*events, evs...)
	}
	env.OnActivity(one, mock.Anything, mock.Anything).Return(nil).Maybe().
		Run(func(args mock.Arguments) { keep(args.Get(1).(E)) })
	env.OnActivity(many, mock.Anything, mock.Anything).Return(nil).Maybe().
		Run(func(args mock.Arguments) { keep(args.Get(1).([]E)...) })
	return env
}
