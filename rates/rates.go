// Package rates provides USD exchange rates for the payment assets and the
// exact conversions between USD cents and an asset's base units.
//
// Money never goes through floating point: USD is in integer cents, crypto in
// integer base units, and a rate is a decimal read from its text form. An
// amount asked from a customer is rounded UP to the next base unit, so that
// paying it exactly never leaves the shop short of the USD total.
package rates

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// Rate is the price of one whole unit of Asset (1 BTC, 1 ETH, 1 USDT...) in
// USD, as reported by Source at At. Payment requests store all four fields so
// that the amount asked can be explained later.
type Rate struct {
	Asset      string
	USDPerUnit decimal.Decimal
	Source     string
	At         time.Time
}

// Source gives the current rate of an asset. Implementations return an
// error wrapping ErrUnknownAsset for an asset they do not price.
type Source interface {
	Rate(ctx context.Context, asset string) (Rate, error)
}

// ErrUnknownAsset means the source has no price for the asset: creating a
// payment request in that asset must fail rather than guess.
var ErrUnknownAsset = errors.New("rates: unknown asset")

// ErrStale means the rate is older than the caller accepts. A quote based on
// an old price would let a customer pay the shop at yesterday's rate.
var ErrStale = errors.New("rates: rate too old")

// StaleError reports a rate refused by Fresh. It matches ErrStale with
// errors.Is, and keeps the details for the message shown to support.
type StaleError struct {
	Rate   Rate
	Age    time.Duration
	MaxAge time.Duration
}

// Error describes the refused rate.
func (e *StaleError) Error() string {
	switch {
	case e.Rate.At.IsZero():
		return fmt.Sprintf("rates: %s rate from %s carries no time, so its age is unknown", e.Rate.Asset, e.Rate.Source)
	case e.MaxAge <= 0:
		return fmt.Sprintf("rates: no maximum rate age configured, so no %s rate is fresh enough", e.Rate.Asset)
	}
	return fmt.Sprintf("rates: %s rate from %s is %s old (at %s), more than the %s allowed",
		e.Rate.Asset, e.Rate.Source, e.Age.Round(time.Second), e.Rate.At.UTC().Format(time.RFC3339), e.MaxAge)
}

// Is makes errors.Is(err, ErrStale) true for a *StaleError.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Fresh wraps a Source and refuses rates older than MaxAge, so that a payment
// request is never priced on a feed that silently stopped updating.
type Fresh struct {
	Source Source
	MaxAge time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Rate returns the wrapped source's rate if it is at most MaxAge old. A rate
// without a time, or any rate when MaxAge is not positive, is stale: the
// safe reading of a missing or broken freshness policy.
func (f Fresh) Rate(ctx context.Context, asset string) (Rate, error) {
	if f.Source == nil {
		return Rate{}, errors.New("rates: Fresh has no source")
	}
	r, err := f.Source.Rate(ctx, asset)
	if err != nil {
		return Rate{}, err
	}
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	age := now().Sub(r.At)
	if age < 0 {
		// A source clock slightly ahead of ours: the rate is as new as it gets.
		age = 0
	}
	if r.At.IsZero() || f.MaxAge <= 0 || age > f.MaxAge {
		return Rate{}, &StaleError{Rate: r, Age: age, MaxAge: f.MaxAge}
	}
	return r, nil
}

// normalizeAsset gives the canonical ticker ("btc " -> "BTC").
func normalizeAsset(asset string) string {
	return strings.ToUpper(strings.TrimSpace(asset))
}

// maxDecimals bounds the decimals argument: the largest payment asset has
// 18 (ETH); anything far beyond is a bug, not an asset.
const maxDecimals = 36

// AmountBase returns the amount of base units (satoshi, wei, sun...) worth
// usdCents at rate USD per whole unit of an asset with decimals decimals:
// ceil(usdCents/100 / rate * 10^decimals), computed exactly. Rounding up
// guarantees that paying the amount covers the USD total; rounding down
// would make every exact payment an underpayment by up to one base unit.
func AmountBase(usdCents int64, rate decimal.Decimal, decimals int32) (*big.Int, error) {
	if usdCents < 0 {
		return nil, fmt.Errorf("rates: negative USD amount %d cents", usdCents)
	}
	if rate.Sign() <= 0 {
		return nil, fmt.Errorf("rates: rate must be positive, got %s", rate)
	}
	if decimals < 0 || decimals > maxDecimals {
		return nil, fmt.Errorf("rates: decimals %d out of range 0..%d", decimals, maxDecimals)
	}
	// rate = coef * 10^exp, so amount = usdCents * 10^(decimals-exp) / (100*coef).
	num := big.NewInt(usdCents)
	den := new(big.Int).Mul(rate.Coefficient(), big.NewInt(100))
	if shift := int64(decimals) - int64(rate.Exponent()); shift >= 0 {
		num.Mul(num, pow10(shift))
	} else {
		den.Mul(den, pow10(-shift))
	}
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q, nil
}

func pow10(n int64) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(n), nil)
}

// CentsOf values amountBase (for example a part-payment) at the price of its
// payment request, which asked intentAmountBase for intentCents:
// floor(amountBase * intentCents / intentAmountBase). Rounding down never
// credits a customer more than was received. It returns 0 when either amount
// is not positive, and saturates at math.MaxInt64.
func CentsOf(amountBase, intentAmountBase *big.Int, intentCents int64) int64 {
	if amountBase == nil || intentAmountBase == nil || amountBase.Sign() <= 0 || intentAmountBase.Sign() <= 0 || intentCents <= 0 {
		return 0
	}
	v := new(big.Int).Mul(amountBase, big.NewInt(intentCents))
	v.Quo(v, intentAmountBase)
	if !v.IsInt64() {
		return math.MaxInt64
	}
	return v.Int64()
}
