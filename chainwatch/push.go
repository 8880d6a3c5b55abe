package chainwatch

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Notifier pushes what a node announces as it happens: new blocks, and
// transactions entering its mempool. The watcher still polls (Poll) as the
// fallback: a notification only makes it act sooner.
type Notifier interface {
	// Run delivers notifications to n until ctx ends or the connection
	// fails (the watcher runs it again after a pause).
	Run(ctx context.Context, n Notifications) error
}

// Notifications are the callbacks a Notifier calls.
type Notifications struct {
	// Block: the node has a new best block.
	Block func()
	// Tx: a transaction entered the node's mempool.
	Tx func(MempoolTx)
}

// MempoolTx is a transaction seen in a node's mempool.
type MempoolTx struct {
	TxID    string
	Outputs []Output
	// Spends are the outpoints ("txid:index") it spends: a transaction
	// spending one that a watched mempool payment spends replaces it (RBF)
	// or double-spends it.
	Spends []string
}

// TxState is where a node has a transaction.
type TxState int

// Transaction states.
const (
	TxGone    TxState = iota // neither in the mempool nor in a block
	TxPending                // in the mempool
	TxMined                  // in a block
)

// Mempool is a node's mempool, on the chains that have one (Bitcoin,
// Litecoin), given to the watcher as such (Watcher.Mempool) rather than
// found on its Chain, which decorators (metrics) wrap.
type Mempool interface {
	// TxState says where a transaction is: a mempool payment whose
	// transaction is gone was replaced or double-spent.
	TxState(ctx context.Context, txid string) (TxState, error)
	// Mempool lists the mempool's transactions: a watcher taking the lease
	// over reads them, so what was broadcast while no watcher was active
	// is detected before its block.
	Mempool(ctx context.Context) ([]MempoolTx, error)
}

// runNotifier runs the Notifier until ctx ends, again after each failure.
func (w *Watcher) runNotifier(ctx context.Context) {
	n := Notifications{Block: w.wakeUp, Tx: func(tx MempoolTx) { w.onMempoolTx(ctx, tx) }}
	for ctx.Err() == nil {
		if err := w.Notifier.Run(ctx, n); err != nil && ctx.Err() == nil {
			w.Logger.Warn("node notifications", "network", w.Chain.Network(), "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(w.Poll):
		}
	}
}

// wakeUp makes the watcher step now rather than at the end of its poll.
func (w *Watcher) wakeUp() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// onMempoolTx records the payments of a mempool transaction to addresses
// the shop handed out (seen, no block) and delivers them at once; a
// transaction spending what a watched mempool payment spends makes the
// watcher check that payment now. The lease is renewed first and kept while
// the push runs (recording and delivering hundreds of payments can outlast
// it).
func (w *Watcher) onMempoolTx(ctx context.Context, tx MempoolTx) {
	w.stepMu.Lock()
	defer w.stepMu.Unlock()
	// A request created since the last step may be what this pays.
	if err := w.refreshIndex(ctx); err != nil {
		w.Logger.Warn("mempool transaction", "network", w.Chain.Network(), "txid", tx.TxID, "err", err)
	}
	seen, replaced := w.matchMempool(tx)
	if len(seen) == 0 && !replaced {
		return
	}
	if !w.leader.Load() {
		return // the active watcher records it (or reads the mempool on taking over)
	}
	if err := w.lease(ctx); err != nil {
		w.Logger.Warn("mempool transaction", "network", w.Chain.Network(), "txid", tx.TxID, "err", err)
		return
	}
	ctx, done := w.keepLease(ctx)
	defer done()
	if len(seen) > 0 {
		if err := w.recordMempool(ctx, tx, seen); err != nil {
			if errors.Is(err, ErrLeaseLost) {
				w.leader.Store(false)
			}
			w.Logger.Warn("record mempool payment", "network", w.Chain.Network(), "txid", tx.TxID, "err", err)
			return
		}
	}
	if replaced {
		if err := w.checkMempool(ctx); err != nil {
			w.Logger.Warn("mempool check", "network", w.Chain.Network(), "err", err)
		}
	}
	if err := w.Reconcile(ctx); err != nil {
		w.Logger.Warn("deliver", "network", w.Chain.Network(), "err", err)
	}
}

// matchMempool keeps the transaction's outputs that pay an address the
// shop handed out, and says whether it spends what another watched mempool
// payment spends (replacement or double spend).
func (w *Watcher) matchMempool(tx MempoolTx) (seen []Seen, replaced bool) {
	for _, s := range tx.Spends {
		if other, ok := w.spent[s]; ok && other != tx.TxID {
			replaced = true
		}
	}
	for i := range tx.Outputs {
		o := &tx.Outputs[i]
		if o.Amount == nil || o.Amount.Sign() <= 0 || !w.index.Has(o.Address) {
			continue
		}
		seen = append(seen, Seen{TxID: o.TxID, Index: o.Index, Asset: o.Asset, Address: o.Address, Amount: o.Amount,
			Dust: w.isDust(o.Asset, o.Amount)})
	}
	return seen, replaced
}

// recordMempool stores a mempool transaction's matching payments and
// remembers what it spends.
func (w *Watcher) recordMempool(ctx context.Context, tx MempoolTx, seen []Seen) error {
	if err := w.Store.RecordMempool(ctx, w.Chain.Network(), w.Holder, seen); err != nil {
		return err
	}
	for _, s := range tx.Spends {
		w.spent[s] = tx.TxID
	}
	return nil
}

// readMempool records the payments of every transaction in the node's
// mempool, when the chain can list it (the step delivers them).
func (w *Watcher) readMempool(ctx context.Context) error {
	if w.Mempool == nil {
		return nil
	}
	txs, err := w.Mempool.Mempool(ctx)
	if err != nil {
		return fmt.Errorf("read mempool: %w", err)
	}
	for _, tx := range txs {
		if seen, _ := w.matchMempool(tx); len(seen) > 0 {
			if err := w.recordMempool(ctx, tx, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMempool reverts the mempool payments whose transaction the node no
// longer has (replaced or double-spent before being mined).
func (w *Watcher) checkMempool(ctx context.Context) error {
	if w.Mempool == nil {
		return nil
	}
	txids, err := w.Store.MempoolPayments(ctx, w.Chain.Network())
	if err != nil {
		return err
	}
	var errs []error
	for _, txid := range txids {
		st, err := w.Mempool.TxState(ctx, txid)
		if err != nil {
			errs = append(errs, fmt.Errorf("transaction %s: %w", txid, err))
			continue
		}
		if st != TxGone {
			continue
		}
		if err := w.Store.RevertMempool(ctx, w.Chain.Network(), w.Holder, txid); err != nil {
			if errors.Is(err, ErrLeaseLost) {
				return err
			}
			errs = append(errs, err)
			continue
		}
		w.Logger.Info("mempool payment gone (replaced or double-spent)", "network", w.Chain.Network(), "txid", txid)
		for s, t := range w.spent {
			if t == txid {
				delete(w.spent, s)
			}
		}
	}
	return errors.Join(errs...)
}
