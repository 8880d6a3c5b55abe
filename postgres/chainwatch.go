package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
)

// keepBlocks is how many recent block hashes are kept per network for reorg
// detection; deeper reorganisations than this are not expected.
const keepBlocks = 2000

var _ chainwatch.Store = (*DB)(nil)

// WatchedIntents returns the intents of network still watched at now, with
// a sequence above afterSeq.
func (db *DB) WatchedIntents(ctx context.Context, network string, afterSeq int64, now time.Time) ([]chainwatch.Intent, error) {
	rows, err := db.QueryxContext(ctx, `
		SELECT seq, id, target_kind, target_ref, network, asset, address, COALESCE(reference_key, ''),
			amount_base, usd_cents, deadline, watch_until
		FROM payment_intents
		WHERE network = $1 AND seq > $2 AND watch_until > $3
		ORDER BY seq`, network, afterSeq, now)
	if err != nil {
		return nil, fmt.Errorf("watched intents %s: %w", network, err)
	}
	defer rows.Close()
	var out []chainwatch.Intent
	for rows.Next() {
		var in chainwatch.Intent
		var amount domain.BigInt
		if err := rows.Scan(&in.Seq, &in.ID, &in.TargetKind, &in.TargetRef, &in.Network, &in.Asset, &in.Address,
			&in.Reference, &amount, &in.USDCents, &in.Deadline, &in.WatchUntil); err != nil {
			return nil, err
		}
		in.AmountBase = new(big.Int).Set(&amount.Int)
		out = append(out, in)
	}
	return out, rows.Err()
}

// LastBlock returns the watcher's cursor for network.
func (db *DB) LastBlock(ctx context.Context, network string) (int64, string, bool, error) {
	var b struct {
		Height int64  `db:"height"`
		Hash   string `db:"hash"`
	}
	err := db.GetContext(ctx, &b, `SELECT height, hash FROM chain_blocks WHERE network = $1 ORDER BY height DESC LIMIT 1`, network)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("cursor %s: %w", network, err)
	}
	return b.Height, b.Hash, true, nil
}

// BlockHash returns the recorded hash at height.
func (db *DB) BlockHash(ctx context.Context, network string, height int64) (string, bool, error) {
	var h string
	err := db.GetContext(ctx, &h, `SELECT hash FROM chain_blocks WHERE network = $1 AND height = $2`, network, height)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("block %s/%d: %w", network, height, err)
	}
	return h, true, nil
}

// RecordBlock stores a block's hash and its payments in one transaction.
func (db *DB) RecordBlock(ctx context.Context, network string, height int64, hash string, payments []chainwatch.Seen) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO chain_blocks (network, height, hash) VALUES ($1, $2, $3)
			ON CONFLICT (network, height) DO UPDATE SET hash = EXCLUDED.hash`, network, height, hash); err != nil {
			return fmt.Errorf("record block %s/%d: %w", network, height, err)
		}
		for _, p := range payments {
			if err := recordPayment(ctx, tx, network, p); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM chain_blocks WHERE network = $1 AND height < $2`, network, height-keepBlocks)
		return err
	})
}

// recordPayment stores a seen payment once. Its USD value is the part of the
// request's USD amount that the running total of the request's payments
// covers, so several parts that sum to the exact amount are worth exactly the
// request's cents.
func recordPayment(ctx context.Context, tx *sqlx.Tx, network string, p chainwatch.Seen) error {
	var existing string
	err := tx.GetContext(ctx, &existing, `SELECT state FROM chain_payments
		WHERE network = $1 AND txid = $2 AND output_index = $3 FOR UPDATE`, network, p.TxID, p.Index)
	switch {
	case err == nil:
		// Seen before: mined again after a reorganisation, or a second
		// watcher re-reading a block. Only the block moves.
		_, err = tx.ExecContext(ctx, `
			UPDATE chain_payments SET block_height = $4, block_hash = $5,
				state = CASE WHEN state = 'reverted' THEN 'seen' ELSE state END,
				reverted_at = CASE WHEN state = 'reverted' THEN NULL ELSE reverted_at END
			WHERE network = $1 AND txid = $2 AND output_index = $3 AND state <> 'confirmed'`,
			network, p.TxID, p.Index, p.BlockHeight, p.BlockHash)
		return err
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("payment %s/%s:%d: %w", network, p.TxID, p.Index, err)
	}
	var prevSum domain.BigInt
	if err := tx.GetContext(ctx, &prevSum, `SELECT COALESCE(SUM(amount_base), 0) FROM chain_payments
		WHERE intent_id = $1 AND state <> 'reverted'`, p.Intent.ID); err != nil {
		return fmt.Errorf("intent %s total: %w", p.Intent.ID, err)
	}
	prev := &prevSum.Int
	after := new(big.Int).Add(prev, p.Amount)
	cents := valueCents(after, p.Intent) - valueCents(prev, p.Intent)
	// Another watcher process may insert the same payment at this moment
	// (only without the lease): the first row stands, once.
	_, err = tx.ExecContext(ctx, `
		INSERT INTO chain_payments (network, txid, output_index, asset, intent_id, address, amount_base,
			amount_cents, late, block_height, block_hash, state)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'seen')
		ON CONFLICT (network, txid, output_index) DO NOTHING`,
		network, p.TxID, p.Index, p.Asset, p.Intent.ID, p.Address, p.Amount.String(),
		cents, p.Late, p.BlockHeight, p.BlockHash)
	if err != nil {
		return fmt.Errorf("insert payment %s/%s:%d: %w", network, p.TxID, p.Index, err)
	}
	return nil
}

