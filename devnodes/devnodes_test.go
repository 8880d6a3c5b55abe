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
	origin, err := hdwallet.ParseKeyOrigin(TestKeyOrigin("84'/1'/0'"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ltc.CheckOrigin(origin); err != nil {
		t.Fatalf("%s as the origin of the litecoin regtest key: %v", origin, err)
	}
}

// `dev pay` on the local btcd: the exact amount reaches the request's
// address (derived from the development key) and is confirmed; a second
// payment spends another coin.
func TestBitcoinDevNodePays(t *testing.T) {
	ctx := context.Background()
	port, p2p := bitcoinPorts(t)
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

// The regtest chain survives a clean restart of the node on the same
// directory (`kernodeck dev` keeps it under KERNODECK_DEV_DIR): the blocks
// mined before, and the payments in them, are still the chain, so no
// order paid in BTC sees a deep reorganisation after a restart.
func TestBitcoinDevNodeKeepsItsChain(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	port, p2p := bitcoinPorts(t)
	tip := func(n *Node) (int, string) {
		t.Helper()
		var height int
		var hash string
		if err := RPC(ctx, BitcoinURLOn(port), "getblockcount", nil, &height); err != nil {
			t.Fatal(err)
		}
		if err := RPC(ctx, BitcoinURLOn(port), "getblockhash", []any{height}, &hash); err != nil {
			t.Fatal(err)
		}
		return height, hash
	}
	n, err := StartBitcoinOn(ctx, dir, port, p2p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := MineBitcoin(ctx, BitcoinURLOn(port), 3); err != nil {
		n.Stop()
		t.Fatal(err)
	}
	height, hash := tip(n)
	n.Stop()

	n, err = StartBitcoinOn(ctx, dir, port, p2p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	if h2, hash2 := tip(n); h2 != height || hash2 != hash {
		t.Fatalf("after a restart the tip is %d %s, was %d %s", h2, hash2, height, hash)
	}
}

// bitcoinPorts are free RPC and peer-to-peer ports for a test's btcd.
func bitcoinPorts(t *testing.T) (rpc, p2p int) {
	t.Helper()
	rpc, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if p2p, err = FreePort(); err != nil {
		t.Fatal(err)
	}
	return rpc, p2p
}
