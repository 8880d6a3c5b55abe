package postgres

import "testing"

// A payment's amount is shown in its own asset's units, not its
// request's: 5 USDT sent to an ETH request's address (6 decimals, not 18).
func TestInUnitsUsesThePaymentsAsset(t *testing.T) {
	for _, tc := range []struct {
		base, asset, network string
		requestDecimals      int32
		want                 string
	}{
		{"5000000", "USDT", "ethereum", 18, "5.000000"},
		{"150000", "BTC", "bitcoin", 8, "0.00150000"},
		{"42", "XYZ", "nowhere", 2, "0.42"}, // unknown: the request's
		{"not-a-number", "BTC", "bitcoin", 8, "not-a-number"},
	} {
		if got := inUnits(tc.base, tc.asset, tc.network, tc.requestDecimals); got != tc.want {
			t.Errorf("inUnits(%s %s on %s) = %q, want %q", tc.base, tc.asset, tc.network, got, tc.want)
		}
	}
}