// valueCents is floor(amount x intent cents / intent amount).
func valueCents(amount *big.Int, in *chainwatch.Intent) int64 {
	v := new(big.Int).Mul(amount, big.NewInt(in.USDCents))
	v.Quo(v, in.AmountBase)
	return v.Int64()
}

// Rewind forgets the blocks above height; their unconfirmed payments revert.
func (db *DB) Rewind(ctx context.Context, network string, height int64) (int, error) {
	var n int64
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `
			UPDATE chain_payments SET state = 'reverted', reverted_at = now()
			WHERE network = $1 AND block_height > $2 AND state = 'seen'`, network, height)
		if err != nil {
			return fmt.Errorf("revert payments %s above %d: %w", network, height, err)
		}
		n, _ = res.RowsAffected()
		_, err = tx.ExecContext(ctx, `DELETE FROM chain_blocks WHERE network = $1 AND height > $2`, network, height)
		return err
	})
	return int(n), err
}

// Confirm marks confirmed the seen payments up to maxHeight.
func (db *DB) Confirm(ctx context.Context, network string, maxHeight int64) (int, error) {
	res, err := db.ExecContext(ctx, `
		UPDATE chain_payments SET state = 'confirmed', confirmed_at = now()
		WHERE network = $1 AND state = 'seen' AND block_height <= $2`, network, maxHeight)
	if err != nil {
		return 0, fmt.Errorf("confirm %s up to %d: %w", network, maxHeight, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Unsignaled lists the payments whose state the workflow has not acknowledged.
func (db *DB) Unsignaled(ctx context.Context, network string, limit int) ([]chainwatch.Pending, error) {
	var out []chainwatch.Pending
	err := db.SelectContext(ctx, &out, `
		SELECT p.network, p.txid, p.output_index AS index, p.asset, p.intent_id, i.target_kind, i.target_ref,
			p.amount_base::text AS amount_base, p.amount_cents, p.late, p.state
		FROM chain_payments p JOIN payment_intents i ON i.id = p.intent_id
		WHERE p.network = $1 AND p.signaled_state IS DISTINCT FROM p.state
		ORDER BY p.seen_at, p.txid, p.output_index
		LIMIT $2`, network, limit)
	if err != nil {
		return nil, fmt.Errorf("unsignaled %s: %w", network, err)
	}
	return out, nil
}

// MarkSignaled records the delivery of p.State, unless the state moved since.
func (db *DB) MarkSignaled(ctx context.Context, p chainwatch.Pending) error {
	_, err := db.ExecContext(ctx, `
		UPDATE chain_payments SET signaled_state = $4, signaled_at = now()
		WHERE network = $1 AND txid = $2 AND output_index = $3 AND state = $4`,
		p.Network, p.TxID, p.Index, p.State)
	if err != nil {
		return fmt.Errorf("mark signaled %s:%d: %w", p.TxID, p.Index, err)
	}
	return nil
}

// MarkUndeliverable records a payment whose target workflow is closed: it is
// shown on the target's timeline for support, and not signalled again.
func (db *DB) MarkUndeliverable(ctx context.Context, p chainwatch.Pending) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			UPDATE chain_payments SET signaled_state = $4, signaled_at = now()
			WHERE network = $1 AND txid = $2 AND output_index = $3 AND state = $4`,
			p.Network, p.TxID, p.Index, p.State); err != nil {
			return err
		}
		if p.State == chainwatch.StateReverted {
			return nil
		}
		key := fmt.Sprintf("closed:%s:%s:%s:%d", p.State, p.Network, p.TxID, p.Index)
		_, err := insertEvent(ctx, tx, p.TargetRef, key, "payment_to_support",
			fmt.Sprintf("Paiement %s reçu (%s %s) alors que le dossier est clos : il est transmis au support.",
				map[string]string{chainwatch.StateSeen: "détecté", chainwatch.StateConfirmed: "confirmé"}[p.State],
				p.AmountBase, p.Asset),
			map[string]any{"network": p.Network, "txid": p.TxID, "index": p.Index, "asset": p.Asset,
				"amount_base_units": p.AmountBase, "intent_id": p.IntentID, "state": p.State}, time.Now())
		return err
	})
}

// AcquireLease takes the network's lease for holder if it is free, expired
// or already held by holder; it reports whether holder now has it.
func (db *DB) AcquireLease(ctx context.Context, network, holder string, ttl time.Duration) (bool, error) {
	var got string
	err := db.GetContext(ctx, &got, `
		INSERT INTO watcher_leases (network, holder, expires_at) VALUES ($1, $2, now() + $3 * interval '1 millisecond')
		ON CONFLICT (network) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
			WHERE watcher_leases.holder = EXCLUDED.holder OR watcher_leases.expires_at < now()
		RETURNING holder`, network, holder, ttl.Milliseconds())
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lease %s: %w", network, err)
	}
	return got == holder, nil
}

// ReleaseLease gives up the lease if holder has it.
func (db *DB) ReleaseLease(ctx context.Context, network, holder string) error {
	_, err := db.ExecContext(ctx, `DELETE FROM watcher_leases WHERE network = $1 AND holder = $2`, network, holder)
	return err
}
