package chainwatch

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Watcher follows one block-based network.
type Watcher struct {
	Chain    Chain
	Store    Store
	Signaler Signaler
	Policy   Policy
	// Holder names this process in the lease (host:pid or similar).
	Holder   string
	LeaseTTL time.Duration
	// Poll is the pause between steps when the watcher is caught up.
	Poll time.Duration
	// Backfill is how many blocks below the tip a watcher with no cursor
	// starts from, so requests created before its first start are covered.
	Backfill int64
	// MaxBlocksPerStep bounds one step's catch-up.
	MaxBlocksPerStep int64
	Logger           *slog.Logger
	// Now is the clock (time.Now by default).
	Now func() time.Time

	index *Index
}

func (w *Watcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Watcher) defaults() {
	if w.LeaseTTL <= 0 {
		w.LeaseTTL = 30 * time.Second
	}
	if w.Poll <= 0 {
		w.Poll = 2 * time.Second
	}
	if w.MaxBlocksPerStep <= 0 {
		w.MaxBlocksPerStep = 500
	}
	if w.Policy.Confirmations <= 0 {
		w.Policy.Confirmations = 1
	}
	if w.Logger == nil {
		w.Logger = slog.Default()
	}
	if w.index == nil {
		w.index = NewIndex(w.Chain.Network())
	}
}

// Index exposes the watcher's intent index (benchmarks, tests).
func (w *Watcher) Index() *Index {
	w.defaults()
	return w.index
}

// Run watches until ctx ends. It waits for the network's lease, and gives
// up stepping (back to waiting) if the lease is lost.
func (w *Watcher) Run(ctx context.Context) error {
	w.defaults()
	network := w.Chain.Network()
	log := w.Logger.With("network", network, "holder", w.Holder)
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = w.Store.ReleaseLease(rctx, network, w.Holder)
	}()
	leader := false
	for {
		ok, err := w.Store.AcquireLease(ctx, network, w.Holder, w.LeaseTTL)
		switch {
		case err != nil:
			log.Warn("lease", "err", err)
		case ok && !leader:
			log.Info("watcher is active")
		case !ok && leader:
			log.Warn("lease lost: another watcher is active")
		}
		leader = ok && err == nil
		caughtUp := true
		if leader {
			caughtUp, err = w.Step(ctx)
			if err != nil && ctx.Err() == nil {
				log.Warn("step failed", "err", err)
			}
		}
		if !caughtUp && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.Poll):
		}
	}
}

// Step runs one pass: refresh the intents, follow the chain (handling a
// reorganisation), confirm what has enough confirmations, and deliver the
// signals not yet acknowledged. It reports whether the watcher caught up.
func (w *Watcher) Step(ctx context.Context) (bool, error) {
	w.defaults()
	if err := w.refreshIndex(ctx); err != nil {
		return false, err
	}
	caughtUp, err := w.follow(ctx)
	if err != nil {
		// Deliver what was stored anyway.
		_ = w.Reconcile(ctx)
		return false, err
	}
	return caughtUp, w.Reconcile(ctx)
}

func (w *Watcher) refreshIndex(ctx context.Context) error {
	network := w.Chain.Network()
	now := w.now()
	intents, err := w.Store.WatchedIntents(ctx, network, w.index.MaxSeq(), now)
	if err != nil {
		return fmt.Errorf("load intents: %w", err)
	}
	w.index.Add(intents...)
	w.index.Evict(now)
	return nil
}

func (w *Watcher) follow(ctx context.Context) (bool, error) {
	network := w.Chain.Network()
	tip, err := w.Chain.Tip(ctx)
	if err != nil {
		return false, fmt.Errorf("tip: %w", err)
	}
	last, lastHash, ok, err := w.Store.LastBlock(ctx, network)
	if err != nil {
		return false, err
	}
	if !ok {
		last = max(tip-w.Backfill, 0) - 1
		lastHash = ""
	} else if last > tip || !w.sameBlock(ctx, last, lastHash) {
		// Reorganisation (or a node that fell behind): find the newest
		// recorded block still on the node's chain, forget the rest.
		fork, err := w.findFork(ctx, min(last, tip))
		if err != nil {
			return false, err
		}
		n, err := w.Store.Rewind(ctx, network, fork)
		if err != nil {
			return false, err
		}
		w.Logger.Warn("reorganisation", "network", network, "from", last, "back_to", fork, "payments_reverted", n)
		last = fork
		if lastHash, _, err = w.Store.BlockHash(ctx, network, fork); err != nil {
			return false, err
		}
	}
	end := min(tip, last+w.MaxBlocksPerStep)
	for h := last + 1; h <= end; h++ {
		b, err := w.Chain.Block(ctx, h)
		if err != nil {
			return false, fmt.Errorf("block %d: %w", h, err)
		}
		if lastHash != "" && b.Parent != lastHash {
			// The chain moved under us; the next step rewinds.
			return false, nil
		}
		if err := w.Store.RecordBlock(ctx, network, b.Height, b.Hash, w.match(b)); err != nil {
			return false, err
		}
		lastHash = b.Hash
	}
	if _, err := w.Store.Confirm(ctx, network, tip-w.Policy.Confirmations+1); err != nil {
		return false, err
	}
	return end == tip, nil
}

// match keeps the block's outputs that pay a watched intent. O(1) each.
func (w *Watcher) match(b Block) []Seen {
	var out []Seen
	for _, o := range b.Outputs {
		in, ok := w.index.Lookup(o.Asset, o.Address)
		if !ok || o.Amount == nil || o.Amount.Sign() <= 0 {
			continue
		}
		at := b.Time
		if at.IsZero() {
			at = w.now()
		}
		out = append(out, Seen{
			TxID: o.TxID, Index: o.Index, Asset: o.Asset, Address: o.Address, Amount: o.Amount,
			Intent: in, Late: at.After(in.Deadline), BlockHeight: b.Height, BlockHash: b.Hash,
		})
	}
	return out
}

func (w *Watcher) sameBlock(ctx context.Context, height int64, hash string) bool {
	h, err := w.Chain.BlockHash(ctx, height)
	return err == nil && h == hash
}

// findFork walks down from height to the newest recorded block that the node
// still has.
func (w *Watcher) findFork(ctx context.Context, height int64) (int64, error) {
	network := w.Chain.Network()
	for h := height; h >= 0; h-- {
		rec, ok, err := w.Store.BlockHash(ctx, network, h)
		if err != nil {
			return 0, err
		}
		if !ok {
			// Below what we keep: restart from here.
			return h, nil
		}
		node, err := w.Chain.BlockHash(ctx, h)
		if err != nil {
			return 0, fmt.Errorf("block hash %d: %w", h, err)
		}
		if node == rec {
			return h, nil
		}
	}
	return -1, nil
}

// Reconcile delivers every stored payment state the workflow has not
// acknowledged. A signal delivered twice is harmless: the workflow counts a
// payment once per key.
func (w *Watcher) Reconcile(ctx context.Context) error {
	return Reconcile(ctx, w.Chain.Network(), w.Store, w.Signaler)
}
