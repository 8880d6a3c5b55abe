package payments_test

import (
	"math/big"
	"net/url"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/payments"
)

// FuzzPaymentURI builds wallet links for arbitrary amounts, decimals and
// networks: the link parses, has the network's scheme, and its amount reads
// back as exactly the intent's amount (a wallet pays what the link says).
//
//	go test ./payments -run '^$' -fuzz '^FuzzPaymentURI$' -fuzztime 10m
func FuzzPaymentURI(f *testing.F) {
	f.Add(uint8(0), "36262", uint8(8), false)
	f.Add(uint8(1), "100000000", uint8(8), false)
	f.Add(uint8(2), "1000000000000000000", uint8(18), false)
	f.Add(uint8(2), "23570000", uint8(6), true)
	f.Add(uint8(3), "1", uint8(9), false)
	f.Add(uint8(0), "100", uint8(0), false)
	f.Add(uint8(4), "0", uint8(6), false)
	networks := []string{domain.NetworkBitcoin, domain.NetworkLitecoin, domain.NetworkEthereum, domain.NetworkSolana, domain.NetworkTron}
	const address = "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"
	f.Fuzz(func(t *testing.T, network uint8, digits string, decimals uint8, token bool) {
		amount, ok := new(big.Int).SetString(digits, 10)
		if !ok || amount.Sign() < 0 || decimals > 36 {
			return // amounts are positive base units; no asset has more than 18 decimals
		}
		in := domain.Intent{Network: networks[int(network)%len(networks)], Address: address, Decimals: int32(decimals), TargetRef: "KD-FUZZ"}
		in.AmountBase.Set(amount)
		if token {
			c := "0xdAC17F958D2ee523a2206206994597C13D831ec7"
			in.TokenContract = &c
		}
		uri := payments.PaymentURI(in, 1)
		if in.Network == domain.NetworkTron {
			if uri != address {
				t.Fatalf("tron: %q", uri)
			}
			return
		}
		u, err := url.Parse(uri)
		if err != nil || u.Scheme != in.Network {
			t.Fatalf("%q: %v", uri, err)
		}
		want := new(big.Rat).SetFrac(amount, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(decimals)), nil))
		var got string
		switch in.Network {
		case domain.NetworkEthereum:
			// EIP-681 carries base units.
			want = new(big.Rat).SetInt(amount)
			if token {
				got = u.Query().Get("uint256")
			} else {
				got = u.Query().Get("value")
			}
		default:
			got = u.Query().Get("amount")
		}
		r, ok := new(big.Rat).SetString(got)
		if !ok || r.Cmp(want) != 0 || strings.HasPrefix(got, ".") {
			t.Fatalf("%q: amount %q, want %s", uri, got, want.FloatString(int(decimals)))
		}
	})
}
