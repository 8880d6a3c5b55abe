package chainwatch

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// Benchmarks of the intent index: the cost of matching a block's outputs
// must not grow with the number of open intents (one map lookup per
// output), and the memory an open intent takes bounds how many one watcher
// can hold. Run:
//
//	go test ./chainwatch -run '^$' -bench 'Index' -benchmem
//
// Results are recorded in BENCHMARKS.md.

var benchSizes = []int{1_000, 100_000, 1_000_000}

// benchAddress is a synthetic bech32-shaped P2WPKH address (same length as a
// real one: the map hashes the whole key).
func benchAddress(i int) string { return fmt.Sprintf("bc1q%038x", i) }

// benchAddresses makes n addresses as the store loads them.
func benchAddresses(n int) []KnownAddress {
	out := make([]KnownAddress, n)
	for i := range out {
		out[i] = KnownAddress{Seq: int64(i + 1), Address: benchAddress(i)}
	}
	return out
}

type benchChain struct{}

func (benchChain) Network() string                                  { return "bitcoin" }
func (benchChain) Tip(context.Context) (int64, error)               { return 0, nil }
func (benchChain) BlockHash(context.Context, int64) (string, error) { return "", nil }
func (benchChain) Block(context.Context, int64) (Block, error)      { return Block{}, nil }

// benchBlock is a block of outputs of which matched pay open intents (at
// random ones among n) and the rest pay unknown addresses, as on a real
// chain where almost nothing is ours.
func benchBlock(n, outputs, matched int) Block {
	rng := rand.New(rand.NewPCG(1, 2))
	b := Block{Height: 1, Hash: "h", Time: time.Now()}
	for i := range outputs {
		addr := fmt.Sprintf("bc1qz%037x", rng.Uint64()) // never an intent's address
		if i < matched {
			addr = benchAddress(rng.IntN(n))
		}
		b.Outputs = append(b.Outputs, Output{
			TxID: fmt.Sprintf("%064x", i), Index: int64(i % 3), Address: addr, Asset: "BTC", Amount: big.NewInt(47_140),
		})
	}
	rng.Shuffle(len(b.Outputs), func(i, j int) { b.Outputs[i], b.Outputs[j] = b.Outputs[j], b.Outputs[i] })
	return b
}

// BenchmarkIndexMatch is Watcher.match (index Lookup for every output plus
// building the Seen of the matched ones) on a block of 4,000 outputs, 100 of
// which pay open intents. ns/output and ns/matched must stay flat from 1
// thousand to 1 million open intents.
func BenchmarkIndexMatch(b *testing.B) {
	const outputs, matched = 4_000, 100
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("intents=%d", n), func(b *testing.B) {
			w := &Watcher{Chain: benchChain{}, Now: time.Now}
			w.defaults()
			w.index.Add(benchAddresses(n)...)
			block := benchBlock(n, outputs, matched)
			runtime.GC()
			b.ResetTimer()
			found := 0
			for b.Loop() {
				found = len(w.match(block))
			}
			if found != matched {
				b.Fatalf("matched %d, want %d", found, matched)
			}
			perBlock := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(perBlock/outputs, "ns/output")
			b.ReportMetric(perBlock/matched, "ns/matched")
		})
	}
}

// BenchmarkIndexLookup is the bare O(1) lookup of a matching address.
func BenchmarkIndexLookup(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("intents=%d", n), func(b *testing.B) {
			x := NewIndex()
			x.Add(benchAddresses(n)...)
			addrs := make([]string, 1024)
			rng := rand.New(rand.NewPCG(3, 4))
			for i := range addrs {
				addrs[i] = benchAddress(rng.IntN(n))
			}
			runtime.GC()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if !x.Has(addrs[i%len(addrs)]) {
					b.Fatal("miss")
				}
				i++
			}
		})
	}
}

// BenchmarkIndexMemory measures the heap an address takes once loaded (the
// index's map entry; the loaded rows are garbage once added), from
// runtime.MemStats before and after loading n.
func BenchmarkIndexMemory(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("intents=%d", n), func(b *testing.B) {
			var perIntent float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				x := NewIndex()
				x.Add(benchAddresses(n)...) // the loaded slice is garbage once added
				runtime.GC()
				runtime.ReadMemStats(&after)
				perIntent = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
				runtime.KeepAlive(x)
			}
			b.ReportMetric(perIntent, "B/intent")
			b.ReportMetric(perIntent*float64(n)/(1<<20), "MiB-total")
		})
	}
}
