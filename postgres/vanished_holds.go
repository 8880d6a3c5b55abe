package postgres

// What a payment that vanishes before its confirmation gives back: the
// capacity hold its sighting extended (issue 35).

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// releaseVanishedHolds gives back, in the transaction that reverted them,
// the holds of the orders whose counted payments to the requests intentIDs
// just vanished (a mempool transaction replaced, double-spent or dropped;
// a block reorganised away), when the order is still unpaid and no other
// counted payment of its requests remains (not reverted, not dust, not for
// support). A payment seen extends its order's hold to the request's
// deadline (ExtendHeldForPayment): without this, one replaceable low-fee
// transaction, replaced at once, held a host until then. The hold is
// released, not shortened: should the payment come back (mined after all),
// the order is paid like any order without a hold. A paid order keeps its
// hold. It returns the orders whose hold was released.
func releaseVanishedHolds(ctx context.Context, tx *sqlx.Tx, intentIDs []string) ([]string, error) {
	if len(intentIDs) == 0 {
		return nil, nil
	}
	released := []string{}
	err := tx.SelectContext(ctx, &released, `
		UPDATE capacity_holds h SET state = 'released', updated_at = now()
		FROM orders o
		WHERE o.ref = h.order_ref AND h.state = 'held'
			AND o.status IN ('awaiting_payment', 'payment_detected')
			AND h.order_ref IN (SELECT target_ref FROM payment_intents WHERE id = ANY($1) AND target_kind = 'order')
			AND NOT EXISTS (SELECT 1 FROM payment_intents i JOIN chain_payments p ON p.intent_id = i.id
				WHERE i.target_kind = 'order' AND i.target_ref = h.order_ref
					AND p.state <> 'reverted' AND NOT p.dust AND p.to_support IS NULL)
		RETURNING h.order_ref`, pq.Array(intentIDs))
	if err != nil {
		return nil, fmt.Errorf("release holds of vanished payments: %w", err)
	}
	return released, nil
}
