package chainwatch

import (
	"math/big"
	"testing"
	"time"
)

func TestIndexLookupAndEvict(t *testing.T) {
	now := time.Now()
	x := NewIndex("solana")
	x.Add(
		Intent{Seq: 1, ID: "PI-1", Asset: "SOL", Address: "Shop", Reference: "ref1", AmountBase: big.NewInt(1), WatchUntil: now.Add(time.Hour)},
		Intent{Seq: 2, ID: "PI-2", Asset: "SOL", Address: "Shop", Reference: "ref2", AmountBase: big.NewInt(2), WatchUntil: now.Add(-time.Minute)},
		Intent{Seq: 3, ID: "PI-3", Asset: "ETH", Address: "0xAbC", AmountBase: big.NewInt(3), WatchUntil: now.Add(time.Hour)},
	)
	// Intents sharing the shop's address are all watched, by reference.
	if x.Len() != 3 || len(x.Intents()) != 3 || x.MaxSeq() != 3 {
		t.Fatalf("len %d, intents %d, max seq %d", x.Len(), len(x.Intents()), x.MaxSeq())
	}
	if in, ok := x.LookupReference("ref2"); !ok || in.ID != "PI-2" {
		t.Fatalf("reference lookup: %v %v", in, ok)
	}
	// EVM addresses compare case-insensitively.
	if in, ok := x.Lookup("ETH", "0xabc"); !ok || in.ID != "PI-3" {
		t.Fatalf("address lookup: %v %v", in, ok)
	}
	if _, ok := x.Lookup("USDT", "0xabc"); ok {
		t.Fatal("another asset at the same address matched")
	}
	if n := x.Evict(now); n != 1 {
		t.Fatalf("evicted %d, want 1", n)
	}
	if _, ok := x.LookupReference("ref2"); ok || x.Len() != 2 {
		t.Fatalf("expired intent still watched (len %d)", x.Len())
	}
}
