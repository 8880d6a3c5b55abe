package evm_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/chainwatch/evm"
)

func newAddr(t testing.TB) common.Address {
	t.Helper()
	k, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return crypto.PubkeyToAddress(k.PublicKey)
}

func outputKey(o chainwatch.Output) string {
	return o.Asset + "|" + o.Address + "|" + o.Amount.String()
}

// TestBlockOutputs mines one block with native and token payments, failed
// ones and a transfer of an unconfigured token, and checks what Block
// reports: exactly the successful payments, keyed by the index scheme.
func TestBlockOutputs(t *testing.T) {
	ctx := context.Background()
	sc := newSimChain(t)
	ch, err := evm.New(ctx, evm.Config{Client: sc.client, ChainID: 1337, Tokens: sc.tokenConfig(false)})
	if err != nil {
		t.Fatal(err)
	}
	other := sc.deployToken("DAI") // not configured: ignored
	a1, a2 := newAddr(t), newAddr(t)
	parent := sc.head()

	ethTx := sc.send(&a1, big.NewInt(1_500_000_000_000_000), nil, 0)
	usdtTx := sc.payToken("USDT", a2, big.NewInt(23_570_000), 0)
	usdcTx := sc.payToken("USDC", a1, big.NewInt(5_000_001), 0)
	// Mined but failed: a token transfer above the balance, ETH to an
	// address whose code reverts. Neither may count.
	failedToken := sc.payToken("USDC", a2, new(big.Int).Lsh(big.NewInt(1), 200), 100_000)
	failedETH := sc.send(&revertingAddr, big.NewInt(7), nil, 100_000)
	sc.send(&other, nil, mustPack(t, "transfer", a1, big.NewInt(9)), 0)
	sc.send(&a2, big.NewInt(0), nil, 0) // no value
	hash := sc.mine(1)
	for _, tx := range []*types.Transaction{failedToken, failedETH} {
		if r := sc.receipt(tx); r.Status != types.ReceiptStatusFailed || r.BlockHash != hash {
			t.Fatalf("tx %s: status %d in %s, want failed in %s", tx.Hash().Hex(), r.Status, r.BlockHash.Hex(), hash.Hex())
		}
	}

	tip, err := ch.Tip(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tip != parent.Number.Int64()+1 {
		t.Fatalf("tip %d, want %d", tip, parent.Number.Int64()+1)
	}
	b, err := ch.Block(ctx, tip)
	if err != nil {
		t.Fatal(err)
	}
	bh, err := ch.BlockHash(ctx, tip)
	if err != nil {
		t.Fatal(err)
	}
	if b.Hash != hash.Hex() || bh != b.Hash || b.Parent != parent.Hash().Hex() || b.Height != tip {
		t.Fatalf("block %d %s (hash at height %s) parent %s; want %s parent %s", b.Height, b.Hash, bh, b.Parent, hash.Hex(), parent.Hash().Hex())
	}
	if head := sc.head(); !b.Time.Equal(time.Unix(int64(head.Time), 0)) {
		t.Fatalf("time %s, want header time %d", b.Time, head.Time)
	}
	want := map[string]chainwatch.Output{
		"ETH|" + a1.Hex() + "|1500000000000000": {TxID: ethTx.Hash().Hex(), Index: evm.NativeIndex},
		"USDT|" + a2.Hex() + "|23570000":        {TxID: usdtTx.Hash().Hex(), Index: int64(sc.receipt(usdtTx).Logs[0].Index)},
		"USDC|" + a1.Hex() + "|5000001":         {TxID: usdcTx.Hash().Hex(), Index: int64(sc.receipt(usdcTx).Logs[0].Index)},
	}
	if len(b.Outputs) != len(want) {
		t.Fatalf("outputs %+v, want %d", b.Outputs, len(want))
	}
	for _, o := range b.Outputs {
		w, ok := want[outputKey(o)]
		if !ok || w.TxID != o.TxID || w.Index != o.Index {
			t.Fatalf("unexpected output %+v (want %+v)", o, want)
		}
	}

	// With a filter, only watched addresses' native transfers are reported
	// (their receipts alone fetched); token transfers are all reported.
	ch.SetWatched(func(addr string) bool { return addr == a2.Hex() })
	b, err = ch.Block(ctx, tip)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range b.Outputs {
		if o.Asset == evm.NativeAsset {
			t.Fatalf("unwatched native transfer reported: %+v", o)
		}
	}
	if len(b.Outputs) != 2 {
		t.Fatalf("outputs %+v, want the 2 token transfers", b.Outputs)
	}
	idx := chainwatch.NewIndex()
	idx.Add(chainwatch.KnownAddress{Address: a1.Hex(), Seq: 1})
	ch.SetWatched(evm.IndexFilter(idx))
	if b, err = ch.Block(ctx, tip); err != nil {
		t.Fatal(err)
	}
	if len(b.Outputs) != 3 {
		t.Fatalf("outputs %+v, want 3 with the index filter", b.Outputs)
	}
}

func mustPack(t testing.TB, method string, args ...any) []byte {
	t.Helper()
	data, err := tokenABI.Pack(method, args...)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestFinalizedTip: with the "finalized" policy the tip is the node's
// finalized block, behind the latest.
func TestFinalizedTip(t *testing.T) {
	ctx := context.Background()
	sc := newSimChain(t)
	sc.mine(70)
	ch, err := evm.New(ctx, evm.Config{Client: sc.client, Finality: evm.FinalityFinalized})
	if err != nil {
		t.Fatal(err)
	}
	tip, err := ch.Tip(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fin, err := sc.client.HeaderByNumber(ctx, big.NewInt(int64(rpc.FinalizedBlockNumber)))
	if err != nil {
		t.Fatal(err)
	}
	latest := sc.head().Number.Int64()
	if tip != fin.Number.Int64() || tip >= latest || tip <= 0 {
		t.Fatalf("finalized tip %d (node's finalized %d, latest %d)", tip, fin.Number.Int64(), latest)
	}
}

// TestNewRefuses: a wrong chain ID, an unknown finality, a bad contract.
func TestNewRefuses(t *testing.T) {
	ctx := context.Background()
	sc := newSimChain(t)
	for name, cfg := range map[string]evm.Config{
		"chain id": {Client: sc.client, ChainID: 1},
		"finality": {Client: sc.client, Finality: "safe"},
		"contract": {Client: sc.client, Tokens: map[string]string{"0x1234": "USDT"}},
		"asset":    {Client: sc.client, Tokens: map[string]string{sc.tokens["USDT"].Hex(): "ETH"}},
		"no node":  {},
	} {
		if _, err := evm.New(ctx, cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestDecodeTransfer decodes a real Transfer log of the test token (the
// same layout as a TRC-20's) and refuses look-alikes.
func TestDecodeTransfer(t *testing.T) {
	sc := newSimChain(t)
	to := newAddr(t)
	tx := sc.payToken("USDT", to, big.NewInt(42_000_001), 0)
	sc.mine(1)
	logs := sc.receipt(tx).Logs
	if len(logs) != 1 {
		t.Fatalf("%d logs", len(logs))
	}
	l := *logs[0]
	from, gotTo, amount, ok := evm.DecodeTransfer(l)
	if !ok || from != sc.from || gotTo != to || amount.Cmp(big.NewInt(42_000_001)) != 0 {
		t.Fatalf("decoded %s -> %s %v ok=%v", from.Hex(), gotTo.Hex(), amount, ok)
	}
	if l.Address != sc.tokens["USDT"] || l.Topics[0] != evm.TransferTopic {
		t.Fatalf("log of %s topic %s", l.Address.Hex(), l.Topics[0].Hex())
	}

	bad := map[string]func(l *types.Log){
		"erc721": func(l *types.Log) { l.Topics = append(l.Topics, common.HexToHash("0x07")); l.Data = nil },
		"topic":  func(l *types.Log) { l.Topics[0] = crypto.Keccak256Hash([]byte("Approval(address,address,uint256)")) },
		"data":   func(l *types.Log) { l.Data = l.Data[:31] },
		"pad":    func(l *types.Log) { l.Topics[2][0] = 1 },
		"short":  func(l *types.Log) { l.Topics = l.Topics[:2] },
	}
	for name, mutate := range bad {
		c := l
		c.Topics = append([]common.Hash(nil), l.Topics...)
		c.Data = append([]byte(nil), l.Data...)
		mutate(&c)
		if _, _, _, ok := evm.DecodeTransfer(c); ok {
			t.Errorf("%s: decoded", name)
		}
	}
}
