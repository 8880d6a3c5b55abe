package evm_test

import (
	"context"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/chainwatch/evm"
)

// BenchmarkBlock measures Chain.Block on a simulated-chain block of n
// transactions, half ETH transfers and half USDT transfers (all successful),
// each to its own address; 1 in 50 native transfers pays a watched address. "filtered"
// wires the watcher's index (receipts of watched native transfers only),
// "all-receipts" has no filter (a receipt per native transfer).
func BenchmarkBlock(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		sc := newSimChain(b)
		idx := chainwatch.NewIndex()
		// Gas of a token transfer to a fresh address on this chain's rules.
		tokenGas, err := sc.client.EstimateGas(context.Background(), ethereum.CallMsg{
			From: sc.from, To: ptr(sc.tokens["USDT"]), Data: mustPack(b, "transfer", newAddr(b), big.NewInt(1)),
		})
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			to := newAddr(b)
			if i%2 == 0 {
				sc.send(&to, big.NewInt(int64(i+1)), nil, 21_000)
				if i%100 == 0 {
					idx.Add(chainwatch.KnownAddress{Seq: int64(i + 1), Address: to.Hex()})
				}
			} else {
				sc.payToken("USDT", to, big.NewInt(int64(i+1)), tokenGas+tokenGas/10)
			}
		}
		// The pool promotes transactions asynchronously: seal once all wait.
		for i := 0; ; i++ {
			pending, err := sc.client.PendingTransactionCount(context.Background())
			if err != nil || pending == uint(n) || i == 200 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		hash := sc.mine(1)
		blk, err := sc.client.BlockByHash(context.Background(), hash)
		if err != nil || blk.Transactions().Len() != n {
			b.Fatalf("block of %d transactions, want %d (%v)", blk.Transactions().Len(), n, err)
		}
		height := blk.Number().Int64()
		for _, r := range mustReceipts(b, sc, blk.Transactions()) {
			if r.Status != types.ReceiptStatusSuccessful {
				b.Fatalf("transaction %s failed", r.TxHash.Hex())
			}
		}
		for _, mode := range []string{"filtered", "all-receipts"} {
			cfg := evm.Config{Client: sc.client, Tokens: sc.tokenConfig(false)}
			if mode == "filtered" {
				cfg.Watched = evm.IndexFilter(idx)
			}
			ch, err := evm.New(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("txs=%d/%s", n, mode), func(b *testing.B) {
				outputs := 0
				for b.Loop() {
					blk, err := ch.Block(context.Background(), height)
					if err != nil {
						b.Fatal(err)
					}
					outputs = len(blk.Outputs)
				}
				b.ReportMetric(float64(outputs), "outputs")
			})
		}
	}
}

// BenchmarkDecodeTransfer is the per-log decoding cost.
func BenchmarkDecodeTransfer(b *testing.B) {
	sc := newSimChain(b)
	tx := sc.payToken("USDC", common.HexToAddress("0x00000000000000000000000000000000000000aa"), big.NewInt(1), 0)
	sc.mine(1)
	l := *sc.receipt(tx).Logs[0]
	for b.Loop() {
		if _, _, _, ok := evm.DecodeTransfer(l); !ok {
			b.Fatal("not decoded")
		}
	}
}

func ptr[T any](v T) *T { return &v }

func mustReceipts(b *testing.B, sc *simChain, txs types.Transactions) []*types.Receipt {
	b.Helper()
	var out []*types.Receipt
	for _, tx := range txs {
		out = append(out, sc.receipt(tx))
	}
	return out
}
