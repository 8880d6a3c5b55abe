package chainwatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// reconcileBatch is how many stored payments one query returns.
const reconcileBatch = 500

// reconcileParallel is how many workflows are signalled at once. A signal is
// a round trip to the Temporal frontend (40-76 ms under a busy block, see
// BENCHMARKS.md): one at a time, a block paying 5,000 orders took minutes
// to deliver.
const reconcileParallel = 16

// Reconcile delivers every stored payment state and dust summary of network
// that the workflows have not acknowledged. A signal delivered twice is
// harmless: the workflow counts a payment once per key. Different workflows
// are signalled concurrently (up to reconcileParallel at once); the
// payments of one workflow go one after the other, in the store's order,
// each after the previous one was acknowledged. A workflow that cannot be
// signalled (Temporal refusing it, a timeout) holds back only its own
// payments, which stay pending for the next pass: the others are
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
		for ref, err := range deliverBatch(ctx, store, signaler, pending) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failed[ref] = true
			skip = append(skip, ref)
			errs = append(errs, err)
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
		if err := ctx.Err(); err != nil {
			return err
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
	// A watcher that lost its lease (the context cancelled) sends nothing
	// more: the new holder delivers.
	if err := ctx.Err(); err != nil {
		return err
	}
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

// deliverBatch delivers a batch of pending payments, each target's in the
// batch's order on a goroutine of its own, at most reconcileParallel at
// once. It returns the first error of each target that failed (its later
// payments in the batch are not sent).
func deliverBatch(ctx context.Context, store Store, signaler Signaler, pending []Pending) map[string]error {
	var order []string
	byTarget := map[string][]Pending{}
	for _, p := range pending {
		if _, ok := byTarget[p.TargetRef]; !ok {
			order = append(order, p.TargetRef)
		}
		byTarget[p.TargetRef] = append(byTarget[p.TargetRef], p)
	}
	var (
		mu     sync.Mutex
		failed = map[string]error{}
		wg     sync.WaitGroup
		slots  = make(chan struct{}, reconcileParallel)
	)
	for _, ref := range order {
		slots <- struct{}{}
		wg.Add(1)
		go func(ps []Pending) {
			defer func() { <-slots; wg.Done() }()
			for _, p := range ps {
				if err := deliver(ctx, store, signaler, p); err != nil {
					mu.Lock()
					failed[p.TargetRef] = err
					mu.Unlock()
					return
				}
			}
		}(byTarget[ref])
	}
	wg.Wait()
	return failed
}
