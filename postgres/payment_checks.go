package postgres

import (
	"context"
	"fmt"

	"github.com/lib/pq"

	"github.com/kernodeck/kernodeck/domain"
)

// CheckPayments tells, for each claim of a batch of watcher signals,
// whether a watcher recorded that payment as claimed, and returns the
// payment request it names. It only reads: three statements per batch
// (payments, dust summaries, requests), whatever its size.
func (db *DB) CheckPayments(ctx context.Context, claims []domain.PaymentClaim) ([]domain.PaymentCheck, error) {
	type key struct {
		network, txid string
		index         int64
	}
	var nets, txids, intentIDs, dustIntents []string
	var idx []int64
	for _, c := range claims {
		intentIDs = append(intentIDs, c.IntentID)
		if c.Dust {
			dustIntents = append(dustIntents, c.IntentID)
		} else {
			nets, txids, idx = append(nets, c.Network), append(txids, c.TxID), append(idx, c.Index)
		}
	}
	var rows []struct {
		Network string `db:"network"`
		TxID    string `db:"txid"`
		Index   int64  `db:"output_index"`
		Asset   string `db:"asset"`
		Intent  string `db:"intent_id"`
		Address string `db:"address"`
		Base    string `db:"amount_base"`
		Cents   int64  `db:"amount_cents"`
	}
	if len(nets) > 0 {
		if err := db.SelectContext(ctx, &rows, `
			SELECT p.network, p.txid, p.output_index, p.asset, p.intent_id, p.address, p.amount_base::text AS amount_base, p.amount_cents
			FROM chain_payments p JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS k(network, txid, output_index)
				USING (network, txid, output_index)`, pq.Array(nets), pq.Array(txids), pq.Array(idx)); err != nil {
			return nil, fmt.Errorf("check payments: %w", err)
		}
	}
	payments := make(map[key]domain.PaymentClaim, len(rows))
	for _, r := range rows {
		payments[key{r.Network, r.TxID, r.Index}] = domain.PaymentClaim{Network: r.Network, TxID: r.TxID, Index: r.Index,
			Asset: r.Asset, IntentID: r.Intent, Address: r.Address, AmountBase: r.Base, AmountCents: r.Cents}
	}
	var dustRows []struct {
		Intent  string `db:"intent_id"`
		Network string `db:"network"`
		Base    string `db:"amount_base"`
		Version int64  `db:"version"`
	}
	if len(dustIntents) > 0 {
		if err := db.SelectContext(ctx, &dustRows, `SELECT intent_id, network, amount_base::text AS amount_base, version
			FROM chain_dust_summaries WHERE intent_id = ANY($1)`, pq.Array(dustIntents)); err != nil {
			return nil, fmt.Errorf("check dust summaries: %w", err)
		}
	}
	dust := make(map[string]domain.PaymentClaim, len(dustRows))
	for _, r := range dustRows {
		dust[r.Intent] = domain.PaymentClaim{Network: r.Network, IntentID: r.Intent, AmountBase: r.Base, Version: r.Version}
	}
	var intents []domain.Intent
	if err := db.SelectContext(ctx, &intents, `SELECT `+intentColumns+` FROM payment_intents WHERE id = ANY($1)`,
		pq.Array(intentIDs)); err != nil {
		return nil, fmt.Errorf("check payments' requests: %w", err)
	}
	byID := make(map[string]domain.Intent, len(intents))
	for _, it := range intents {
		byID[it.ID] = it
	}

	out := make([]domain.PaymentCheck, len(claims))
	for i, c := range claims {
		if it, ok := byID[c.IntentID]; ok {
			out[i].Request = &it
		}
		if !baseUnits(c.AmountBase) {
			continue // garbage: recorded by no watcher
		}
		if c.Dust {
			d, ok := dust[c.IntentID]
			out[i].Recorded = ok && d.Network == c.Network && d.Version >= c.Version && !lessUnits(d.AmountBase, c.AmountBase)
			continue
		}
		p, ok := payments[key{c.Network, c.TxID, c.Index}]
		out[i].Recorded = ok && p.Asset == c.Asset && p.IntentID == c.IntentID && p.Address == c.Address &&
			p.AmountBase == c.AmountBase && p.AmountCents == c.AmountCents
	}
	return out, nil
}

// baseUnits reports whether s is an amount in base units as the watchers
// write them: 1 to 78 decimal digits, no leading zero.
func baseUnits(s string) bool {
	if len(s) == 0 || len(s) > 78 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// lessUnits compares two amounts in base units (baseUnits).
func lessUnits(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
