package chainwatch

import (
	"context"
	"fmt"
)

// Payout transactions the operator signed off the server and uploaded
// (checked by the API against their batch) are broadcast by the watcher
// of their network, the one process that talks to its node: again at
// each step once caught up, until the chain has them, so a node that
// dropped or never got one gets it again.

// PayoutTxs lists the signed payout transactions of a network that the
// chain has not shown yet (implemented by package postgres).
type PayoutTxs interface {
	UnseenPayoutTxs(ctx context.Context, network string) ([]string, error)
}

// Broadcaster sends a raw transaction (hex) to the network's node; one it
// already has is not an error.
type Broadcaster interface {
	Broadcast(ctx context.Context, rawHex string) error
}

// broadcastPayouts sends every signed payout transaction not seen yet.
func (w *Watcher) broadcastPayouts(ctx context.Context) error {
	if w.PayoutTxs == nil || w.Broadcaster == nil {
		return nil
	}
	txs, err := w.PayoutTxs.UnseenPayoutTxs(ctx, w.Chain.Network())
	if err != nil {
		return err
	}
	for _, raw := range txs {
		if err := w.Broadcaster.Broadcast(ctx, raw); err != nil {
			return fmt.Errorf("broadcast payout transaction: %w", err)
		}
	}
	return nil
}
