package postgres

// How one payment seen on a chain is stored: matched to its request,
// valued, and moved into its block.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/kernodeck/kernodeck/domain"
)

// mineKnownPayments moves the payments of ps that are already stored into
// their block (a reverted one is seen again, as a new state) and returns
// the others. One statement for all: a busy block pays thousands of
// requests whose payments the mempool showed first, and two round trips
// each (recordPayment's) took the watcher 12 s under the burst of issue 23
// before the first confirmation could be signalled.
func mineKnownPayments(ctx context.Context, tx *sqlx.Tx, network string, ps []domain.ChainSeen) ([]domain.ChainSeen, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	txids, indexes := make([]string, len(ps)), make([]int64, len(ps))
	heights, hashes, times := make([]int64, len(ps)), make([]string, len(ps)), make([]string, len(ps))
	for i, p := range ps {
		txids[i], indexes[i], heights[i], hashes[i] = p.TxID, p.Index, p.BlockHeight, p.BlockHash
		if !p.BlockTime.IsZero() {
			times[i] = p.BlockTime.Format(time.RFC3339Nano)
		}
	}
	// The final SELECT reads the snapshot from before the UPDATE: every
	// stored payment of the block, confirmed ones included (they stay).
	var known []struct {
		TxID  string `db:"txid"`
		Index int64  `db:"output_index"`
	}
	err := tx.SelectContext(ctx, &known, `
		WITH b AS (
			SELECT * FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[])
				AS b(txid, output_index, height, hash, at)),
		moved AS (
			UPDATE chain_payments p SET block_height = b.height, block_hash = b.hash,
				block_time = NULLIF(b.at, '')::timestamptz, mempool = false,
				state = CASE WHEN p.state = 'reverted' THEN 'seen' ELSE p.state END,
				state_version = p.state_version + CASE WHEN p.state = 'reverted' THEN 1 ELSE 0 END,
				after_confirmation = CASE WHEN p.state = 'reverted' THEN false ELSE p.after_confirmation END,
				reverted_at = CASE WHEN p.state = 'reverted' THEN NULL ELSE p.reverted_at END
			FROM b
			WHERE p.network = $1 AND p.txid = b.txid AND p.output_index = b.output_index AND p.state <> 'confirmed')
		SELECT p.txid, p.output_index FROM chain_payments p JOIN b
			ON p.network = $1 AND p.txid = b.txid AND p.output_index = b.output_index`,
		network, pq.Array(txids), pq.Array(indexes), pq.Array(heights), pq.Array(hashes), pq.Array(times))
	if err != nil {
		return nil, fmt.Errorf("payments seen before: %w", err)
	}
	if len(known) == 0 {
		return ps, nil
	}
	type key struct {
		txid  string
		index int64
	}
	stored := make(map[key]bool, len(known))
	for _, k := range known {
		stored[key{k.TxID, k.Index}] = true
	}
	var fresh []domain.ChainSeen
	for _, p := range ps {
		if !stored[key{p.TxID, p.Index}] {
			fresh = append(fresh, p)
		}
	}
	return fresh, nil
}

// paidIntent is what recordPayment needs of the request an address or an
// ID names.
type paidIntent struct {
	ID         string        `db:"id"`
	Asset      string        `db:"asset"`
	AmountBase domain.BigInt `db:"amount_base"`
	USDCents   int64         `db:"usd_cents"`
	Deadline   time.Time     `db:"deadline"`
	WatchUntil time.Time     `db:"watch_until"`
	TargetRef  string        `db:"target_ref"`
	TargetKind string        `db:"target_kind"`
}

