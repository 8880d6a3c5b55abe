//go:build kdrollout

package workflows

import "go.temporal.io/sdk/workflow"

// A test release one history version ahead (go build -tags kdrollout), for
// the rolling restart of kdload burst -rollout: workflows it starts record
// vRollout and take one harmless step more (a side effect: a marker in
// their history, nothing else); those started before keep their commands.
const (
	vRollout    workflow.Version = vExtension + 1
	vMaxHistory                  = vRollout
)

func rolloutStep(ctx workflow.Context, v workflow.Version) {
	if v < vRollout {
		return
	}
	_ = workflow.SideEffect(ctx, func(workflow.Context) any { return "kdrollout" })
}
