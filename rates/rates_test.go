package rates_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/kernodeck/kernodeck/rates"
)

func readCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

func TestParseStatic(t *testing.T) {
	s, err := rates.ParseStatic(" BTC=65000.12, eth = 3000 ,USDT=1,USDC=1.0001,", clock)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"BTC": "65000.12", "ETH": "3000", "USDT": "1", "USDC": "1.0001", "usdc": "1.0001"}
	for asset, price := range want {
		r, err := s.Rate(context.Background(), asset)
		if err != nil {
			t.Fatalf("%s: %v", asset, err)
		}
		if !r.USDPerUnit.Equal(decimal.RequireFromString(price)) || r.Source != "static" || !r.At.Equal(fixedNow) {
			t.Errorf("%s: %+v", asset, r)
		}
	}
	if _, err := s.Rate(context.Background(), "SOL"); !errors.Is(err, rates.ErrUnknownAsset) {
		t.Errorf("SOL: err = %v, want ErrUnknownAsset", err)
	}

	for _, bad := range []string{"", " , ", "BTC", "BTC=", "=5", "BTC=abc", "BTC=0", "BTC=-1", "BTC=1,btc=2", "BTC=1e", "BTC=0x10"} {
		if _, err := rates.ParseStatic(bad, clock); err == nil {
			t.Errorf("ParseStatic(%q) accepted", bad)
		}
	}

	// A nil clock means time.Now.
	s, err = rates.ParseStatic("LTC=80", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Rate(context.Background(), "LTC"); time.Since(r.At) > time.Minute {
		t.Errorf("At = %s, want now", r.At)
	}
}

// sourceFunc adapts a function to rates.Source.
type sourceFunc func(ctx context.Context, asset string) (rates.Rate, error)

func (f sourceFunc) Rate(ctx context.Context, asset string) (rates.Rate, error) { return f(ctx, asset) }

func TestFresh(t *testing.T) {
	at := func(when time.Time) rates.Source {
		return sourceFunc(func(_ context.Context, asset string) (rates.Rate, error) {
			return rates.Rate{Asset: asset, USDPerUnit: decimal.NewFromInt(3000), Source: "test", At: when}, nil
		})
	}
	ago := func(d time.Duration) time.Time { return fixedNow.Add(-d) }
	cases := []struct {
		name   string
		src    rates.Source
		maxAge time.Duration
		stale  bool
	}{
		{"new", at(ago(time.Second)), 5 * time.Minute, false},
		{"exactly max age", at(ago(5 * time.Minute)), 5 * time.Minute, false},
		{"just too old", at(ago(5*time.Minute + time.Nanosecond)), 5 * time.Minute, true},
		{"hours old", at(ago(3 * time.Hour)), 5 * time.Minute, true},
		{"from the near future", at(ago(-2 * time.Second)), 5 * time.Minute, false},
		{"no time", at(time.Time{}), 5 * time.Minute, true},
		{"no max age", at(ago(time.Second)), 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := rates.Fresh{Source: c.src, MaxAge: c.maxAge, Now: clock}.Rate(context.Background(), "ETH")
			if !c.stale {
				if err != nil || r.Asset != "ETH" {
					t.Fatalf("Rate = %+v, %v", r, err)
				}
				return
			}
			if !errors.Is(err, rates.ErrStale) {
				t.Fatalf("err = %v, want ErrStale", err)
			}
			var se *rates.StaleError
			if !errors.As(err, &se) || se.Rate.Asset != "ETH" || se.MaxAge != c.maxAge {
				t.Fatalf("err = %#v, want a *StaleError with details", err)
			}
			if r != (rates.Rate{}) {
				t.Fatalf("a stale rate was returned: %+v", r)
			}
		})
	}

	// Errors of the wrapped source pass through unchanged.
	static, err := rates.ParseStatic("BTC=65000", clock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (rates.Fresh{Source: static, MaxAge: time.Minute, Now: clock}).Rate(context.Background(), "XMR"); !errors.Is(err, rates.ErrUnknownAsset) {
		t.Errorf("err = %v, want ErrUnknownAsset", err)
	}
	if _, err := (rates.Fresh{MaxAge: time.Minute}).Rate(context.Background(), "BTC"); err == nil {
		t.Error("Fresh without a source returned a rate")
	}
	// Static rates stay fresh however long the process runs.
	later := func() time.Time { return fixedNow.Add(72 * time.Hour) }
	static, _ = rates.ParseStatic("BTC=65000", later)
	if _, err := (rates.Fresh{Source: static, MaxAge: time.Minute, Now: later}).Rate(context.Background(), "BTC"); err != nil {
		t.Errorf("static rate went stale: %v", err)
	}
}

