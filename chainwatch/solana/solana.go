// Package solana watches SOL payments to Solana Pay requests. Every request
// (intent) pays the shop's address and carries its own reference key, which
// the customer's wallet adds to the transfer's accounts; the watcher asks the
// node for the finalized transactions that mention each open reference
// (getSignaturesForAddress) and counts what the shop's address received in
// each (its balance after minus before, in lamports).
//
// Solana is followed by reference, not block by block, so this is not a
// chainwatch.Chain. It shares the rest with the block-based watchers:
// chainwatch.Store (payments written first, keyed by (network, signature,
// 0)), chainwatch.Reconcile (signals re-sent until acknowledged) and the
// lease that keeps one active watcher.
//
// Only finalized transactions are read: they are never rolled back, so a
// payment is recorded and confirmed at once. The per-reference cursor (the
// newest signature handled) lives in memory; after a restart every
// reference is read again from its first transaction, which records
// nothing twice.
//
// Requests are loaded and dropped by the chain's time, never the wall
// clock: once every watched reference (and the shop's address) has been
// read through a finalized slot, that slot and its block time are the
// checkpoint (Store.SaveCheckpoint), and only requests whose watch window
// closed before it are dropped. A watcher down for longer than a watch
// window loads, at its restart, every request still open at its last
// checkpoint, and records the payments they received in time.
package solana

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/kernodeck/kernodeck/chainwatch"
)

// Network is the network's name in intents and payments.
const Network = "solana"

// Asset is SOL, counted in lamports (1 SOL = 10^9 lamports).
const Asset = "SOL"

// maxClockLead is how far ahead of this machine's clock a block time is
// believed: beyond it the node is wrong, and the checkpoint stays.
const maxClockLead = time.Hour

// Watcher follows the open Solana Pay requests.
type Watcher struct {
	// RPCURL is the node's JSON-RPC endpoint.
	RPCURL string
	// Client is the HTTP client (a 30 s timeout by default).
	Client   *http.Client
	Store    chainwatch.Store
	Signaler chainwatch.Signaler
	// Holder names this process in the lease (host:pid or similar).
	Holder   string
	LeaseTTL time.Duration
	// Poll is the pause between steps.
	Poll time.Duration
	// Dust is the amount in lamports below which a payment is dust: stored
	// and summarised per request rather than signalled (nil: none).
	Dust   *big.Int
	Logger *slog.Logger
	// Now is the clock (time.Now by default).
	Now func() time.Time

	rpc *rpcClient
	// intents by reference key. chainwatch.Index keys intents by address,
	// and every Solana request shares the shop's address.
	intents map[string]chainwatch.Intent
	maxSeq  int64
	// shops are the receiving addresses of every request ever made (any
	// age): read for payments without a watched reference; addrSeq is the
	// newest request whose address is in shops.
	shops   map[string]bool
	addrSeq int64
	// through is the checkpoint's block time (zero: none yet, every
	// request is loaded); loaded: read from the store.
	through time.Time
	loaded  bool
	// until is, per reference, the newest signature fully handled; and
	// per shop address for the transactions matched by amount.
	until map[string]string
}

func (w *Watcher) defaults() {
	if w.LeaseTTL <= 0 {
		w.LeaseTTL = 30 * time.Second
	}
	if w.Poll <= 0 {
		w.Poll = 5 * time.Second
	}
	if w.Logger == nil {
		w.Logger = slog.Default()
	}
	if w.rpc == nil {
		c := w.Client
		if c == nil {
			c = &http.Client{Timeout: 30 * time.Second}
		}
		w.rpc = &rpcClient{url: w.RPCURL, client: c}
	}
	if w.intents == nil {
		w.intents = map[string]chainwatch.Intent{}
		w.until = map[string]string{}
		w.shops = map[string]bool{}
	}
}

