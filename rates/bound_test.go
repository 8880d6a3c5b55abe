package rates_test

import (
	"math"
	"math/big"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/kernodeck/kernodeck/rates"
)

// The tolerance is a percentage or a fraction, above 0 and at most 50 %;
// a bare number above 1 is refused rather than guessed.
func TestParseTolerance(t *testing.T) {
	for in, want := range map[string]string{"2%": "0.02", " 2 % ": "0.02", "0.5%": "0.005", "0.02": "0.02", "50%": "0.5", "1%": "0.01"} {
		got, err := rates.ParseTolerance(in)
		if err != nil || !got.Equal(decimal.RequireFromString(want)) {
			t.Errorf("%q: %s %v, want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "2", "0", "0%", "-1%", "51%", "0.6", "abc", "2%%", "1e400%"} {
		if got, err := rates.ParseTolerance(in); err == nil {
			t.Errorf("%q accepted as %s", in, got)
		}
	}
}

// A value's bounds are the exact value in cents of the amount at the rate,
// less and plus the tolerance, rounded outward, with the asset's decimals.
func TestValueBounds(t *testing.T) {
	two := decimal.RequireFromString("0.02")
	for _, c := range []struct {
		units    string
		decimals int32
		rate     string
		min, max int64
	}{
		{"5000000", 6, "1", 490, 510},                  // 5 USDT
		{"1", 6, "1", 0, 1},                            // 1 base unit of USDT: at most a cent
		{"10000000000000000", 18, "3000", 2940, 3060},  // 0.01 ETH
		{"100000000", 8, "65000.12", 6370011, 6630013}, // 1 BTC: 6,500,012 cents ± 2 %
		{"36262", 8, "65000", 2309, 2405},              // 23.57 USD of BTC (2,357.03 cents)
		{"1000000", 6, "0.25", 24, 26},                 // 1 TRX
	} {
		n, _ := new(big.Int).SetString(c.units, 10)
		lo, hi, err := rates.ValueBounds(n, c.decimals, decimal.RequireFromString(c.rate), two)
		if err != nil || lo != c.min || hi != c.max {
			t.Errorf("%s base units (%d decimals) at %s: %d..%d %v, want %d..%d", c.units, c.decimals, c.rate, lo, hi, err, c.min, c.max)
		}
	}
	huge, _ := new(big.Int).SetString("1000000000000000000000000000000000000000", 10)
	if _, hi, err := rates.ValueBounds(huge, 0, decimal.NewFromInt(1), two); err != nil || hi != math.MaxInt64 {
		t.Errorf("huge: %d %v, want saturated", hi, err)
	}
	for _, bad := range []struct {
		rate, tol string
		decimals  int32
	}{{"0", "0.02", 6}, {"-1", "0.02", 6}, {"1", "1", 6}, {"1", "-0.01", 6}, {"1", "0.02", -1}, {"1", "0.02", 40}} {
		if _, _, err := rates.ValueBounds(big.NewInt(1), bad.decimals, decimal.RequireFromString(bad.rate), decimal.RequireFromString(bad.tol)); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
