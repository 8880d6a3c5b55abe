package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/kernodeck/kernodeck/rates"
)

// RecordRate keeps a rate observed (asset_rates): what a quote fetched
// (rates.Recorder) or the worker sampled (rates.Sampler). A rate without a
// time is dated now.
func (db *DB) RecordRate(ctx context.Context, r rates.Rate) error {
	at := r.At
	if at.IsZero() {
		at = time.Now()
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO asset_rates (asset, usd_per_unit, source, observed_at)
		VALUES ($1, $2::numeric, $3, $4)`, strings.ToUpper(strings.TrimSpace(r.Asset)), r.USDPerUnit.String(), r.Source, at); err != nil {
		return fmt.Errorf("record %s rate: %w", r.Asset, err)
	}
	return nil
}

// SetValueTolerance sets how far support's value of a payment received in
// another asset may be from its amount at the rate of its reception
// (KERNODECK_VALUE_TOLERANCE, a positive fraction; unset:
// rates.DefaultValueTolerance). Set once at startup, before any use.
func (db *DB) SetValueTolerance(t decimal.Decimal) { db.valueTolerance = t }
