package postgres

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

// keepBlocks is how many recent block hashes are kept per network for reorg
// detection; deeper reorganisations than this are not expected.
const keepBlocks = 2000

// WatchedIntents returns the intents of network still watched at now, with
// a sequence above afterSeq.
func (db *DB) WatchedIntents(ctx context.Context, network string, afterSeq int64, now time.Time) ([]domain.WatchedIntent, error) {
	rows, err := db.QueryxContext(ctx, `SELECT `+watchedIntentColumns+` FROM payment_intents
		WHERE network = $1 AND seq > $2 AND watch_until > $3
		ORDER BY seq`, network, afterSeq, now)
	if err != nil {
		return nil, fmt.Errorf("watched intents %s: %w", network, err)
	}
	return scanWatchedIntents(rows)
}

// IntentsByReference returns the requests of network, of any age, whose
// reference key is one of keys.
func (db *DB) IntentsByReference(ctx context.Context, network string, keys []string) ([]domain.WatchedIntent, error) {
	rows, err := db.QueryxContext(ctx, `SELECT `+watchedIntentColumns+` FROM payment_intents
		WHERE network = $1 AND reference_key = ANY($2) ORDER BY seq`, network, pq.Array(keys))
	if err != nil {
		return nil, fmt.Errorf("intents by reference %s: %w", network, err)
	}
	return scanWatchedIntents(rows)
}

const watchedIntentColumns = `seq, id, target_kind, target_ref, network, asset, address, COALESCE(reference_key, ''),
	amount_base, usd_cents, deadline, watch_until`

func scanWatchedIntents(rows *sqlx.Rows) ([]domain.WatchedIntent, error) {
	defer rows.Close()
	var out []domain.WatchedIntent
	for rows.Next() {
		var in domain.WatchedIntent
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

// KnownAddresses returns every address handed out on network by requests
// with a sequence above afterSeq, whatever their age.
func (db *DB) KnownAddresses(ctx context.Context, network string, afterSeq int64) ([]domain.KnownAddress, error) {
	var out []domain.KnownAddress
	err := db.SelectContext(ctx, &out, `SELECT seq AS "seq", address AS "address" FROM payment_intents
		WHERE network = $1 AND seq > $2 ORDER BY seq`, network, afterSeq)
	if err != nil {
		return nil, fmt.Errorf("known addresses %s: %w", network, err)
	}
	return out, nil
}

// checkLease fails with domain.ErrLeaseLost unless holder holds the
// network's lease; the row stays locked (FOR KEY SHARE) until the
// transaction ends, so the lease cannot change hands while holder writes (a
// takeover locks it FOR UPDATE), while holder's own renewals, which change
// no key, do not wait (AcquireLease). An empty holder skips the check.
func checkLease(ctx context.Context, tx *sqlx.Tx, network, holder string) error {
	if holder == "" {
		return nil
	}
	var n int
	err := tx.GetContext(ctx, &n, `SELECT 1 FROM watcher_leases
		WHERE network = $1 AND holder = $2 AND expires_at > now() FOR KEY SHARE`, network, holder)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s by %s: %w", network, holder, domain.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("lease %s: %w", network, err)
	}
	return nil
}

// Checkpoint returns how far the follower of network has read every
// watched request.
func (db *DB) Checkpoint(ctx context.Context, network string) (int64, time.Time, bool, error) {
	var c struct {
		Height int64     `db:"height"`
		At     time.Time `db:"block_time"`
	}
	err := db.GetContext(ctx, &c, `SELECT height, block_time FROM chain_checkpoints WHERE network = $1`, network)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, time.Time{}, false, nil
	}
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("checkpoint %s: %w", network, err)
	}
	return c.Height, c.At, true, nil
}

