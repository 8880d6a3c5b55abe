package chainwatch

import (
	"context"
	"errors"
	"fmt"
)

// Reconcile delivers every stored payment state of network that the workflow
// has not acknowledged. A signal delivered twice is harmless: the workflow
// counts a payment once per key. It is exported for followers that are not
// block-based (Solana) but share the store and the delivery rules.
func Reconcile(ctx context.Context, network string, store Store, signaler Signaler) error {
	for {
		pending, err := store.Unsignaled(ctx, network, 200)
		if err != nil {
			return err
		}
		for _, p := range pending {
			err := signaler.Signal(ctx, p)
			switch {
			case errors.Is(err, ErrWorkflowClosed):
				if err := store.MarkUndeliverable(ctx, p); err != nil {
					return err
				}
			case err != nil:
				return fmt.Errorf("signal %s:%s:%d %s: %w", p.Network, p.TxID, p.Index, p.State, err)
			default:
				if err := store.MarkSignaled(ctx, p); err != nil {
					return err
				}
			}
		}
		if len(pending) < 200 {
			return nil
		}
	}
}
