package rates

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// DefaultValueTolerance is how far support's value of a payment received
// in another asset may be from its amount at the rate observed when it came
// in: 2 % (KERNODECK_VALUE_TOLERANCE).
var DefaultValueTolerance = decimal.New(2, -2)

// maxValueTolerance bounds the configured tolerance: beyond half the value,
// the bound no longer protects anything.
var maxValueTolerance = decimal.New(5, -1)

// ValueWindow is how far from a payment's reception the rate observation
// that bounds its value may be: the nearest one within ±1 hour. The worker
// samples every asset well within it (DefaultSampleInterval).
const ValueWindow = time.Hour

// ParseTolerance reads a tolerance written as a percentage ("2%", "2 %",
// "0.5%") or as a fraction ("0.02"). It must be positive and at most 50 %;
// a bare number above 1 is refused rather than guessed ("2" is neither
// 2 % nor 200 %).
func ParseTolerance(s string) (decimal.Decimal, error) {
	text := strings.TrimSpace(s)
	percent := strings.HasSuffix(text, "%")
	text = strings.TrimSpace(strings.TrimSuffix(text, "%"))
	t, err := decimal.NewFromString(text)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("want a percentage (2%%) or a fraction (0.02), got %q", s)
	}
	if percent {
		t = t.Shift(-2)
	} else if t.GreaterThan(decimal.NewFromInt(1)) {
		return decimal.Decimal{}, fmt.Errorf("%q: write a percentage with %% (2%%) or a fraction (0.02)", s)
	}
	if t.Sign() <= 0 || t.GreaterThan(maxValueTolerance) {
		return decimal.Decimal{}, fmt.Errorf("%q: the tolerance must be above 0 and at most 50%%", s)
	}
	return t, nil
}

// ValueBounds is the range of USD cents amountBase base units of an asset
// with decimals decimals may be valued at, at rate USD per whole unit,
// within tolerance (a fraction): from floor(v × (1 − tolerance)) to
// ceil(v × (1 + tolerance)), v being the exact value in cents. Computed
// exactly (no float); saturates at math.MaxInt64.
func ValueBounds(amountBase *big.Int, decimals int32, rate, tolerance decimal.Decimal) (minCents, maxCents int64, err error) {
	if amountBase == nil || amountBase.Sign() < 0 {
		return 0, 0, fmt.Errorf("rates: amount %v must be positive", amountBase)
	}
	if rate.Sign() <= 0 {
		return 0, 0, fmt.Errorf("rates: rate must be positive, got %s", rate)
	}
	if decimals < 0 || decimals > maxDecimals {
		return 0, 0, fmt.Errorf("rates: decimals %d out of range 0..%d", decimals, maxDecimals)
	}
	if tolerance.Sign() < 0 || tolerance.GreaterThanOrEqual(decimal.NewFromInt(1)) {
		return 0, 0, fmt.Errorf("rates: tolerance %s out of range", tolerance)
	}
	cents := decimal.NewFromBigInt(amountBase, -decimals).Mul(rate).Shift(2)
	one := decimal.NewFromInt(1)
	return saturate(cents.Mul(one.Sub(tolerance)).Floor()), saturate(cents.Mul(one.Add(tolerance)).Ceil()), nil
}

// saturate is a whole decimal as int64, at most math.MaxInt64.
func saturate(d decimal.Decimal) int64 {
	b := d.BigInt()
	if !b.IsInt64() {
		return math.MaxInt64
	}
	return b.Int64()
}