// SaveCheckpoint moves network's checkpoint forward, under the lease.
func (db *DB) SaveCheckpoint(ctx context.Context, network, holder string, height int64, at time.Time) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := checkLease(ctx, tx, network, holder); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `
			INSERT INTO chain_checkpoints AS c (network, height, block_time) VALUES ($1, $2, $3)
			ON CONFLICT (network) DO UPDATE SET height = EXCLUDED.height, block_time = EXCLUDED.block_time, updated_at = now()
			WHERE c.height < EXCLUDED.height`, network, height, at)
		if err != nil {
			return fmt.Errorf("save checkpoint %s/%d: %w", network, height, err)
		}
		return nil
	})
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
// The payments already stored (seen in the mempool, or a block read again)
// move into the block first, all in one statement; the new ones follow, in
// the block's order.
func (db *DB) RecordBlock(ctx context.Context, network, holder string, height int64, hash string, payments []domain.ChainSeen) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := checkLease(ctx, tx, network, holder); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO chain_blocks (network, height, hash) VALUES ($1, $2, $3)
			ON CONFLICT (network, height) DO UPDATE SET hash = EXCLUDED.hash`, network, height, hash); err != nil {
			return fmt.Errorf("record block %s/%d: %w", network, height, err)
		}
		fresh, err := mineKnownPayments(ctx, tx, network, payments)
		if err != nil {
			return fmt.Errorf("record block %s/%d: %w", network, height, err)
		}
		for _, p := range fresh {
			if err := recordPayment(ctx, tx, network, p); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM chain_blocks WHERE network = $1 AND height < $2`, network, height-keepBlocks)
		return err
	})
}

// dustAdd adds the dust payments of the CTE "changed" (confirmed) to their
// requests' summaries, bumping each summary's version.
const dustAdd = `
	INSERT INTO chain_dust_summaries AS s (intent_id, network, outputs, amount_base, version)
	SELECT intent_id, $1, count(*), SUM(amount_base), 1 FROM changed WHERE dust GROUP BY intent_id
	ON CONFLICT (intent_id) DO UPDATE SET outputs = s.outputs + EXCLUDED.outputs,
		amount_base = s.amount_base + EXCLUDED.amount_base, version = s.version + 1`

// dustSubtract takes the dust payments of "changed" (reverted after their
// confirmation) from their summaries. An UPDATE, not an upsert: the row an
// INSERT proposes is checked (amount_base >= 0) before its conflict is
// found, so negative deltas made every such rewind fail.
const dustSubtract = `
	UPDATE chain_dust_summaries s SET outputs = s.outputs - c.n, amount_base = s.amount_base - c.total,
		version = s.version + 1
	FROM (SELECT intent_id, count(*) AS n, SUM(amount_base) AS total FROM changed WHERE dust GROUP BY intent_id) c
	WHERE s.intent_id = c.intent_id`

