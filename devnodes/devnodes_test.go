package devnodes

import (
	"context"
	"math/big"
	"slices"
	"testing"

	"github.com/btcsuite/btcd/btcutil"

	"github.com/kernodeck/kernodeck/domain"
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

// `dev pay` on the local btcd: the exact amount reaches the request's
// address (derived from the development key) and is confirmed; a second
// payment spends another coin.
func TestBitcoinDevNodePays(t *testing.T) {
	ctx := context.Background()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p2p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	n, err := StartBitcoinOn(ctx, t.TempDir(), port, p2p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	acct, err := hdwallet.ParseAccountKey(hdwallet.BitcoinRegtest, BitcoinRegtestXpub)
	if err != nil {
		t.Fatal(err)
	}
	url := BitcoinURLOn(port)
	for i, sats := range []int64{123_456, 2_000_000} {
		addr, err := acct.Address(uint32(i))
		if err != nil {
			t.Fatal(err)
		}
		in := domain.Intent{Network: domain.NetworkBitcoin, Asset: "BTC", Decimals: 8, Address: addr,
			AmountBase: domain.NewBigInt(big.NewInt(sats))}
		txid, err := PayBitcoin(ctx, url, in, 2)
		if err != nil {
			t.Fatalf("pay %d: %v", i, err)
		}
		var tx struct {
			Confirmations int64 `json:"confirmations"`
			Vout          []struct {
				Value        float64 `json:"value"`
				ScriptPubKey struct {
					Address   string   `json:"address"`
					Addresses []string `json:"addresses"`
				} `json:"scriptPubKey"`
			} `json:"vout"`
		}
		if err := RPC(ctx, url, "getrawtransaction", []any{txid, 1}, &tx); err != nil {
			t.Fatal(err)
		}
		if tx.Confirmations < 2 {
			t.Fatalf("pay %d: %d confirmations", i, tx.Confirmations)
		}
		paid := false
		for _, o := range tx.Vout {
			got := append([]string{o.ScriptPubKey.Address}, o.ScriptPubKey.Addresses...)
			amount, _ := btcutil.NewAmount(o.Value)
			if slices.Contains(got, addr) && int64(amount) == sats {
				paid = true
			}
		}
		if !paid {
			t.Fatalf("pay %d: no output of %d sat to %s in %+v", i, sats, addr, tx.Vout)
		}
	}
}
