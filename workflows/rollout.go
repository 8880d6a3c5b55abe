//go:build !kdrollout

package workflows

import "go.temporal.io/sdk/workflow"

// vMaxHistory is the command version new workflows record (historyVersion).
const vMaxHistory = vExtension

// rolloutStep is where a test release (build tag kdrollout,
// rollout_kdrollout.go) adds a harmless step of its own version, so that a
// rolling restart of the workers onto a changed workflow can be run on the
// real rental workflow (kdload burst -rollout). Nothing here.
func rolloutStep(workflow.Context, workflow.Version) {}
