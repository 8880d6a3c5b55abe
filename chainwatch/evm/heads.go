package evm

import (
	"context"
	"fmt"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/kernodeck/kernodeck/chainwatch"
)

// Heads is a chainwatch.Notifier over eth_subscribe("newHeads") on the
// node's websocket endpoint: each new head wakes the watcher, which reads
// the block (its transfers and token logs) at once instead of at its next
// poll.
type Heads struct {
	// URL is the node's websocket endpoint (ws://127.0.0.1:8546).
	URL string
}

var _ chainwatch.Notifier = (*Heads)(nil)

// Run subscribes and wakes the watcher on every new head until ctx ends or
// the subscription fails.
func (h *Heads) Run(ctx context.Context, n chainwatch.Notifications) error {
	c, err := ethclient.DialContext(ctx, h.URL)
	if err != nil {
		return fmt.Errorf("ethereum websocket %s: %w", h.URL, err)
	}
	defer c.Close()
	heads := make(chan *types.Header, 64)
	sub, err := c.SubscribeNewHead(ctx, heads)
	if err != nil {
		return fmt.Errorf("eth_subscribe newHeads: %w", err)
	}
	defer sub.Unsubscribe()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-sub.Err():
			return fmt.Errorf("eth_subscribe newHeads: %w", err)
		case <-heads:
			if n.Block != nil {
				n.Block()
			}
		}
	}
}
