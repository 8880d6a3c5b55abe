package chainwatch

import (
	"hash/maphash"
	"sync"
)

// Index is the set of every address the shop ever handed out on one network
// (any asset, any age): a block's output is worth a look in PostgreSQL only
// if it pays one of them. The store then decides, by the block's time, what
// the payment is (counted toward its request, late, or for support), so
// nothing is evicted here and a watcher that was stopped for days loses
// nothing when it catches up.
//
// An address is kept as a 64-bit seeded hash of its normalised form: 8 bytes
// plus the map's overhead, and a lookup hashes the address on the stack and
// allocates nothing. The seed is random per process, so nobody can aim a
// collision at it; a collision would only cost a database lookup, which
// finds no request at that address.
type Index struct {
	mu     sync.RWMutex
	seed   maphash.Seed
	known  map[uint64]struct{}
	maxSeq int64
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{seed: maphash.MakeSeed(), known: map[uint64]struct{}{}}
}

// maxAddress bounds the addresses hashed on the stack; longer strings are
// not addresses of any watched network and never match.
const maxAddress = 128

// key hashes the normalised address: EVM hex addresses compare
// case-insensitively (lower-cased here), base58 and bech32 ones as given.
func (x *Index) key(addr string) (uint64, bool) {
	if len(addr) > maxAddress {
		return 0, false
	}
	if len(addr) < 2 || addr[0] != '0' || (addr[1] != 'x' && addr[1] != 'X') {
		return maphash.String(x.seed, addr), true
	}
	var buf [maxAddress]byte
	for i := 0; i < len(addr); i++ {
		c := addr[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return maphash.Bytes(x.seed, buf[:len(addr)]), true
}

// Add inserts addresses; it keeps the highest sequence seen.
func (x *Index) Add(addrs ...KnownAddress) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, a := range addrs {
		if k, ok := x.key(a.Address); ok {
			x.known[k] = struct{}{}
		}
		x.maxSeq = max(x.maxSeq, a.Seq)
	}
}

// Has reports whether the shop handed address out. O(1), no allocation.
func (x *Index) Has(address string) bool {
	k, ok := x.key(address)
	if !ok {
		return false
	}
	x.mu.RLock()
	_, ok = x.known[k]
	x.mu.RUnlock()
	return ok
}

// MaxSeq is the newest request sequence loaded.
func (x *Index) MaxSeq() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.maxSeq
}

// Len is the number of addresses known.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.known)
}