// Rewind forgets the blocks above height; their payments revert, and those
// that were confirmed are marked reverted after confirmation. The holds of
// orders they leave unpaid and without a payment seen are given back.
func (db *DB) Rewind(ctx context.Context, network, holder string, height int64) (int, error) {
	var n int
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := checkLease(ctx, tx, network, holder); err != nil {
			return err
		}
		if err := revertToSupport(ctx, tx, network, height); err != nil {
			return err
		}
		// SET reads the old state: after_confirmation is whether it was
		// confirmed.
		var r struct {
			N       int            `db:"n"`
			Counted pq.StringArray `db:"counted"`
		}
		err := tx.GetContext(ctx, &r, `
			WITH changed AS (
				UPDATE chain_payments SET state = 'reverted', reverted_at = now(), state_version = state_version + 1,
					after_confirmation = (state = 'confirmed'),
					reversals = reversals + CASE WHEN state = 'confirmed' THEN 1 ELSE 0 END
				WHERE network = $1 AND block_height > $2 AND state <> 'reverted'
				RETURNING intent_id, dust AND after_confirmation AS dust, amount_base,
					NOT dust AND to_support IS NULL AS counted),
			summaries AS (`+dustSubtract+`)
			SELECT count(*) AS n, COALESCE(array_agg(DISTINCT intent_id) FILTER (WHERE counted), '{}') AS counted
			FROM changed`, network, height)
		if err != nil {
			return fmt.Errorf("revert payments %s above %d: %w", network, height, err)
		}
		n = r.N
		// A payment reorganised away has vanished as a replaced mempool
		// one has (its transaction may be double-spent in the new branch):
		// the hold its sighting extended to the request's deadline is given
		// back the same way while the order is unpaid. Mined again, it pays
		// an order without a hold, like any other.
		if _, err := releaseVanishedHolds(ctx, tx, r.Counted); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM chain_blocks WHERE network = $1 AND height > $2`, network, height)
		return err
	})
	return n, err
}

// Confirm marks confirmed the seen payments up to maxHeight, and adds the
// dust among them to their requests' summaries.
func (db *DB) Confirm(ctx context.Context, network, holder string, maxHeight int64) (int, error) {
	var n int
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := checkLease(ctx, tx, network, holder); err != nil {
			return err
		}
		if err := queueToSupport(ctx, tx, network, maxHeight); err != nil {
			return err
		}
		return tx.GetContext(ctx, &n, `
			WITH changed AS (
				UPDATE chain_payments SET state = 'confirmed', confirmed_at = now(), state_version = state_version + 1
				WHERE network = $1 AND state = 'seen' AND block_height <= $2
				RETURNING intent_id, dust, amount_base),
			summaries AS (`+dustAdd+`)
			SELECT count(*) FROM changed`, network, maxHeight)
	})
	if err != nil {
		return 0, fmt.Errorf("confirm %s up to %d: %w", network, maxHeight, err)
	}
	return n, nil
}

// Unsignaled lists, oldest first, the payments whose state the workflow has
// not acknowledged (dust and payments for support excepted), except those
// of the skipped targets.
func (db *DB) Unsignaled(ctx context.Context, network string, skip []string, limit int) ([]domain.PendingPayment, error) {
	if skip == nil {
		skip = []string{} // NULL would make "<> ALL" unknown: nothing listed
	}
	out := []domain.PendingPayment{}
	err := db.SelectContext(ctx, &out, `
		SELECT p.network, p.txid, p.output_index AS index, p.asset, p.intent_id, i.target_kind, i.target_ref, i.address,
			p.amount_base::text AS amount_base, p.amount_cents, p.late, p.state, p.after_confirmation, p.mempool, p.reversals,
			p.state_version
		FROM chain_payments p JOIN payment_intents i ON i.id = p.intent_id
		WHERE p.network = $1 AND p.signaled_version IS DISTINCT FROM p.state_version AND NOT p.dust AND p.to_support IS NULL
			AND i.target_ref <> ALL($3)
		ORDER BY p.seen_at, p.txid, p.output_index
		LIMIT $2`, network, limit, pq.Array(skip))
	if err != nil {
		return nil, fmt.Errorf("unsignaled %s: %w", network, err)
	}
	return out, nil
}

// UnsignaledDust lists the dust summaries of network not yet acknowledged.
func (db *DB) UnsignaledDust(ctx context.Context, network string) ([]domain.PendingDust, error) {
	var out []domain.PendingDust
	err := db.SelectContext(ctx, &out, `
		SELECT s.network, i.asset, s.intent_id, i.target_kind, i.target_ref, i.address, s.version, s.outputs,
			s.amount_base::text AS amount_base,
			floor(s.amount_base * i.usd_cents / i.amount_base)::bigint AS amount_cents
		FROM chain_dust_summaries s JOIN payment_intents i ON i.id = s.intent_id
		WHERE s.network = $1 AND s.signaled_version IS DISTINCT FROM s.version
		ORDER BY s.intent_id`, network)
	if err != nil {
		return nil, fmt.Errorf("unsignaled dust %s: %w", network, err)
	}
	return out, nil
}

// MarkDustSignaled records the delivery of a summary's version (unless a
// newer one was delivered already).
func (db *DB) MarkDustSignaled(ctx context.Context, d domain.PendingDust) error {
	_, err := db.ExecContext(ctx, `UPDATE chain_dust_summaries SET signaled_version = $2
		WHERE intent_id = $1 AND (signaled_version IS NULL OR signaled_version < $2)`, d.IntentID, d.Version)
	if err != nil {
		return fmt.Errorf("mark dust signaled %s: %w", d.IntentID, err)
	}
	return nil
}

// MarkDustUndeliverable records a dust summary whose target's workflow
// closed: its running total goes to support's queue as the request's one
// dust row (as the workflow keeps it), once per version.
func (db *DB) MarkDustUndeliverable(ctx context.Context, d domain.PendingDust) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE chain_dust_summaries SET signaled_version = $2
			WHERE intent_id = $1 AND (signaled_version IS NULL OR signaled_version < $2)`, d.IntentID, d.Version)
		if err != nil {
			return fmt.Errorf("mark dust undeliverable %s: %w", d.IntentID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // a newer summary was queued or delivered already
		}
		var accountID int64
		if err := tx.GetContext(ctx, &accountID, `SELECT account_id FROM payment_intents WHERE id = $1`, d.IntentID); err != nil {
			return fmt.Errorf("intent %s: %w", d.IntentID, err)
		}
		return applyMoney(ctx, tx, moneyChange{kind: d.TargetKind, ref: d.TargetRef, accountID: accountID,
			exceptions: []domain.NewException{{Reason: domain.ExceptionDust, PaymentKey: domain.DustKey(d.IntentID),
				Network: d.Network, Asset: d.Asset, AmountBase: d.AmountBase, AmountCents: d.AmountCents}}})
	})
}

