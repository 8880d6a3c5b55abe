package postgres

import (
	"context"
	"fmt"

	"github.com/kernodeck/kernodeck/domain"
)

// BalanceHistory lists the movements of a customer's balance, newest first
// (at most limit): top-ups credited, rentals and extensions paid, refunds. The ledger's
// memos (support's reasons) are not part of it.
func (db *DB) BalanceHistory(ctx context.Context, accountID int64, limit int) ([]domain.BalanceMovement, error) {
	out := []domain.BalanceMovement{}
	if err := db.SelectContext(ctx, &out, `
		SELECT CASE WHEN t.kind = 'order_payment' AND t.idempotency_key LIKE 'event:%:extension:%' THEN $3 ELSE t.kind END AS kind,
			COALESCE(t.ref, '') AS ref, SUM(e.amount_cents) AS amount_cents, t.created_at AS at
		FROM ledger_entries e JOIN ledger_transactions t ON t.id = e.transaction_id
		WHERE e.ledger_account = $1
		GROUP BY t.id ORDER BY t.created_at DESC, t.id DESC LIMIT $2`, customerLedger(accountID), limit, domain.MovementExtension); err != nil {
		return nil, fmt.Errorf("balance history of %d: %w", accountID, err)
	}
	for i := range out {
		out[i].AmountUSD = domain.FormatUSD(out[i].AmountCents)
	}
	return out, nil
}
