package rates

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// StaticSourceName is the Source of every rate Static returns, so that a
// payment request priced on configured rates says so.
const StaticSourceName = "static"

// Static serves rates fixed in the configuration, for development and tests
// where no exchange is reachable. Its rates are reported as current at each
// call: the operator who configured them vouches for them, and Fresh must
// not expire a local setup after a few minutes.
type Static struct {
	rates map[string]decimal.Decimal
	now   func() time.Time
}

// ParseStatic parses "BTC=65000.12,ETH=3000,USDT=1" (USD per whole unit,
// whitespace allowed around items). Every rate must be a positive decimal and
// every asset appear once: a typo must fail at startup, not price an order.
// now is the clock used for Rate.At; nil means time.Now.
func ParseStatic(spec string, now func() time.Time) (*Static, error) {
	if now == nil {
		now = time.Now
	}
	s := &Static{rates: map[string]decimal.Decimal{}, now: now}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		asset, value, ok := strings.Cut(item, "=")
		asset = normalizeAsset(asset)
		if !ok || asset == "" {
			return nil, fmt.Errorf("rates: static rate %q: want ASSET=USD_PER_UNIT", item)
		}
		rate, err := decimal.NewFromString(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("rates: static rate for %s: %v", asset, err)
		}
		if rate.Sign() <= 0 {
			return nil, fmt.Errorf("rates: static rate for %s must be positive, got %s", asset, rate)
		}
		if _, dup := s.rates[asset]; dup {
			return nil, fmt.Errorf("rates: static rate for %s given twice", asset)
		}
		s.rates[asset] = rate
	}
	if len(s.rates) == 0 {
		return nil, fmt.Errorf("rates: no static rate in %q", spec)
	}
	return s, nil
}

// Rate returns the configured rate of asset, dated now.
func (s *Static) Rate(_ context.Context, asset string) (Rate, error) {
	asset = normalizeAsset(asset)
	r, ok := s.rates[asset]
	if !ok {
		return Rate{}, fmt.Errorf("%w: no static rate for %q", ErrUnknownAsset, asset)
	}
	return Rate{Asset: asset, USDPerUnit: r, Source: StaticSourceName, At: s.now()}, nil
}
