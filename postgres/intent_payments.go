package postgres

import (
	"context"
	"fmt"

	"github.com/kernodeck/kernodeck/domain"
)

// confirmationsSQL is a chain payment p's confirmations: blocks on top of
// its own, its own included (0 while it is in none).
const confirmationsSQL = `CASE WHEN p.block_height IS NULL THEN 0
	ELSE GREATEST(0, COALESCE((SELECT max(b.height) FROM chain_blocks b WHERE b.network = p.network), 0) - p.block_height + 1)
	END`

// IntentPayments lists, per payment request of an order or top-up, the
// payments seen on chain and not reverted, oldest first, with their
// confirmations counted from the network's highest recorded block.
func (db *DB) IntentPayments(ctx context.Context, targetRef string) (map[string][]domain.IntentPayment, error) {
	var rows []struct {
		IntentID string `db:"intent_id"`
		Decimals int32  `db:"decimals"`
		domain.IntentPayment
	}
	if err := db.SelectContext(ctx, &rows, `
		SELECT p.intent_id, i.decimals, p.txid, p.asset, p.amount_base, p.amount_cents, p.state, p.late,
			`+confirmationsSQL+` AS confirmations
		FROM chain_payments p JOIN payment_intents i ON i.id = p.intent_id
		WHERE i.target_ref = $1 AND p.state <> 'reverted'
		ORDER BY p.seen_at, p.txid, p.output_index`, targetRef); err != nil {
		return nil, fmt.Errorf("payments of %s: %w", targetRef, err)
	}
	out := map[string][]domain.IntentPayment{}
	for _, r := range rows {
		p := r.IntentPayment
		p.Amount = domain.FormatUnits(&p.AmountBase.Int, r.Decimals)
		out[r.IntentID] = append(out[r.IntentID], p)
	}
	return out, nil
}