func (w *Watcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// Run watches until ctx ends, while it holds Solana's lease.
func (w *Watcher) Run(ctx context.Context) error {
	w.defaults()
	log := w.Logger.With("network", Network, "holder", w.Holder)
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = w.Store.ReleaseLease(rctx, Network, w.Holder)
	}()
	leader := false
	for {
		err := w.Step(ctx)
		lost := errors.Is(err, chainwatch.ErrLeaseLost)
		switch {
		case ctx.Err() != nil:
		case lost && leader:
			log.Warn("lease lost: another watcher is active")
			// The other watcher may have moved on; start over from the
			// references' first transactions if the lease comes back.
			w.until = map[string]string{}
		case !lost && !leader:
			log.Info("watcher is active")
		}
		leader = !lost
		if err != nil && !lost && ctx.Err() == nil {
			log.Warn("step failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.Poll):
		}
	}
}

// Step runs one pass: take or renew the lease (chainwatch.ErrLeaseLost if
// another watcher has it; an empty Holder skips it), refresh the requests,
// read each reference's new finalized transactions, record and confirm the
// payments, and deliver the signals not yet acknowledged.
func (w *Watcher) Step(ctx context.Context) error {
	w.defaults()
	if w.Holder != "" {
		ok, err := w.Store.AcquireLease(ctx, Network, w.Holder, w.LeaseTTL)
		if err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		if !ok {
			return fmt.Errorf("%s held by another watcher: %w", Network, chainwatch.ErrLeaseLost)
		}
	}
	if err := w.refresh(ctx); err != nil {
		return err
	}
	// Transactions to the shop's address without a reference are matched
	// by amount only up to the slot finalized before the reference scans:
	// a referenced payment in it is then recorded by its reference first.
	before, err := w.rpc.finalizedSlot(ctx)
	if err != nil {
		return err
	}
	// Without the slot's time (a node that has no block time for it yet)
	// the step reads as usual and leaves the checkpoint where it is.
	beforeTime, timed, err := w.rpc.blockTime(ctx, before)
	switch {
	case err != nil:
		w.Logger.Warn("solana block time unavailable: checkpoint not moved", "slot", before, "err", err)
		timed = false
	case timed && beforeTime.After(w.now().Add(maxClockLead)):
		// A node answering garbage must not drop every request at once.
		w.Logger.Warn("solana block time ahead of the clock: checkpoint not moved", "slot", before, "block_time", beforeTime)
		timed = false
	}
	refs := make([]string, 0, len(w.intents))
	for ref := range w.intents {
		refs = append(refs, ref)
	}
	// Oldest requests first: deterministic, and fair when one fails.
	sort.Slice(refs, func(i, j int) bool { return w.intents[refs[i]].Seq < w.intents[refs[j]].Seq })
	var errs []error
	for _, ref := range refs {
		if err := w.scan(ctx, w.intents[ref]); err != nil {
			errs = append(errs, fmt.Errorf("reference %s: %w", ref, err))
		}
	}
	if err := w.scanShop(ctx, before); err != nil {
		errs = append(errs, fmt.Errorf("shop address: %w", err))
	}
	if len(errs) == 0 && timed {
		// Every payment up to the slot read before the scans is recorded.
		if err := w.checkpoint(ctx, before, beforeTime); err != nil {
			errs = append(errs, err)
		}
	}
	// Everything recorded is finalized: confirm it up to the finalized slot
	// (read after the transactions, so it is at or above theirs).
	slot, err := w.rpc.finalizedSlot(ctx)
	if err != nil {
		errs = append(errs, err)
	} else if _, err := w.Store.Confirm(ctx, Network, w.Holder, slot); err != nil {
		errs = append(errs, err)
	}
	// Deliver what was stored even if a reference failed.
	if err := chainwatch.Reconcile(ctx, Network, w.Store, w.Signaler); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// refresh loads the requests created since the last refresh that were
// still watched at the checkpoint's chain time.
func (w *Watcher) refresh(ctx context.Context) error {
	if !w.loaded {
		_, at, ok, err := w.Store.Checkpoint(ctx, Network)
		if err != nil {
			return err
		}
		if ok {
			w.through = at
		}
		w.loaded = true
	}
	fresh, err := w.Store.WatchedIntents(ctx, Network, w.maxSeq, w.through)
	if err != nil {
		return fmt.Errorf("load intents: %w", err)
	}
	known, err := w.Store.KnownAddresses(ctx, Network, w.addrSeq)
	if err != nil {
		return fmt.Errorf("load addresses: %w", err)
	}
	for _, a := range known {
		w.shops[a.Address] = true
		w.addrSeq = max(w.addrSeq, a.Seq)
	}
	for _, in := range fresh {
		w.maxSeq = max(w.maxSeq, in.Seq)
		if in.Reference == "" {
			w.Logger.Warn("solana intent without reference key: not watched", "intent", in.ID)
			continue
		}
		w.intents[in.Reference] = in
	}
	return nil
}

// checkpoint records that every watched request was read through slot
// (block time at), and drops the requests whose watch window closed
// before it: nothing they could count is left to read.
func (w *Watcher) checkpoint(ctx context.Context, slot int64, at time.Time) error {
	if !at.After(w.through) {
		return nil
	}
	if err := w.Store.SaveCheckpoint(ctx, Network, w.Holder, slot, at); err != nil {
		return err
	}
	w.through = at
	for ref, in := range w.intents {
		if at.After(in.WatchUntil) {
			delete(w.intents, ref)
			delete(w.until, ref)
		}
	}
	return nil
}

// scan records the payments of the reference's transactions newer than its
// cursor, oldest first, moving the cursor past each one handled.
func (w *Watcher) scan(ctx context.Context, in chainwatch.Intent) error {
	sigs, err := w.rpc.signaturesForAddress(ctx, in.Reference, w.until[in.Reference])
	if err != nil {
		return err
	}
	for i := len(sigs) - 1; i >= 0; i-- {
		s := sigs[i]
		if !s.failed() {
			if err := w.record(ctx, in, s); err != nil {
				return err
			}
		}
		w.until[in.Reference] = s.Signature
	}
	return nil
}

func (w *Watcher) record(ctx context.Context, in chainwatch.Intent, s signatureInfo) error {
	tx, err := w.finalizedTx(ctx, s)
	if tx == nil || err != nil {
		return err
	}
	amount, err := tx.received(in.Address)
	if err != nil {
		return fmt.Errorf("transaction %s: %w", s.Signature, err)
	}
	if amount == nil || amount.Sign() <= 0 {
		// The reference was used in a transaction that paid the shop
		// nothing (or that the shop paid from): nothing to count.
		w.Logger.Info("solana reference used without payment", "intent", in.ID, "signature", s.Signature)
		return nil
	}
	return w.store(ctx, s, tx, in, amount)
}

// finalizedTx reads a listed transaction; nil (and no error) if it failed.
func (w *Watcher) finalizedTx(ctx context.Context, s signatureInfo) (*transaction, error) {
	tx, err := w.rpc.getTransaction(ctx, s.Signature)
	if err != nil {
		return nil, err
	}
	if tx == nil {
		// Listed as finalized but not served yet (a node still catching
		// up): keep the cursor here and try again next step.
		return nil, fmt.Errorf("transaction %s: not available", s.Signature)
	}
	if tx.failed() {
		return nil, nil
	}
	return tx, nil
}

// store records what the shop's address received in tx for in: one
// payment per transaction (the net balance change, whatever the number of
// instructions), finalized, in its slot.
func (w *Watcher) store(ctx context.Context, s signatureInfo, tx *transaction, in chainwatch.Intent, amount *big.Int) error {
	at := w.now()
	if tx.BlockTime != nil {
		at = time.Unix(*tx.BlockTime, 0)
	}
	return w.Store.RecordBlock(ctx, Network, w.Holder, tx.Slot, slotHash(tx.Slot), []chainwatch.Seen{{
		TxID: s.Signature, Index: 0, Asset: Asset, Address: in.Address, Amount: amount,
		IntentID: in.ID, Dust: w.Dust != nil && amount.Cmp(w.Dust) < 0,
		BlockHeight: tx.Slot, BlockHash: slotHash(tx.Slot), BlockTime: at,
	}})
}

// slotHash stands for the block hash in the store: getTransaction does not
// report its block's hash, and a finalized slot is never replaced, so the
// slot number identifies the block well enough (nothing rewinds Solana).
func slotHash(slot int64) string { return "slot:" + strconv.FormatInt(slot, 10) }

// scanShop reads the payments to the shop's addresses (every one a request
// ever named) that carry no watched reference. One carrying the reference
// of a request no longer watched is recorded for it (for support). Others
// are matched by amount (an exchange withdrawal cannot add a reference):
// the amount received must be exactly a watched request's, and the request
// must have been watched at the transaction's block time. Amounts are
// unique among the requests watched at any one time (see payments), so at
// most one matches; a payment matching none is not ours to count.
func (w *Watcher) scanShop(ctx context.Context, maxSlot int64) error {
	byAmount := map[string][]chainwatch.Intent{}
	for _, in := range w.intents {
		byAmount[in.AmountBase.String()] = append(byAmount[in.AmountBase.String()], in)
	}
	for shop := range w.shops {
		cursor := "shop:" + shop
		sigs, err := w.rpc.signaturesForAddress(ctx, shop, w.until[cursor])
		if err != nil {
			return err
		}
		for i := len(sigs) - 1; i >= 0; i-- {
			s := sigs[i]
			if s.Slot > maxSlot {
				break // next step, after its reference scans
			}
			if !s.failed() {
				if err := w.matchAmount(ctx, shop, s, byAmount); err != nil {
					return err
				}
			}
			w.until[cursor] = s.Signature
		}
	}
	return nil
}

func (w *Watcher) matchAmount(ctx context.Context, shop string, s signatureInfo, byAmount map[string][]chainwatch.Intent) error {
	tx, err := w.finalizedTx(ctx, s)
	if tx == nil || err != nil {
		return err
	}
	keys := make([]string, 0, len(tx.Transaction.Message.AccountKeys))
	for _, k := range tx.Transaction.Message.AccountKeys {
		if _, ok := w.intents[k.Pubkey]; ok {
			return nil // carries a watched reference: recorded by it
		}
		if k.Pubkey != shop {
			keys = append(keys, k.Pubkey)
		}
	}
	amount, err := tx.received(shop)
	if err != nil || amount == nil || amount.Sign() <= 0 {
		return err
	}
	// The reference of a request no longer watched (any age): recorded for
	// it, and so for support (after its watch window, never counted).
	old, err := w.Store.IntentsByReference(ctx, Network, keys)
	if err != nil {
		return err
	}
	if len(old) > 0 {
		w.Logger.Info("solana payment to a request no longer watched", "intent", old[0].ID, "signature", s.Signature)
		return w.store(ctx, s, tx, old[0], amount)
	}
	at := w.now()
	if tx.BlockTime != nil {
		at = time.Unix(*tx.BlockTime, 0)
	}
	var match *chainwatch.Intent
	for _, in := range byAmount[amount.String()] {
		// The earliest window still open at the block's time: a released
		// amount is taken again only after the window of its last holder.
		if in.Address == shop && !at.After(in.WatchUntil) && (match == nil || in.WatchUntil.Before(match.WatchUntil)) {
			match = &in
		}
	}
	if match == nil {
		// No request to queue it under: said in the log for support (a
		// customer's exchange withdrawal of the wrong amount looks so).
		w.Logger.Warn("solana payment to the shop matching no request", "signature", s.Signature,
			"lamports", amount.String(), "slot", s.Slot, "address", shop)
		return nil
	}
	w.Logger.Info("solana payment without reference matched by amount", "intent", match.ID, "signature", s.Signature)
	return w.store(ctx, s, tx, *match, amount)
}