// MarkSignaled records the delivery of p's state version, unless the state
// moved since (then the newer one is sent too).
func (db *DB) MarkSignaled(ctx context.Context, p domain.PendingPayment) error {
	_, err := db.ExecContext(ctx, `
		UPDATE chain_payments SET signaled_state = $4, signaled_version = $5, signaled_at = now()
		WHERE network = $1 AND txid = $2 AND output_index = $3 AND state_version = $5`,
		p.Network, p.TxID, p.Index, p.State, p.StateVersion)
	if err != nil {
		return fmt.Errorf("mark signaled %s:%d: %w", p.TxID, p.Index, err)
	}
	return nil
}

// MarkUndeliverable records a payment whose target workflow is closed: it is
// shown on the target's timeline for support, and not signalled again.
func (db *DB) MarkUndeliverable(ctx context.Context, p domain.PendingPayment) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			UPDATE chain_payments SET signaled_state = $4, signaled_version = $5, signaled_at = now()
			WHERE network = $1 AND txid = $2 AND output_index = $3 AND state_version = $5`,
			p.Network, p.TxID, p.Index, p.State, p.StateVersion); err != nil {
			return err
		}
		if p.TargetKind == domain.TargetPayout {
			// A batch's workflow ends some time after its last payout
			// is confirmed: what the chain does later is applied here.
			_, err := payoutChainState(ctx, tx, p.IntentID, p.State, p.TxID)
			return err
		}
		if p.State == domain.PaymentStateReverted && !p.AfterConfirmation {
			return nil
		}
		return recordAfterClose(ctx, tx, afterClose{TargetKind: p.TargetKind, TargetRef: p.TargetRef, IntentID: p.IntentID,
			State: p.State, Network: p.Network, TxID: p.TxID, Index: p.Index, Asset: p.Asset,
			AmountBase: p.AmountBase, AmountCents: p.AmountCents})
	})
}

// RecordMempool stores payments seen in the node's mempool (seen, no
// block); payments already stored are left as they are.
func (db *DB) RecordMempool(ctx context.Context, network, holder string, payments []domain.ChainSeen) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := checkLease(ctx, tx, network, holder); err != nil {
			return err
		}
		for _, p := range payments {
			p.BlockHeight, p.BlockHash, p.BlockTime = 0, "", time.Time{}
			var exists bool
			if err := tx.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM chain_payments
				WHERE network = $1 AND txid = $2 AND output_index = $3)`, network, p.TxID, p.Index); err != nil {
				return fmt.Errorf("payment %s/%s:%d: %w", network, p.TxID, p.Index, err)
			}
			if exists {
				continue
			}
			if err := recordPayment(ctx, tx, network, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// MempoolPayments lists the transactions of payments seen in the mempool
// and not in a block.
func (db *DB) MempoolPayments(ctx context.Context, network string) ([]string, error) {
	out := []string{}
	err := db.SelectContext(ctx, &out, `SELECT DISTINCT txid FROM chain_payments
		WHERE network = $1 AND mempool AND state = 'seen' ORDER BY txid`, network)
	if err != nil {
		return nil, fmt.Errorf("mempool payments %s: %w", network, err)
	}
	return out, nil
}

// RevertMempool reverts the mempool payments of a transaction the node
// dropped (replaced or double-spent before being mined), and gives back
// the holds of the orders they leave unpaid and without a payment seen.
func (db *DB) RevertMempool(ctx context.Context, network, holder, txid string) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := checkLease(ctx, tx, network, holder); err != nil {
			return err
		}
		// The requests whose counted payments this reverts: their orders'
		// holds, extended by the sighting, are given back at once
		// (releaseVanishedHolds).
		var counted []string
		err := tx.SelectContext(ctx, &counted, `
			WITH reverted AS (
				UPDATE chain_payments SET state = 'reverted', reverted_at = now(), state_version = state_version + 1
				WHERE network = $1 AND txid = $2 AND mempool AND state = 'seen'
				RETURNING intent_id, NOT dust AND to_support IS NULL AS counted)
			SELECT DISTINCT intent_id FROM reverted WHERE counted`, network, txid)
		if err != nil {
			return fmt.Errorf("revert mempool payment %s/%s: %w", network, txid, err)
		}
		_, err = releaseVanishedHolds(ctx, tx, counted)
		return err
	})
}
