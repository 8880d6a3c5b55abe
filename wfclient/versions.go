package wfclient

import (
	"context"
	"fmt"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/kernodeck/kernodeck/workflows"
)

// VersionCount is how many open runs recorded one history version.
type VersionCount struct {
	Version int
	Open    int64
}

// OpenRunsByVersion counts the open runs of every history version this
// build replays, from the TemporalChangeVersion search attribute the SDK
// sets with each version marker. A version with no open run left is one
// whose code may be retired (docs/operating.md).
func (c *Client) OpenRunsByVersion(ctx context.Context) ([]VersionCount, error) {
	var out []VersionCount
	for v := 1; v <= workflows.NewestVersion; v++ {
		q := fmt.Sprintf("ExecutionStatus = 'Running' AND TemporalChangeVersion = '%s'", workflows.ChangeVersionTag(v))
		resp, err := c.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: q})
		if err != nil {
			return nil, fmt.Errorf("count open runs at version %d: %w", v, err)
		}
		out = append(out, VersionCount{Version: v, Open: resp.GetCount()})
	}
	return out, nil
}
