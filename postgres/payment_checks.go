package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/kernodeck/kernodeck/domain"
)

// CheckPayments tells, for each claim of a batch of watcher signals,
// whether a watcher recorded that payment as claimed, and returns the
// payment request it names. It only reads.
func (db *DB) CheckPayments(ctx context.Context, claims []domain.PaymentClaim) ([]domain.PaymentCheck, error) {
	out := make([]domain.PaymentCheck, len(claims))
	for i, c := range claims {
		if !baseUnits(c.AmountBase) {
			continue // garbage: recorded by no watcher, and no query to fail on
		}
		var err error
		if c.Dust {
			err = db.GetContext(ctx, &out[i].Recorded, `SELECT EXISTS (SELECT 1 FROM chain_dust_summaries
				WHERE intent_id = $1 AND network = $2 AND version >= $3 AND amount_base >= $4::numeric)`,
				c.IntentID, c.Network, c.Version, c.AmountBase)
		} else {
			err = db.GetContext(ctx, &out[i].Recorded, `SELECT EXISTS (SELECT 1 FROM chain_payments
				WHERE network = $1 AND txid = $2 AND output_index = $3 AND asset = $4 AND intent_id = $5
					AND address = $6 AND amount_base = $7::numeric AND amount_cents = $8)`,
				c.Network, c.TxID, c.Index, c.Asset, c.IntentID, c.Address, c.AmountBase, c.AmountCents)
		}
		if err != nil {
			return nil, fmt.Errorf("check payment %s:%s:%d: %w", c.Network, c.TxID, c.Index, err)
		}
		it, err := db.Intent(ctx, c.IntentID)
		switch {
		case err == nil:
			out[i].Request = &it
		case !errors.Is(err, domain.ErrNotFound):
			return nil, err
		}
	}
	return out, nil
}

// baseUnits reports whether s is an amount in base units as the watchers
// write them: 1 to 78 decimal digits.
func baseUnits(s string) bool {
	if len(s) == 0 || len(s) > 78 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
