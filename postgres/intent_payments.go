package postgres

import (
	"context"
	"fmt"

	"github.com/kernodeck/kernodeck/domain"
)

// tipOf is the highest recorded block of the network (an SQL expression):
// confirmations count from it.
func tipOf(network string) string {
	return `(SELECT max(b.height) FROM chain_blocks b WHERE b.network = ` + network + `)`
}

// confirmations is a payment's blocks on top of its own, its own included
// (0 while it is in none), tip the network's highest recorded block.
func confirmations(tip, blockHeight *int64) int64 {
	if blockHeight == nil {
		return 0
	}
	var t int64
	if tip != nil {
		t = *tip
	}
	return max(0, t-*blockHeight+1)
}

// IntentPayments lists, per payment request of an order or top-up, the
// payments seen on chain and not reverted, oldest first, with their
// confirmations counted from the network's highest recorded block.
func (db *DB) IntentPayments(ctx context.Context, targetRef string) (map[string][]domain.IntentPayment, error) {
	var rows []paymentJSON
	if err := db.SelectContext(ctx, &rows, `
		SELECT p.intent_id, i.decimals, p.txid, p.asset, p.amount_base, p.amount_cents, p.state, p.late,
			p.network, p.block_height, `+tipOf("p.network")+` AS tip
		FROM chain_payments p JOIN payment_intents i ON i.id = p.intent_id
		WHERE i.target_ref = $1 AND p.state <> 'reverted'
		ORDER BY p.seen_at, p.txid, p.output_index`, targetRef); err != nil {
		return nil, fmt.Errorf("payments of %s: %w", targetRef, err)
	}
	return payments(rows, nil), nil
}
