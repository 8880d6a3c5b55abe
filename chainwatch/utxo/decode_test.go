package utxo_test

import (
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/chainwatch/utxo"
)

// TestDecodeRecordedBlocks decodes getblock answers recorded from the real
// nodes (see TestRecordTestdata and testdata/README.md) and checks every
// output against the same block's binary serialization.
func TestDecodeRecordedBlocks(t *testing.T) {
	for _, c := range []struct {
		name, network, asset string
		// what the recording must exercise
		txKey, addrKey string
	}{
		{"btcd-regtest", "bitcoin", "BTC", `"rawtx"`, `"address"`},
		{"litecoin-core-0.21.2.1-regtest", "litecoin", "LTC", `"tx"`, `"addresses"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			verbose, err := os.ReadFile(filepath.Join("testdata", c.name+"-getblock2.json"))
			if err != nil {
				t.Fatal(err)
			}
			rawHex, err := os.ReadFile(filepath.Join("testdata", c.name+"-getblock0.hex"))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{c.txKey, c.addrKey} {
				if !strings.Contains(string(verbose), k) {
					t.Fatalf("recording has no %s: not the shape this case is about", k)
				}
			}
			b, err := utxo.DecodeBlock(verbose, c.asset)
			if err != nil {
				t.Fatal(err)
			}
			want := outputsFromRawBlock(t, strings.TrimSpace(string(rawHex)), c.network, c.asset)
			if err := sameOutputs(b.Outputs, want); err != nil {
				t.Fatal(err)
			}
			if len(want) < 5 {
				t.Fatalf("only %d outputs: the recording should hold several payments", len(want))
			}
			var hdr struct {
				Hash     string `json:"hash"`
				Height   int64  `json:"height"`
				Previous string `json:"previousblockhash"`
				Time     int64  `json:"time"`
			}
			if err := json.Unmarshal(verbose, &hdr); err != nil {
				t.Fatal(err)
			}
			if b.Hash != hdr.Hash || b.Height != hdr.Height || b.Parent != hdr.Previous || !b.Time.Equal(time.Unix(hdr.Time, 0)) || b.Parent == "" {
				t.Fatalf("header %+v, want %+v", b, hdr)
			}
		})
	}
}

func TestParseAmount(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // base units, "" = error
	}{
		{"50", "5000000000"},
		{"50.00000000", "5000000000"},
		{"0.00012345", "12345"},
		{"0.1", "10000000"},
		{"0.3", "30000000"}, // 0.1+0.2 style float traps stay exact
		{"20999999.97690000", "2099999997690000"},
		{"92233720368.54775807", "9223372036854775807"},
		{"184467440737.09551616", "18446744073709551616"}, // beyond int64: still exact
		{"1e-08", "1"},                                    // btcd prints tiny float64 values with an exponent
		{"1.5e-07", "15"},                                 //
		{"2.5E+01", "2500000000"},                         //
		{"0", "0"},
		{"0.000000001", ""}, // below one satoshi
		{"-1", ""},
		{"abc", ""},
		{"", ""},
		{"1e999999999", ""},
	} {
		got, err := utxo.ParseAmount(json.Number(c.in))
		switch {
		case c.want == "" && err == nil:
			t.Errorf("ParseAmount(%q) = %s, want an error", c.in, got)
		case c.want != "" && err != nil:
			t.Errorf("ParseAmount(%q): %v", c.in, err)
		case c.want != "" && got.String() != c.want:
			t.Errorf("ParseAmount(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// TestDecodeShapes covers the differences between node families on small
// hand-made answers (the recorded ones above are the real thing).
func TestDecodeShapes(t *testing.T) {
	const core = `{"hash":"bb","height":7,"previousblockhash":"aa","time":1700000000,"tx":[
		{"txid":"t1","vout":[
			{"value":0.00047140,"n":0,"scriptPubKey":{"type":"witness_v0_keyhash","address":"bcrt1qx"}},
			{"value":1.00000000,"n":1,"scriptPubKey":{"type":"pubkeyhash","addresses":["mold"]}},
			{"value":0.00000000,"n":2,"scriptPubKey":{"type":"nulldata"}},
			{"value":2.00000000,"n":3,"scriptPubKey":{"type":"multisig","addresses":["m1","m2"]}},
			{"ismweb":true,"value":3.00000000,"n":4,"scriptPubKey":{"type":"witness_mweb_hogaddr","address":"hog"}}]}]}`
	b, err := utxo.DecodeBlock([]byte(core), "LTC")
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Outputs) != 2 || b.Outputs[0].Address != "bcrt1qx" || b.Outputs[0].Amount.Cmp(big.NewInt(47140)) != 0 ||
		b.Outputs[1].Address != "mold" || b.Outputs[1].Index != 1 || b.Outputs[1].Asset != "LTC" {
		t.Fatalf("outputs %+v", b.Outputs)
	}
	if b.Parent != "aa" || b.Height != 7 || b.Time.Unix() != 1700000000 {
		t.Fatalf("header %+v", b)
	}
	const btcd = `{"hash":"bb","height":7,"previousblockhash":"aa","time":1700000000,"rawtx":[
		{"txid":"t1","vout":[{"value":5e-07,"n":0,"scriptPubKey":{"address":"bcrt1qx","addresses":["bcrt1qx"]}}]}]}`
	if b, err = utxo.DecodeBlock([]byte(btcd), "BTC"); err != nil || len(b.Outputs) != 1 || b.Outputs[0].Amount.Int64() != 50 {
		t.Fatalf("btcd shape: %+v %v", b, err)
	}
	const idsOnly = `{"hash":"bb","height":7,"tx":["t1","t2"]}`
	if _, err := utxo.DecodeBlock([]byte(idsOnly), "BTC"); err == nil {
		t.Fatal("a verbosity-1 answer must be refused, not read as an empty block")
	}
	const badAmount = `{"hash":"bb","height":7,"tx":[{"txid":"t1","vout":[{"value":0.000000001,"n":0,"scriptPubKey":{"address":"x"}}]}]}`
	if _, err := utxo.DecodeBlock([]byte(badAmount), "BTC"); err == nil {
		t.Fatal("a sub-satoshi amount must be an error")
	}
}