func TestAmountBase(t *testing.T) {
	cases := []struct {
		cents    int64
		rate     string
		decimals int32
		want     string
	}{
		{2357, "65000.12", 8, "36262"},             // RTX A5000, 3 days, in BTC: 36261.4... rounded up
		{5500, "1", 6, "55000000"},                 // exact: no rounding
		{5500, "0.99967", 6, "55018156"},           // USDT slightly below the dollar
		{2357, "3000", 18, "7856666666666667"},     // ETH: 7856666666666666.67 rounded up
		{10000, "0.1234567891234", 6, "810000007"}, // TRX, long rate
		{100, "3", 0, "1"},                         // 1/3 of a unit rounds up to 1
		{1, "30303.2", 8, "33"},                    // one cent
		{1000000, "126.23", 8, "7922047057"},       // LTC, 10000 USD top-up
		{5500, "1e5", 8, "55000"},                  // positive exponent
		{0, "65000", 8, "0"},                       // nothing to pay
		{math.MaxInt64, "0.000001", 18, "9223372036854775807" + "0000000000000000000000"}, // no overflow: cents * 10^22
	}
	for _, c := range cases {
		got, err := rates.AmountBase(c.cents, decimal.RequireFromString(c.rate), c.decimals)
		if err != nil {
			t.Errorf("AmountBase(%d, %s, %d): %v", c.cents, c.rate, c.decimals, err)
			continue
		}
		if got.String() != c.want {
			t.Errorf("AmountBase(%d, %s, %d) = %s, want %s", c.cents, c.rate, c.decimals, got, c.want)
		}
	}
	bad := []struct {
		cents    int64
		rate     decimal.Decimal
		decimals int32
	}{
		{100, decimal.Zero, 8},
		{100, decimal.RequireFromString("-65000"), 8},
		{-1, decimal.NewFromInt(65000), 8},
		{100, decimal.NewFromInt(65000), -1},
		{100, decimal.NewFromInt(65000), 1000},
	}
	for _, c := range bad {
		if got, err := rates.AmountBase(c.cents, c.rate, c.decimals); err == nil {
			t.Errorf("AmountBase(%d, %s, %d) = %s, want an error", c.cents, c.rate, c.decimals, got)
		}
	}
}

// TestAmountBaseProperty checks on random inputs that the amount asked covers
// the USD total (amount * rate / 10^d >= cents/100) and that one base unit
// less does not, and that CentsOf values the exact amount at the full price
// and one unit less below it.
func TestAmountBaseProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260504, 84))
	decimalsChoice := []int32{0, 2, 6, 8, 9, 18}
	for i := 0; i < 20000; i++ {
		cents := rng.Int64N(1_000_000_000) + 1
		if i%10 == 0 {
			cents = rng.Int64N(100) + 1 // small amounts, where rounding matters most
		}
		rate := decimal.New(rng.Int64N(1_000_000_000_000)+1, -rng.Int32N(16)+3)
		d := decimalsChoice[rng.IntN(len(decimalsChoice))]

		amount, err := rates.AmountBase(cents, rate, d)
		if err != nil {
			t.Fatalf("AmountBase(%d, %s, %d): %v", cents, rate, d, err)
		}
		total := new(big.Rat).SetFrac64(cents, 100)
		value := func(units *big.Int) *big.Rat {
			v := new(big.Rat).SetInt(units)
			v.Mul(v, rate.Rat())
			return v.Quo(v, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d)), nil)))
		}
		if value(amount).Cmp(total) < 0 {
			t.Fatalf("AmountBase(%d, %s, %d) = %s is short of %s USD", cents, rate, d, amount, total.FloatString(2))
		}
		if amount.Sign() <= 0 {
			t.Fatalf("AmountBase(%d, %s, %d) = %s for a positive total", cents, rate, d, amount)
		}
		less := new(big.Int).Sub(amount, big.NewInt(1))
		if value(less).Cmp(total) >= 0 {
			t.Fatalf("AmountBase(%d, %s, %d) = %s, but %s already covers %s USD", cents, rate, d, amount, less, total.FloatString(2))
		}
		if got := rates.CentsOf(amount, amount, cents); got != cents {
			t.Fatalf("CentsOf(amount, amount, %d) = %d", cents, got)
		}
		if got := rates.CentsOf(less, amount, cents); got >= cents {
			t.Fatalf("CentsOf(amount-1, amount, %d) = %d, want less", cents, got)
		}
	}
}

func TestCentsOf(t *testing.T) {
	b := func(s string) *big.Int {
		v, ok := new(big.Int).SetString(s, 10)
		if !ok {
			t.Fatalf("bad number %q", s)
		}
		return v
	}
	cases := []struct {
		name           string
		amount, intent *big.Int
		cents          int64
		want           int64
	}{
		{"all of it", b("36262"), b("36262"), 2357, 2357},
		{"half", b("18131"), b("36262"), 2357, 1178}, // 1178.5 rounded down
		{"one unit", b("1"), b("36262"), 2357, 0},
		{"overpaid", b("72524"), b("36262"), 2357, 4714},
		{"wei", b("3928333333333333"), b("7856666666666667"), 2357, 1178},
		{"nothing", b("0"), b("36262"), 2357, 0},
		{"negative", b("-5"), b("36262"), 2357, 0},
		{"zero intent", b("5"), b("0"), 2357, 0},
		{"nil amount", nil, b("36262"), 2357, 0},
		{"nil intent", b("5"), nil, 2357, 0},
		{"saturates", b("1000000000000000000000000"), b("1"), 100, math.MaxInt64},
	}
	for _, c := range cases {
		if got := rates.CentsOf(c.amount, c.intent, c.cents); got != c.want {
			t.Errorf("%s: CentsOf = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestStaleErrorMessage(t *testing.T) {
	r := rates.Rate{Asset: "BTC", Source: "kraken", At: fixedNow.Add(-10 * time.Minute)}
	for _, c := range []struct {
		err  *rates.StaleError
		want string
	}{
		{&rates.StaleError{Rate: r, Age: 10 * time.Minute, MaxAge: 5 * time.Minute}, "rates: BTC rate from kraken is 10m0s old (at 2026-05-04T11:50:00Z), more than the 5m0s allowed"},
		{&rates.StaleError{Rate: rates.Rate{Asset: "BTC", Source: "kraken"}, MaxAge: time.Minute}, "rates: BTC rate from kraken carries no time, so its age is unknown"},
		{&rates.StaleError{Rate: r}, "rates: no maximum rate age configured, so no BTC rate is fresh enough"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}
