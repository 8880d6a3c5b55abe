package utxo_test

import (
	"context"
	"testing"
)

// Broadcast, the watcher's sending of signed payout transactions, on both
// node families: sent, the node has it; sent again while it waits in the
// mempool, or once mined, it is no error (the watcher sends every step
// until the chain shows it); something that is no transaction is one.
func TestBroadcast(t *testing.T) {
	if testing.Short() {
		t.Skip("starts btcd and litecoind")
	}
	forEachNode(t, func(t *testing.T, n node) {
		chain := newChain(t, n.cfg())
		addr, err := newAccount(t, n.hdNetwork()).Address(0)
		if err != nil {
			t.Fatal(err)
		}
		txid, rawHex := n.sign(addr, 1_000_000)
		ctx := context.Background()
		if err := chain.Broadcast(ctx, rawHex); err != nil {
			t.Fatalf("broadcast: %v", err)
		}
		if !inMempool(t, n, txid) {
			t.Fatalf("%s not in the mempool after its broadcast", txid)
		}
		if err := chain.Broadcast(ctx, rawHex); err != nil {
			t.Fatalf("broadcast again, in the mempool: %v", err)
		}
		n.mine(1)
		if inMempool(t, n, txid) {
			t.Fatalf("%s not mined", txid)
		}
		if err := chain.Broadcast(ctx, rawHex); err != nil {
			t.Fatalf("broadcast again, mined: %v", err)
		}
		if err := chain.Broadcast(ctx, "00"); err == nil {
			t.Fatal("a byte that is no transaction broadcast without error")
		}
	})
}
