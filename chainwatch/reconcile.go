package chainwatch

import (
	"context"
	"errors"
	"fmt"
)

// reconcileBatch is how many stored payments one query returns.
const reconcileBatch = 200

// Reconcile delivers every stored payment state and dust summary of network
// that the workflows have not acknowledged. A signal delivered twice is
// harmless: the workflow counts a payment once per key. A workflow that
// cannot be signalled (Temporal refusing it, a timeout) holds back only its
// own payments, which stay pending for the next pass: the others are
// delivered, and the errors are returned together. It is exported for
// followers that are not block-based (Solana) but share the store and the
// delivery rules.
func Reconcile(ctx context.Context, network string, store Store, signaler Signaler) error {
	// Targets that failed in this pass: their later payments wait too, so a
	// workflow never receives its payments out of order.
	failed := map[string]bool{}
	var skip []string
	var errs []error
	for {
		pending, err := store.Unsignaled(ctx, network, skip, reconcileBatch)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		for _, p := range pending {
			if failed[p.TargetRef] {
				continue
			}
			if err := deliver(ctx, store, signaler, p); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				failed[p.TargetRef] = true
				skip = append(skip, p.TargetRef)
				errs = append(errs, err)
			}
		}
		if len(pending) < reconcileBatch {
			break
		}
	}
	dust, err := store.UnsignaledDust(ctx, network)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, d := range dust {
		if failed[d.TargetRef] {
			continue
		}
		err := signaler.SignalDust(ctx, d)
		switch {
		case errors.Is(err, ErrWorkflowClosed):
			// No workflow will queue it: the store does, for support.
			err = store.MarkDustUndeliverable(ctx, d)
		case err == nil:
			err = store.MarkDustSignaled(ctx, d)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, fmt.Errorf("dust summary %s v%d: %w", d.IntentID, d.Version, err))
		}
	}
	return errors.Join(errs...)
}

func deliver(ctx context.Context, store Store, signaler Signaler, p Pending) error {
	err := signaler.Signal(ctx, p)
	switch {
	case errors.Is(err, ErrWorkflowClosed):
		err = store.MarkUndeliverable(ctx, p)
	case err == nil:
		err = store.MarkSignaled(ctx, p)
	}
	if err != nil {
		return fmt.Errorf("signal %s:%s:%d %s: %w", p.Network, p.TxID, p.Index, p.State, err)
	}
	return nil
}
