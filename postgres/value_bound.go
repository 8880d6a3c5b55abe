package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/shopspring/decimal"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/rates"
)

func (db *DB) tolerance() decimal.Decimal {
	if db.valueTolerance.Sign() <= 0 {
		return rates.DefaultValueTolerance
	}
	return db.valueTolerance
}

// ValueBound is the range support may value queued amount exceptionID at
// (an amount received in another asset): its amount at the rate observed
// nearest to its reception within rates.ValueWindow, give or take the
// tolerance. Known is false when no rate of its asset was observed in the
// window (or its asset's decimals are unknown).
func (db *DB) ValueBound(ctx context.Context, exceptionID int64) (domain.ValueBound, error) {
	return valueBound(ctx, db.DB, exceptionID, db.tolerance())
}

// valueBound reads ValueBound with q (the caller's transaction in
// ValueException, where the row is already locked).
func valueBound(ctx context.Context, q sqlx.QueryerContext, exceptionID int64, tolerance decimal.Decimal) (domain.ValueBound, error) {
	var x struct {
		Asset      string    `db:"asset"`
		Network    string    `db:"network"`
		AmountBase string    `db:"amount_base"`
		ReceivedAt time.Time `db:"received_at"`
	}
	// Received when the watcher first saw it, or at its block's time when
	// that is earlier (a watcher that was stopped); the queued row's
	// creation when its chain payment is not found.
	if err := sqlx.GetContext(ctx, q, &x, `
		SELECT x.asset, x.network, x.amount_base,
			COALESCE((SELECT LEAST(p.seen_at, p.block_time) FROM chain_payments p
				WHERE p.network = x.network AND p.txid = x.txid
					AND p.network || ':' || p.txid || ':' || p.output_index = x.payment_key), x.created_at) AS received_at
		FROM payment_exceptions x WHERE x.id = $1`, exceptionID); err != nil {
		return domain.ValueBound{}, fmt.Errorf("exception %d: %w", exceptionID, notFound(err))
	}
	b := domain.ValueBound{Asset: x.Asset, AmountBase: x.AmountBase, ReceivedAt: x.ReceivedAt, Tolerance: tolerance.String()}
	m, ok := domain.LookupMethod(x.Asset, x.Network)
	amount, okAmount := new(big.Int).SetString(x.AmountBase, 10)
	if !ok || !okAmount {
		return b, nil
	}
	b.Decimals = m.Decimals
	var r struct {
		Rate       string    `db:"usd_per_unit"`
		Source     string    `db:"source"`
		ObservedAt time.Time `db:"observed_at"`
	}
	// The last observation at or before the reception and the first after
	// it (each one index probe), the nearer of the two.
	err := sqlx.GetContext(ctx, q, &r, `
		SELECT usd_per_unit::text AS usd_per_unit, source, observed_at FROM (
			(SELECT usd_per_unit, source, observed_at FROM asset_rates
			 WHERE asset = $1 AND observed_at <= $2::timestamptz AND observed_at >= $3::timestamptz
			 ORDER BY observed_at DESC LIMIT 1)
			UNION ALL
			(SELECT usd_per_unit, source, observed_at FROM asset_rates
			 WHERE asset = $1 AND observed_at > $2::timestamptz AND observed_at <= $4::timestamptz
			 ORDER BY observed_at LIMIT 1)) r
		ORDER BY abs(extract(epoch FROM r.observed_at - $2::timestamptz)), r.observed_at LIMIT 1`,
		x.Asset, x.ReceivedAt, x.ReceivedAt.Add(-rates.ValueWindow), x.ReceivedAt.Add(rates.ValueWindow))
	if errors.Is(err, sql.ErrNoRows) {
		return b, nil
	}
	if err != nil {
		return b, fmt.Errorf("rate of %s near %s: %w", x.Asset, x.ReceivedAt, err)
	}
	rate, err := decimal.NewFromString(r.Rate)
	if err != nil {
		return b, fmt.Errorf("rate of %s: %w", x.Asset, err)
	}
	if b.MinCents, b.MaxCents, err = rates.ValueBounds(amount, m.Decimals, rate, tolerance); err != nil {
		return b, err
	}
	b.Known, b.Rate, b.RateSource, b.ObservedAt = true, r.Rate, r.Source, r.ObservedAt
	return b, nil
}

// checkValue refuses a value of support outside b (see
// domain.ExceptionValue), in French, saying the range and the rate.
func checkValue(b domain.ValueBound, v domain.ExceptionValue) error {
	if v.AmountCents == 0 {
		return nil // sent back on chain: nothing owed
	}
	received := b.ReceivedAt.UTC().Format(frenchTime)
	if !b.Known {
		if v.Approved {
			return nil
		}
		return domain.Errorf(domain.ECodeValueUnbounded,
			"Aucun cours de %s n'a été relevé entre le %s et le %s (%s avant et après la réception du paiement, le %s) : la valeur doit être approuvée par un second agent. Rien n'a été modifié.",
			b.Asset, b.ReceivedAt.Add(-rates.ValueWindow).UTC().Format(frenchTime), b.ReceivedAt.Add(rates.ValueWindow).UTC().Format(frenchTime),
			formatWindow(rates.ValueWindow), received)
	}
	if b.Allows(v.AmountCents) {
		return nil
	}
	amount := b.AmountBase
	if n, ok := new(big.Int).SetString(b.AmountBase, 10); ok {
		amount = domain.FormatUnits(n, b.Decimals)
	}
	tol, _ := decimal.NewFromString(b.Tolerance)
	return domain.Errorf(domain.ECodeValueOutOfBounds,
		"Valeur refusée : %s %s reçus le %s valent de %s à %s USD au cours de %s USD par %s (%s, observé le %s, tolérance %s %%), pas %s USD. Rien n'a été modifié.",
		amount, b.Asset, received, domain.FormatUSD(b.MinCents), domain.FormatUSD(b.MaxCents), b.Rate, b.Asset,
		b.RateSource, b.ObservedAt.UTC().Format(frenchTime), tol.Shift(2).String(), domain.FormatUSD(v.AmountCents))
}

// frenchTime is how the messages date a reception and a rate.
const frenchTime = "02/01/2006 15:04 UTC"

// formatWindow says a window shortly ("1 h", "30 min").
func formatWindow(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%d h", int(d/time.Hour))
	}
	return fmt.Sprintf("%d min", int(d/time.Minute))
}
