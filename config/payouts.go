package config

import (
	"fmt"
	"os"
	"strings"

	"github.com/kernodeck/kernodeck/domain"
)

// Payouts are the payouts' settings (issue 39, docs/payouts-operators.md).
type Payouts struct {
	Limits domain.PayoutLimits // KERNODECK_PAYOUT_MIN_CENTS, _DAILY_CENTS, _FEE_CENTS
	// FeeRates are the PSBTs' fee rates per network, base units per vbyte
	// (KERNODECK_PAYOUT_FEE_RATES: "bitcoin=5,litecoin=10").
	FeeRates map[string]int64
}

// PayoutsFromEnv reads the payouts' settings.
func PayoutsFromEnv(getenv func(string) string) (Payouts, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	p := parser{getenv: getenv}
	c := Payouts{
		Limits: domain.PayoutLimits{
			MinCents:   int64(p.int("KERNODECK_PAYOUT_MIN_CENTS", domain.DefaultPayoutMinCents)),
			DailyCents: int64(p.int("KERNODECK_PAYOUT_DAILY_CENTS", domain.DefaultPayoutDailyCents)),
			FeeCents:   p.perNetwork("KERNODECK_PAYOUT_FEE_CENTS", 0),
		},
		FeeRates: p.perNetwork("KERNODECK_PAYOUT_FEE_RATES", 1),
	}
	if c.Limits.MinCents < 1 || c.Limits.DailyCents < c.Limits.MinCents {
		p.fail("KERNODECK_PAYOUT_DAILY_CENTS", fmt.Errorf("want a minimum of at least 1 cent and a daily limit above it"))
	}
	if p.err != nil {
		return Payouts{}, p.err
	}
	return c, nil
}

// perNetwork reads "network=n" pairs of a known network, each at least min.
func (p *parser) perNetwork(key string, min int64) map[string]int64 {
	out := map[string]int64{}
	for _, kv := range p.list(key) {
		k, v, ok := strings.Cut(kv, "=")
		var n int64
		_, known := domain.DefaultPayoutFeeCents[k]
		if _, err := fmt.Sscan(v, &n); !ok || err != nil || n < min || !known {
			p.fail(key, fmt.Errorf("want network=number pairs (bitcoin, litecoin, ethereum, tron, solana; at least %d), got %q", min, kv))
			return out
		}
		out[k] = n
	}
	return out
}
