package postgres

import (
	"context"
	"fmt"

	"github.com/kernodeck/kernodeck/domain"
)

// Reads and writes of `kernodeck recover`, which starts every live order's
// and top-up's workflow again from PostgreSQL after Temporal's database was
// lost, and of the address index check at every start.

// LiveOrders lists the orders whose workflow still has something to do
// (every status but ended, cancelled, expired and refunded), oldest first.
func (db *DB) LiveOrders(ctx context.Context) ([]domain.Order, error) {
	var out []domain.Order
	if err := db.SelectContext(ctx, &out, `SELECT `+orderColumnList+` FROM orders
		WHERE status NOT IN ('ended', 'cancelled', 'expired', 'refunded') ORDER BY created_at, ref`); err != nil {
		return nil, fmt.Errorf("live orders: %w", err)
	}
	return out, nil
}

// LiveTopUps lists the top-ups awaiting payment, and the credited ones,
// whose workflow may still listen for late payments (the caller decides by
// their credit time), oldest first.
func (db *DB) LiveTopUps(ctx context.Context) ([]domain.TopUp, error) {
	var out []domain.TopUp
	if err := db.SelectContext(ctx, &out, `SELECT `+topUpColumnList+` FROM topups
		WHERE status IN ('awaiting_payment', 'payment_detected', 'credited') ORDER BY created_at, ref`); err != nil {
		return nil, fmt.Errorf("live top-ups: %w", err)
	}
	return out, nil
}

// TargetRecord is what PostgreSQL keeps of an order's or a top-up's
// payments and progress beside its row.
type TargetRecord struct {
	Intents     []domain.Intent
	RequestKeys []string
	Payments    []domain.PendingPayment
	EventKeys   []string
	// ExtendedDays are the days support extended the rental by (its
	// "extended" events).
	ExtendedDays int
}

// TargetRecord reads target ref's payment requests (with their workflow
// keys), the chain payments to them (dust and payments for support
// excepted, as the reconciler sends them) and its timeline's event keys.
func (db *DB) TargetRecord(ctx context.Context, ref string) (TargetRecord, error) {
	var rec TargetRecord
	var rows []struct {
		domain.Intent
		RequestKey string `db:"request_key"`
	}
	if err := db.SelectContext(ctx, &rows, `SELECT `+intentColumns+`, request_key FROM payment_intents
		WHERE target_ref = $1 ORDER BY seq`, ref); err != nil {
		return rec, fmt.Errorf("requests of %s: %w", ref, err)
	}
	for _, r := range rows {
		r.Intent.Amount = domain.FormatUnits(&r.Intent.AmountBase.Int, r.Intent.Decimals)
		rec.Intents = append(rec.Intents, r.Intent)
		rec.RequestKeys = append(rec.RequestKeys, r.RequestKey)
	}
	if err := db.SelectContext(ctx, &rec.Payments, `
		SELECT p.network, p.txid, p.output_index AS index, p.asset, p.intent_id, i.target_kind, i.target_ref, i.address,
			p.amount_base::text AS amount_base, p.amount_cents, p.late, p.state, p.after_confirmation, p.mempool, p.reversals,
			p.state_version
		FROM chain_payments p JOIN payment_intents i ON i.id = p.intent_id
		WHERE i.target_ref = $1 AND NOT p.dust AND p.to_support IS NULL
		ORDER BY p.seen_at, p.txid, p.output_index`, ref); err != nil {
		return rec, fmt.Errorf("payments of %s: %w", ref, err)
	}
	if err := db.SelectContext(ctx, &rec.EventKeys, `SELECT idem_key FROM timeline_events WHERE ref = $1 ORDER BY id`, ref); err != nil {
		return rec, fmt.Errorf("timeline keys of %s: %w", ref, err)
	}
	if err := db.GetContext(ctx, &rec.ExtendedDays, `SELECT COALESCE(sum((data->>'days')::int), 0) FROM timeline_events
		WHERE ref = $1 AND kind = $2`, ref, domain.EventExtended); err != nil {
		return rec, fmt.Errorf("extensions of %s: %w", ref, err)
	}
	return rec, nil
}

// ResendTargetPayments marks every payment and dust summary of target
// ref's requests unacknowledged, so the watchers' reconciler delivers them
// again to its recovered workflow (which counts each payment once). It
// returns how many payments were marked.
func (db *DB) ResendTargetPayments(ctx context.Context, ref string) (int64, error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `UPDATE chain_payments SET signaled_state = NULL, signaled_version = NULL
		WHERE intent_id IN (SELECT id FROM payment_intents WHERE target_ref = $1)`, ref)
	if err != nil {
		return 0, fmt.Errorf("resend payments of %s: %w", ref, err)
	}
	n, _ := res.RowsAffected()
	if _, err := tx.ExecContext(ctx, `UPDATE chain_dust_summaries SET signaled_version = NULL
		WHERE intent_id IN (SELECT id FROM payment_intents WHERE target_ref = $1)`, ref); err != nil {
		return 0, fmt.Errorf("resend dust of %s: %w", ref, err)
	}
	return n, tx.Commit()
}

// IndexAdvance is one network's derivation index moved by
// AdvanceHDIndexes.
type IndexAdvance struct {
	Network string `db:"network"`
	From    int64  `db:"from_index"`
	To      int64  `db:"to_index"`
}

// AdvanceHDIndexes moves each network's next derivation index past the
// highest index of any address already handed out (payment_intents keeps
// every one, superseded and expired requests included, and the watchers
// watch those), then gap indexes further. A database restored to a point
// in time may hold a next_index below addresses it lists (hd_indexes and
// payment_intents restored from different moments of a base backup's
// copy are consistent, but a hand-edited or partially restored database
// is not); gap covers the addresses handed out after the restore point,
// which the restored database cannot know. It never moves an index back,
// whatever ran meanwhile (a request made, another process starting). It
// returns the networks moved.
func (db *DB) AdvanceHDIndexes(ctx context.Context, gap int64) ([]IndexAdvance, error) {
	if gap < 0 {
		return nil, fmt.Errorf("index gap %d: must be 0 or more", gap)
	}
	var out []IndexAdvance
	err := db.SelectContext(ctx, &out, `
		WITH used AS (
			SELECT network, max(derivation_index) + 1 AS past FROM payment_intents
			WHERE derivation_index IS NOT NULL GROUP BY network
		), target AS (
			SELECT h.network, h.next_index AS from_index,
				LEAST(GREATEST(h.next_index, COALESCE(u.past, 0)) + $1, 2147483647) AS to_index
			FROM hd_indexes h LEFT JOIN used u ON u.network = h.network
			FOR UPDATE OF h
		)
		UPDATE hd_indexes h SET next_index = GREATEST(h.next_index, t.to_index) FROM target t
		WHERE h.network = t.network AND t.to_index > t.from_index
		RETURNING h.network, t.from_index, h.next_index AS to_index`, gap)
	if err != nil {
		return nil, fmt.Errorf("advance derivation indexes: %w", err)
	}
	return out, nil
}
