package payout_test

import (
	"crypto/ed25519"
	"encoding/csv"
	"errors"
	"flag"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mr-tron/base58"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/payout"
)

// go test ./payout -run TestTransferListGolden -update rewrites the files.
var update = flag.Bool("update", false, "rewrite the golden files of testdata/transfers")

func amount(s string) *big.Int {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return n
}

// solanaKey is a fixed ed25519 public key (from a seed of one repeated
// byte), computed by crypto/ed25519 and encoded by mr-tron/base58.
func solanaKey(b byte) string {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b
	}
	return base58.Encode(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))
}

// EIP-55's published vectors and Ledger's app-tron address: fixed, so the
// golden files are.
const (
	eip55a = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
	eip55b = "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"
	tronA  = "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH"
)

func TestTransferListGolden(t *testing.T) {
	lists := map[string]payout.TransferList{
		"eth": {Method: method("ETH", "ethereum"), ChainID: 1, Transfers: []payout.Transfer{
			{ID: "PO-7K2M9Q4X1A", Address: eip55a, Amount: amount("1500000000000000000")},
			{ID: "PO-7K2M9Q4X1B", Address: eip55b, Amount: amount("123456789012345678")},
		}},
		"usdt-ethereum": {Method: method("USDT", "ethereum"), Contract: usdtEthereum, ChainID: 1, Transfers: []payout.Transfer{
			{ID: "PO-8A", Address: eip55a, Amount: amount("25500000")},
			{ID: "PO-8B", Address: eip55b, Amount: amount("1000000000")},
		}},
		"usdc-sepolia": {Method: method("USDC", "ethereum"), Contract: "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238", ChainID: 11155111, Transfers: []payout.Transfer{
			{ID: "PO-9A", Address: eip55b, Amount: amount("1")},
		}},
		"trx": {Method: method("TRX", "tron"), Transfers: []payout.Transfer{
			{ID: "PO-10A", Address: tronA, Amount: amount("12345678")},
		}},
		"usdt-tron": {Method: method("USDT", "tron"), Contract: usdtTron, Transfers: []payout.Transfer{
			{ID: "PO-11A", Address: tronA, Amount: amount("100000000")},
		}},
		"sol": {Method: method("SOL", "solana"), Transfers: []payout.Transfer{
			{ID: "PO-12A", Address: solanaKey(1), Amount: amount("250000000"), Reference: solanaKey(9)},
			{ID: "PO-12B", Address: solanaKey(2), Amount: amount("1000000000")},
		}},
		"injection": {Method: method("TRX", "tron"), Transfers: []payout.Transfer{
			{ID: `=HYPERLINK("http://x.example","clic")`, Address: tronA, Amount: amount("1")},
			{ID: "+1+1", Address: tronA, Amount: amount("2")},
			{ID: "-2", Address: tronA, Amount: amount("3")},
			{ID: "@SUM(A1)", Address: tronA, Amount: amount("4")},
			{ID: "\tx", Address: tronA, Amount: amount("5")},
			{ID: "a,\"b\"\nc", Address: tronA, Amount: amount("6")},
		}},
	}
	for name, l := range lists {
		t.Run(name, func(t *testing.T) {
			got, err := l.CSV()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "transfers", name+".csv")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if string(got) != string(want) {
				t.Fatalf("CSV differs from %s:\n%s\nwant:\n%s", path, got, want)
			}
			// It reads back: one line per transfer, amounts exact, the
			// URIs those URIs() gives.
			rows, err := csv.NewReader(strings.NewReader(string(got))).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			uris, _ := l.URIs()
			if len(rows) != len(l.Transfers)+1 || strings.Join(rows[0], ",") != "payout,network,asset,token_contract,to,amount,amount_base_units,uri" {
				t.Fatalf("rows %q", rows)
			}
			for i, tr := range l.Transfers {
				row := rows[i+1]
				if row[6] != tr.Amount.String() || row[5] != domain.FormatUnits(tr.Amount, l.Method.Decimals) || row[7] != uris[i] {
					t.Errorf("row %d: %q", i, row)
				}
				if strings.ContainsAny(row[0][:1], "=+-@\t") {
					t.Errorf("row %d: cell %q would be read as a formula", i, row[0])
				}
			}
		})
	}
}

func TestTransferListRefuses(t *testing.T) {
	ok := payout.Transfer{ID: "PO-1", Address: eip55a, Amount: amount("1")}
	cases := []struct {
		name string
		l    payout.TransferList
	}{
		{"Litecoin", payout.TransferList{Method: method("LTC", "litecoin"), Transfers: []payout.Transfer{{ID: "PO-1", Address: "ltc1qjmxnz78nmc8nq77wuxh25n2es7rzm5c2rkk4wh", Amount: amount("1")}}}},
		{"unknown method", payout.TransferList{Method: domain.Method{Asset: "USDC", Network: "solana", Decimals: 6, Token: true}, Contract: solanaKey(3), Transfers: []payout.Transfer{{ID: "PO-1", Address: solanaKey(1), Amount: amount("1")}}}},
		{"token without contract", payout.TransferList{Method: method("USDT", "ethereum"), ChainID: 1, Transfers: []payout.Transfer{ok}}},
		{"contract for ETH", payout.TransferList{Method: method("ETH", "ethereum"), Contract: usdtEthereum, ChainID: 1, Transfers: []payout.Transfer{ok}}},
		{"contract of Tron on Ethereum", payout.TransferList{Method: method("USDT", "ethereum"), Contract: usdtTron, ChainID: 1, Transfers: []payout.Transfer{ok}}},
		{"no chain id", payout.TransferList{Method: method("ETH", "ethereum"), Transfers: []payout.Transfer{ok}}},
		{"empty", payout.TransferList{Method: method("ETH", "ethereum"), ChainID: 1}},
		{"payout twice", payout.TransferList{Method: method("ETH", "ethereum"), ChainID: 1, Transfers: []payout.Transfer{ok, ok}}},
		{"Tron address on Ethereum", payout.TransferList{Method: method("ETH", "ethereum"), ChainID: 1, Transfers: []payout.Transfer{{ID: "PO-1", Address: tronA, Amount: amount("1")}}}},
		{"zero amount", payout.TransferList{Method: method("ETH", "ethereum"), ChainID: 1, Transfers: []payout.Transfer{{ID: "PO-1", Address: eip55a, Amount: amount("0")}}}},
		{"no amount", payout.TransferList{Method: method("ETH", "ethereum"), ChainID: 1, Transfers: []payout.Transfer{{ID: "PO-1", Address: eip55a}}}},
		{"reference off Solana", payout.TransferList{Method: method("ETH", "ethereum"), ChainID: 1, Transfers: []payout.Transfer{{ID: "PO-1", Address: eip55a, Amount: amount("1"), Reference: solanaKey(4)}}}},
	}
	for _, c := range cases {
		if _, err := c.l.CSV(); !errors.Is(err, payout.ErrTransfer) {
			t.Errorf("%s: CSV err = %v", c.name, err)
		}
		if _, err := c.l.URIs(); !errors.Is(err, payout.ErrTransfer) {
			t.Errorf("%s: URIs err = %v", c.name, err)
		}
	}
	l := payout.TransferList{Method: method("ETH", "ethereum"), ChainID: 1, Transfers: []payout.Transfer{ok, {ID: "PO-2", Address: eip55b, Amount: amount("41")}}}
	if l.Total().String() != "42" {
		t.Errorf("Total = %s", l.Total())
	}
}
