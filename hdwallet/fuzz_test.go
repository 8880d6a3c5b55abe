package hdwallet_test

import (
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/hdwallet"
)

// FuzzDerive parses arbitrary extended keys for every network and derives
// an address at an arbitrary index: a key is refused or gives an address
// that its own network validates, the same one twice (deposit addresses
// must be reproducible), and a private key is never accepted.
//
//	go test ./hdwallet -run '^$' -fuzz '^FuzzDerive$' -fuzztime 10m
func FuzzDerive(f *testing.F) {
	networks := []hdwallet.Network{hdwallet.Bitcoin, hdwallet.BitcoinTestnet, hdwallet.BitcoinRegtest,
		hdwallet.Litecoin, hdwallet.LitecoinTestnet, hdwallet.LitecoinRegtest, hdwallet.Ethereum, hdwallet.Tron}
	for i, k := range []string{bip84Zpub, ltcZpub,
		"xpub6D4BDPcP2GT577Vvch3R8wDkScZWzQzMMUm3PWbmWvVJrZwQY4VUNgqFJPMM3No2dFDFGTsxxpG5uJh7n7epu4trkrX7x7DogT5Uv6fcLW5",
		"xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi",
		"zpub", ""} {
		for j := range networks {
			if (i+j)%2 == 0 {
				f.Add(uint8(j), k, uint32(i*7))
			}
		}
	}
	f.Add(uint8(0), bip84Zpub, uint32(1<<31))
	f.Fuzz(func(t *testing.T, network uint8, key string, index uint32) {
		n := networks[int(network)%len(networks)]
		acc, err := hdwallet.ParseAccountKey(n, key)
		if err != nil {
			return
		}
		for _, private := range []string{"xprv", "yprv", "zprv", "tprv", "uprv", "vprv", "Ltpv", "Mtpv"} {
			if strings.HasPrefix(strings.TrimSpace(key), private) {
				t.Fatalf("%s: private key accepted: %q", n, key)
			}
		}
		addr, err := acc.Address(index)
		if err != nil {
			return // hardened index or an invalid child: refused, not panicked
		}
		if err := hdwallet.ValidateAddress(n, addr); err != nil {
			t.Fatalf("%s key %q index %d: derived %q which %s refuses: %v", n, key, index, addr, n, err)
		}
		again, err := acc.Address(index)
		if err != nil || again != addr {
			t.Fatalf("derivation not reproducible: %q then %q (%v)", addr, again, err)
		}
	})
}

// FuzzValidateAddress: any string is accepted or refused, never a panic.
func FuzzValidateAddress(f *testing.F) {
	f.Add("bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", "bitcoin")
	f.Add("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", "tron")
	f.Add("0xdAC17F958D2ee523a2206206994597C13D831ec7", "ethereum")
	f.Add("ltc1q", "litecoin")
	f.Fuzz(func(t *testing.T, addr, network string) {
		_ = hdwallet.ValidateAddress(hdwallet.Network(network), addr)
	})
}
