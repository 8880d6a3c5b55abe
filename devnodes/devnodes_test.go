package devnodes

import (
	"testing"

	"github.com/kernodeck/kernodeck/hdwallet"
)

// The development keys are the test mnemonic's, as published: the first
// Ethereum address of "abandon ... about" at m/44'/60'/0'/0/0.
func TestDevelopmentKeys(t *testing.T) {
	eth, err := hdwallet.ParseAccountKey(hdwallet.Ethereum, EthereumXpub)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := eth.Address(0); a != "0x9858EfFD232B4033E47d90003D41EC34EcaEda94" {
		t.Fatalf("ethereum dev address 0 = %s", a)
	}
	ltc, err := hdwallet.ParseAccountKey(hdwallet.LitecoinRegtest, LitecoinRegtestXpub)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := ltc.Address(0); len(a) < 5 || a[:5] != "rltc1" {
		t.Fatalf("litecoin regtest dev address 0 = %s", a)
	}
}
