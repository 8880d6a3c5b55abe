package utxo_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"
)

// TestRecordTestdata re-records testdata/ from real nodes:
//
//	KERNODECK_RECORD_TESTDATA=1 go test ./chainwatch/utxo -run TestRecordTestdata -v
//
// For each node it writes one block's getblock answer at verbosity 2 (the
// RPC result as the node printed it) and the same block at verbosity 0 (hex),
// which TestDecodeRecordedBlocks uses as the independent source of truth.
func TestRecordTestdata(t *testing.T) {
	if os.Getenv("KERNODECK_RECORD_TESTDATA") != "1" {
		t.Skip("set KERNODECK_RECORD_TESTDATA=1 to re-record testdata/ from real nodes")
	}
	t.Run("btcd", func(t *testing.T) {
		n := startBtcd(t)
		// One output of each address type btcd prints: P2WPKH, P2PKH, P2SH,
		// P2TR, with amounts that are not round in BTC.
		key, err := btcec.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		pkh := btcutil.Hash160(key.PubKey().SerializeCompressed())
		p := &chaincfg.RegressionNetParams
		wpkh, _ := btcutil.NewAddressWitnessPubKeyHash(pkh, p)
		legacy, _ := btcutil.NewAddressPubKeyHash(pkh, p)
		sh, _ := btcutil.NewAddressScriptHashFromHash(pkh, p)
		tr, _ := btcutil.NewAddressTaproot(key.PubKey().SerializeCompressed()[1:], p)
		n.pay(wpkh.EncodeAddress(), 12_345_678)
		n.pay(legacy.EncodeAddress(), 1_000)
		n.pay(sh.EncodeAddress(), 4_999_980_001)
		n.pay(tr.EncodeAddress(), 99_999)
		recordBlock(t, n, n.mine(1)[0], "btcd-regtest")
	})
	t.Run("litecoind", func(t *testing.T) {
		n := startLitecoind(t)
		for _, typ := range []string{"bech32", "legacy", "p2sh-segwit"} {
			raw, err := n.call("getnewaddress", "", typ)
			if err != nil {
				t.Fatal(err)
			}
			var addr string
			if err := json.Unmarshal(raw, &addr); err != nil {
				t.Fatal(err)
			}
			n.pay(addr, 12_345_678)
		}
		n.pay(n.miner, 1_00000001)
		recordBlock(t, n, n.mine(1)[0], "litecoin-core-0.21.2.1-regtest")
	})
}

func recordBlock(t *testing.T, n node, hash, name string) {
	t.Helper()
	verbose, err := n.call("getblock", hash, 2)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := n.call("getblock", hash, 0)
	if err != nil {
		t.Fatal(err)
	}
	var rawHex string
	if err := json.Unmarshal(raw, &rawHex); err != nil {
		t.Fatal(err)
	}
	dir := "testdata"
	if err := os.WriteFile(filepath.Join(dir, name+"-getblock2.json"), append(verbose, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+"-getblock0.hex"), []byte(rawHex+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s block %s", name, hash)
}
