package main

import (
	"context"
	"fmt"
	"io"
	"math/big"
	"slices"
	"time"

	"github.com/kernodeck/kernodeck/devnodes"
)

// payBitcoin pays the BTC orders by one transaction on btcd, from a mature
// coin of the development payer btcd mines to.
func (b *burst) payBitcoin(ctx context.Context, out io.Writer, orders []burstOrder) (string, error) {
	outs := make([]devnodes.BitcoinOutput, len(orders))
	sum := int64(0)
	for i, o := range orders {
		a, ok := new(big.Rat).SetString(o.amount)
		if ok {
			a.Mul(a, big.NewRat(100_000_000, 1))
		}
		if !ok || !a.IsInt() || !a.Num().IsInt64() {
			return "", fmt.Errorf("BTC amount %q of %s", o.amount, o.ref)
		}
		outs[i] = devnodes.BitcoinOutput{Address: o.address, Sats: a.Num().Int64()}
		sum += outs[i].Sats
	}
	t := time.Now()
	txid, err := devnodes.SendBitcoin(ctx, b.btcURL, outs)
	if err != nil {
		return "", fmt.Errorf("btcd: %w", err)
	}
	fmt.Fprintf(out, "broadcast 1 transaction on btcd (%d outputs, %.8f BTC) in %.1f s\n", len(outs), float64(sum)/1e8, time.Since(t).Seconds())
	return txid, nil
}

// mineBitcoin mines the Bitcoin policy's confirmations on btcd and checks
// that the first block holds the paying transaction.
func (b *burst) mineBitcoin(ctx context.Context, out io.Writer, txid string) ([]string, error) {
	blocks, err := devnodes.MineBitcoin(ctx, b.btcURL, b.btcConf)
	if err != nil {
		return nil, fmt.Errorf("btcd: %w", err)
	}
	var blk struct {
		Tx     []string `json:"tx"`
		Height int64    `json:"height"`
	}
	if err := devnodes.RPC(ctx, b.btcURL, "getblock", []any{blocks[0], 1}, &blk); err != nil {
		return nil, fmt.Errorf("btcd: %w", err)
	}
	if !slices.Contains(blk.Tx, txid) {
		return nil, fmt.Errorf("btcd block %d (%s) does not hold the paying transaction %s", blk.Height, blocks[0], txid)
	}
	fmt.Fprintf(out, "btcd block %d holds the paying transaction (%d transactions in all); %d confirmations mined\n",
		blk.Height, len(blk.Tx), b.btcConf)
	return blocks, nil
}