// findIntent returns the request p pays: the one the watcher named, or the
// one its address was handed out for (EVM addresses compare without case,
// the others exactly). ok is false when none does (an index collision).
func findIntent(ctx context.Context, tx *sqlx.Tx, network string, p domain.ChainSeen) (paidIntent, bool, error) {
	var in paidIntent
	const cols = `id, asset, amount_base, usd_cents, deadline, watch_until, target_ref, target_kind`
	var err error
	if p.IntentID != "" {
		err = tx.GetContext(ctx, &in, `SELECT `+cols+` FROM payment_intents WHERE id = $1 AND network = $2`, p.IntentID, network)
	} else {
		err = tx.GetContext(ctx, &in, `SELECT `+cols+` FROM payment_intents
			WHERE network = $1 AND network <> 'solana' AND lower(address) = lower($2)
				AND (network = 'ethereum' OR address = $2) AND target_kind <> 'payout'`, network, p.Address)
		if errors.Is(err, sql.ErrNoRows) {
			return findPayoutIntent(ctx, tx, network, p)
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return in, false, nil
	}
	if err != nil {
		return in, false, fmt.Errorf("request paid by %s/%s:%d: %w", network, p.TxID, p.Index, err)
	}
	return in, true, nil
}

// recordPayment stores a payment once. A countable one (the request's
// asset, mined while the request was watched, above the dust threshold) is
// valued at the part of the request's USD amount that the running total of
// its countable payments covers, so several parts that sum to the exact
// amount are worth exactly the request's cents. Dust is valued on its own
// and summed per request when confirmed. What cannot be counted is kept for
// support with a timeline entry, and never signalled.
func recordPayment(ctx context.Context, tx *sqlx.Tx, network string, p domain.ChainSeen) error {
	var existing string
	err := tx.GetContext(ctx, &existing, `SELECT state FROM chain_payments
		WHERE network = $1 AND txid = $2 AND output_index = $3 FOR UPDATE`, network, p.TxID, p.Index)
	switch {
	case err == nil:
		// Seen before: in the mempool, mined again after a
		// reorganisation, or a second watcher re-reading a block. Only the
		// block moves.
		_, err = tx.ExecContext(ctx, `
			UPDATE chain_payments SET block_height = $4, block_hash = $5, block_time = $6, mempool = false,
				state = CASE WHEN state = 'reverted' THEN 'seen' ELSE state END,
				state_version = state_version + CASE WHEN state = 'reverted' THEN 1 ELSE 0 END,
				after_confirmation = CASE WHEN state = 'reverted' THEN false ELSE after_confirmation END,
				reverted_at = CASE WHEN state = 'reverted' THEN NULL ELSE reverted_at END
			WHERE network = $1 AND txid = $2 AND output_index = $3 AND state <> 'confirmed'`,
			network, p.TxID, p.Index, p.BlockHeight, p.BlockHash, nullTime(p.BlockTime))
		return err
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("payment %s/%s:%d: %w", network, p.TxID, p.Index, err)
	}
	in, ok, err := findIntent(ctx, tx, network, p)
	if err != nil || !ok {
		return err
	}
	if in.TargetKind == domain.TargetPayout && (p.Asset != in.Asset || p.Amount.Cmp(&in.AmountBase.Int) != 0) {
		// The customer's own wallet: what is not the payout is none of
		// the shop's business, and is not kept.
		return nil
	}
	at := p.BlockTime
	if at.IsZero() {
		at = time.Now()
	}
	var toSupport string
	switch {
	case p.Asset != in.Asset:
		toSupport = "other_asset"
	case at.After(in.WatchUntil):
		toSupport = "not_watched"
	}
	var cents int64
	switch {
	case toSupport == "other_asset":
		// No rate for this asset on the request: support values it.
	case toSupport != "" || p.Dust:
		cents = valueCents(p.Amount, &in)
	default:
		var prevSum domain.BigInt
		if err := tx.GetContext(ctx, &prevSum, `SELECT COALESCE(SUM(amount_base), 0) FROM chain_payments
			WHERE intent_id = $1 AND state <> 'reverted' AND NOT dust AND to_support IS NULL`, in.ID); err != nil {
			return fmt.Errorf("intent %s total: %w", in.ID, err)
		}
		prev := &prevSum.Int
		cents = valueCents(new(big.Int).Add(prev, p.Amount), &in) - valueCents(prev, &in)
	}
	// Another watcher process may insert the same payment at this moment
	// (only without the lease): the first row stands, once.
	res, err := tx.ExecContext(ctx, `
		INSERT INTO chain_payments (network, txid, output_index, asset, intent_id, address, amount_base,
			amount_cents, late, block_height, block_hash, block_time, state, dust, to_support, mempool)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'seen', $13, $14, $15)
		ON CONFLICT (network, txid, output_index) DO NOTHING`,
		network, p.TxID, p.Index, p.Asset, in.ID, p.Address, p.Amount.String(),
		cents, at.After(in.Deadline), nullHeight(p.BlockHeight), nullString(p.BlockHash), nullTime(p.BlockTime),
		p.Dust && toSupport == "", nullString(toSupport), p.BlockHash == "")
	if err != nil {
		return fmt.Errorf("insert payment %s/%s:%d: %w", network, p.TxID, p.Index, err)
	}
	n, _ := res.RowsAffected()
	if n == 1 && toSupport == "" && !p.Dust {
		// A payment seen: the request's short first hold now lasts as long
		// as the request can be paid (issue 19: holds cost the holder). A
		// top-up holds nothing: the update finds no row.
		if err := ExtendHeldForPayment(ctx, tx, in.TargetRef, in.Deadline.Add(domain.HoldGrace)); err != nil {
			return err
		}
	}
	if n == 0 || toSupport == "" {
		return nil
	}
	msg := fmt.Sprintf("Paiement reçu en %s à l'adresse d'une demande de paiement en %s : il ne peut pas être compté automatiquement et est transmis au support.", p.Asset, in.Asset)
	if toSupport == "not_watched" {
		msg = "Paiement reçu à l'adresse d'une demande de paiement qui n'est plus surveillée : il est transmis au support."
	}
	_, err = insertEvent(ctx, tx, in.TargetRef, domain.KeyToSupport(domain.PaymentKey(network, p.TxID, p.Index)),
		"payment_to_support", msg, map[string]any{"network": network, "txid": p.TxID, "index": p.Index,
			"asset": p.Asset, "amount_base_units": p.Amount.String(), "intent_id": in.ID, "reason": toSupport}, at)
	return err
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullHeight: a mempool sighting has no block.
func nullHeight(h int64) any {
	if h <= 0 {
		return nil
	}
	return h
}

// valueCents is floor(amount x intent cents / intent amount).
func valueCents(amount *big.Int, in *paidIntent) int64 {
	v := new(big.Int).Mul(amount, big.NewInt(in.USDCents))
	v.Quo(v, &in.AmountBase.Int)
	if !v.IsInt64() {
		return 0 // absurdly large: support values it
	}
	return v.Int64()
}
