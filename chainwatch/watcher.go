package chainwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"sync/atomic"
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
	// Dust is, per asset, the amount in base units below which an output
	// is dust: stored, and summarised per request instead of signalled.
	Dust   map[string]*big.Int
	Logger *slog.Logger
	// Now is the clock (time.Now by default).
	Now func() time.Time

	// Notifier, if set, pushes the node's new blocks and mempool
	// transactions; polling stays the fallback.
	Notifier Notifier
	// Mempool, if set, is the node's mempool: replaced transactions are
	// found, and a watcher taking the lease over reads it.
	Mempool Mempool
	// PayoutTxs and Broadcaster, if both set, broadcast the signed payout
	// transactions (broadcast.go).
	PayoutTxs   PayoutTxs
	Broadcaster Broadcaster

	index  *Index
	wake   chan struct{}
	leader atomic.Bool
	// stepMu serialises steps and mempool notifications.
	stepMu sync.Mutex
	// scanMempool: the watcher took the lease over and has not read the
	// node's mempool since (under stepMu).
	scanMempool bool
	// spent maps the outpoints spent by watched mempool payments to their
	// transaction (replacement detection).
	spent map[string]string
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
		w.index = NewIndex()
		w.wake = make(chan struct{}, 1)
		w.spent = map[string]string{}
	}
}

// Index exposes the watcher's address index (benchmarks, node filters).
func (w *Watcher) Index() *Index {
	w.defaults()
	return w.index
}

// Run watches until ctx ends. Each step takes (or renews) the network's
// lease first; while another watcher holds it, Run waits.
func (w *Watcher) Run(ctx context.Context) error {
	w.defaults()
	network := w.Chain.Network()
	log := w.Logger.With("network", network, "holder", w.Holder)
	defer func() {
		// After the push in progress, if any: its lease keeper must not
		// renew what is given up here.
		w.stepMu.Lock()
		defer w.stepMu.Unlock()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = w.Store.ReleaseLease(rctx, network, w.Holder)
	}()
	if w.Notifier != nil {
		go w.runNotifier(ctx)
	}
	leader := false
	for {
		caughtUp, err := w.Step(ctx)
		lost := errors.Is(err, ErrLeaseLost)
		switch {
		case ctx.Err() != nil:
		case lost && leader:
			log.Warn("lease lost: another watcher is active")
		case !lost && !leader:
			log.Info("watcher is active")
		}
		leader = !lost
		if err != nil && !lost && ctx.Err() == nil {
			log.Warn("step failed", "err", err)
		}
		if !caughtUp && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.wake:
		case <-time.After(w.Poll):
		}
	}
}

// Step runs one pass: take or renew the lease (ErrLeaseLost if another
// watcher has it; an empty Holder skips the lease), refresh the addresses,
// read the node's mempool if the lease was just taken over, follow the
// chain (handling a reorganisation), confirm what has enough confirmations,
// and deliver the signals not yet acknowledged. The lease is kept (renewed)
// for as long as the step runs; lost, the step stops where it is and
// returns ErrLeaseLost. It reports whether the watcher caught up.
func (w *Watcher) Step(ctx context.Context) (bool, error) {
	w.defaults()
	w.stepMu.Lock()
	defer w.stepMu.Unlock()
	if err := w.lease(ctx); err != nil {
		return false, err
	}
	ctx, done := w.keepLease(ctx)
	defer done()
	caughtUp, err := w.step(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, ErrLeaseLost) {
		err = cause
	}
	if errors.Is(err, ErrLeaseLost) {
		w.leader.Store(false)
		return false, err
	}
	return caughtUp, err
}

func (w *Watcher) step(ctx context.Context) (bool, error) {
	if err := w.refreshIndex(ctx); err != nil {
		return false, err
	}
	if w.scanMempool {
		// Payments broadcast while no watcher was active (the previous
		// holder's lease lapsing) are detected now, not in their block.
		if err := w.readMempool(ctx); err != nil {
			if errors.Is(err, ErrLeaseLost) {
				return false, err
			}
			w.Logger.Warn("mempool read on takeover", "network", w.Chain.Network(), "err", err)
		} else {
			w.scanMempool = false
		}
	}
	caughtUp, err := w.follow(ctx)
	if errors.Is(err, ErrLeaseLost) {
		return false, err
	}
	if err != nil {
		// Deliver what was stored anyway.
		_ = w.Reconcile(ctx)
		return false, err
	}
	if caughtUp {
		// Only once caught up: a mempool payment mined in a block not read
		// yet would look gone.
		if err := w.checkMempool(ctx); err != nil {
			if errors.Is(err, ErrLeaseLost) {
				return false, err
			}
			w.Logger.Warn("mempool check", "network", w.Chain.Network(), "err", err)
		}
		if err := w.broadcastPayouts(ctx); err != nil {
			w.Logger.Warn("payout broadcast", "network", w.Chain.Network(), "err", err)
		}
	}
	return caughtUp, w.Reconcile(ctx)
}

