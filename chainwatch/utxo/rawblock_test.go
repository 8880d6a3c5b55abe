package utxo_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/big"
	"testing"

	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/txscript"
	"github.com/btcsuite/btcd/wire"

	"github.com/kernodeck/kernodeck/chainwatch"
)

// litecoinRegtestParams are the address parameters of Litecoin's regtest,
// enough for txscript to print its addresses (bech32 "rltc", P2PKH 0x6f,
// P2SH 0x3a).
var litecoinRegtestParams = func() chaincfg.Params {
	p := chaincfg.RegressionNetParams
	p.Name = "litecoin-regtest"
	p.Bech32HRPSegwit = "rltc"
	p.PubKeyHashAddrID = 0x6f
	p.ScriptHashAddrID = 0x3a
	return p
}()

func paramsFor(network string) *chaincfg.Params {
	if network == "litecoin" {
		return &litecoinRegtestParams
	}
	return &chaincfg.RegressionNetParams
}

// outputsFromRawBlock is the independent oracle for the JSON decoding: the
// block's binary serialization (getblock verbosity 0), amounts as the int64
// satoshis the chain stores, addresses derived by txscript from the scripts.
func outputsFromRawBlock(t testing.TB, rawHex, network, asset string) []chainwatch.Output {
	t.Helper()
	raw, err := hex.DecodeString(rawHex)
	if err != nil {
		t.Fatal(err)
	}
	var b wire.MsgBlock
	if err := b.Deserialize(bytes.NewReader(raw)); err != nil {
		t.Fatalf("deserialize block: %v", err)
	}
	var out []chainwatch.Output
	for _, tx := range b.Transactions {
		for i, o := range tx.TxOut {
			_, addrs, _, err := txscript.ExtractPkScriptAddrs(o.PkScript, paramsFor(network))
			if err != nil || len(addrs) != 1 {
				continue
			}
			out = append(out, chainwatch.Output{
				TxID: tx.TxHash().String(), Index: int64(i), Address: addrs[0].EncodeAddress(),
				Asset: asset, Amount: big.NewInt(o.Value),
			})
		}
	}
	return out
}

// sameOutputs compares outputs exactly (amounts as integers).
func sameOutputs(got, want []chainwatch.Output) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d outputs, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.TxID != w.TxID || g.Index != w.Index || g.Address != w.Address || g.Asset != w.Asset || g.Amount.Cmp(w.Amount) != 0 {
			return fmt.Errorf("output %d: got %+v (%s), want %+v (%s)", i, g, g.Amount, w, w.Amount)
		}
	}
	return nil
}
