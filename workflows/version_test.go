package workflows

import (
	"testing"

	"go.temporal.io/sdk/workflow"
)

// A starter's ceiling holds new workflows back to an older version, never
// below the oldest a workflow may start at, never above this build's.
func TestStartVersion(t *testing.T) {
	for _, c := range []struct {
		ceiling int
		want    workflow.Version
	}{
		{0, vMaxHistory},
		{-3, vMaxHistory},
		{NewestVersion, vMaxHistory},
		{NewestVersion + 5, vMaxHistory},
		{OldestStartVersion, vAddressed},
		{OldestStartVersion - 2, vAddressed},
		{1, vAddressed},
	} {
		if got := startVersion(c.ceiling); got != c.want {
			t.Errorf("startVersion(%d) = %d, want %d", c.ceiling, got, c.want)
		}
	}
}
