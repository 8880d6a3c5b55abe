package wfclient

import (
	"context"

	"go.temporal.io/sdk/client"
)

// CheckHealth asks the Temporal frontend whether it serves (api.WorkflowsHealth:
// the API refuses a write that needs a workflow while it does not).
func (c *Client) CheckHealth(ctx context.Context) error {
	_, err := c.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}
