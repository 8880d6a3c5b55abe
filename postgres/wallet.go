package postgres

import (
	"context"
	"fmt"
)

// DerivationUse is, per network, how far the watch-only account has been
// used: wallets scan a limited gap of unused addresses past the last one
// that received funds, so operators watch this gap.
type DerivationUse struct {
	Network   string `db:"network" json:"network"`
	NextIndex int64  `db:"next_index" json:"next_index"`
	// LastPaidIndex is the highest index that received a payment (-1: none).
	LastPaidIndex int64 `db:"last_paid_index" json:"last_paid_index"`
	// Gap is how many indexes were handed out after LastPaidIndex.
	Gap int64 `db:"gap" json:"gap"`
}

// DerivationUses reports the derivation indexes used per network.
func (db *DB) DerivationUses(ctx context.Context) ([]DerivationUse, error) {
	var out []DerivationUse
	err := db.SelectContext(ctx, &out, `
		SELECT h.network, h.next_index,
			COALESCE(MAX(i.derivation_index) FILTER (WHERE p.intent_id IS NOT NULL), -1) AS last_paid_index,
			h.next_index - 1 - COALESCE(MAX(i.derivation_index) FILTER (WHERE p.intent_id IS NOT NULL), -1) AS gap
		FROM hd_indexes h
		LEFT JOIN payment_intents i ON i.network = h.network
		LEFT JOIN (SELECT DISTINCT intent_id FROM chain_payments WHERE state <> 'reverted') p ON p.intent_id = i.id
		GROUP BY h.network, h.next_index
		ORDER BY h.network`)
	if err != nil {
		return nil, fmt.Errorf("derivation uses: %w", err)
	}
	return out, nil
}