// lease takes or renews the network's lease for Holder, and keeps the
// leader flag: a watcher taking the lease over reads the mempool at its
// next step.
func (w *Watcher) lease(ctx context.Context) error {
	if w.Holder != "" {
		ok, err := w.Store.AcquireLease(ctx, w.Chain.Network(), w.Holder, w.LeaseTTL)
		if err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		if !ok {
			w.leader.Store(false)
			return fmt.Errorf("%s held by another watcher: %w", w.Chain.Network(), ErrLeaseLost)
		}
	}
	if !w.leader.Swap(true) {
		w.scanMempool = true
	}
	return nil
}

// keepLease renews the lease every third of its TTL while the work done
// under the returned context runs (a busy block's thousands of signals
// outlast the TTL), and cancels that work, with ErrLeaseLost as the cause,
// once the lease is lost: taken by another watcher, or not renewed while
// the store was unreachable until less than a third of it was left. The
// store refuses chain writes without the lease; the cancellation stops the
// signals too. done stops the keeper.
func (w *Watcher) keepLease(ctx context.Context) (_ context.Context, done func()) {
	if w.Holder == "" {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		every := w.LeaseTTL / 3
		tick := time.NewTicker(every)
		defer tick.Stop()
		renewed := w.now()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// A stuck store is given up on by the next tick.
			actx, acancel := context.WithTimeout(ctx, every)
			ok, err := w.Store.AcquireLease(actx, w.Chain.Network(), w.Holder, w.LeaseTTL)
			acancel()
			switch {
			case err == nil && ok:
				renewed = w.now()
				continue
			case err == nil:
				err = fmt.Errorf("%s taken by another watcher: %w", w.Chain.Network(), ErrLeaseLost)
			case ctx.Err() != nil:
				return
			case w.now().Sub(renewed)+every < w.LeaseTTL:
				w.Logger.Warn("lease renewal failed", "network", w.Chain.Network(), "err", err)
				continue
			default:
				err = fmt.Errorf("%s not renewed since %s (%v): %w", w.Chain.Network(), renewed.Format(time.RFC3339), err, ErrLeaseLost)
			}
			w.leader.Store(false)
			w.Logger.Warn("lease lost while working: stopping", "network", w.Chain.Network(), "holder", w.Holder, "err", err)
			cancel(err)
			return
		}
	}()
	return ctx, func() {
		close(stop)
		<-stopped
		cancel(nil)
	}
}

func (w *Watcher) refreshIndex(ctx context.Context) error {
	addrs, err := w.Store.KnownAddresses(ctx, w.Chain.Network(), w.index.MaxSeq())
	if err != nil {
		return fmt.Errorf("load addresses: %w", err)
	}
	w.index.Add(addrs...)
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
		n, err := w.Store.Rewind(ctx, network, w.Holder, fork)
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
		if err := w.Store.RecordBlock(ctx, network, w.Holder, b.Height, b.Hash, w.match(b)); err != nil {
			return false, err
		}
		lastHash = b.Hash
	}
	if _, err := w.Store.Confirm(ctx, network, w.Holder, tip-w.Policy.Confirmations+1); err != nil {
		return false, err
	}
	return end == tip, nil
}

// match keeps the block's outputs that pay an address the shop handed out.
// O(1) each, no allocation for the others.
func (w *Watcher) match(b Block) []Seen {
	var out []Seen
	for i := range b.Outputs {
		o := &b.Outputs[i]
		if o.Amount == nil || o.Amount.Sign() <= 0 || !w.index.Has(o.Address) {
			continue
		}
		at := b.Time
		if at.IsZero() {
			at = w.now()
		}
		out = append(out, Seen{
			TxID: o.TxID, Index: o.Index, Asset: o.Asset, Address: o.Address, Amount: o.Amount,
			Dust: w.isDust(o.Asset, o.Amount), BlockHeight: b.Height, BlockHash: b.Hash, BlockTime: at,
		})
	}
	return out
}

func (w *Watcher) isDust(asset string, amount *big.Int) bool {
	t := w.Dust[asset]
	return t != nil && amount.Cmp(t) < 0
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
