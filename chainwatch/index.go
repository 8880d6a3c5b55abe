package chainwatch

import (
	"math/big"
	"strings"
	"sync"
	"time"
)

// Intent is what the watcher needs of an open payment request.
type Intent struct {
	Seq        int64
	ID         string
	TargetKind string // "order" or "topup"
	TargetRef  string
	Network    string
	Asset      string
	Address    string
	Reference  string // Solana Pay reference key
	AmountBase *big.Int
	USDCents   int64
	Deadline   time.Time
	WatchUntil time.Time
}

// Index maps (asset, address) to the intent paying there, for one network.
// Lookups are O(1); it is loaded from the database and kept in step with it.
type Index struct {
	mu        sync.RWMutex
	network   string
	byID      map[string]*Intent
	byAddress map[string]*Intent // asset + "|" + normalised address (derived addresses)
	byRef     map[string]*Intent // Solana Pay reference (all share the shop's address)
	maxSeq    int64
}

// NewIndex returns an empty index for network.
func NewIndex(network string) *Index {
	return &Index{network: network, byID: map[string]*Intent{}, byAddress: map[string]*Intent{}, byRef: map[string]*Intent{}}
}

// normalise makes address comparison exact: EVM hex addresses compare
// case-insensitively; base58 and bech32 ones as given.
func normalise(addr string) string {
	if strings.HasPrefix(addr, "0x") || strings.HasPrefix(addr, "0X") {
		return strings.ToLower(addr)
	}
	return addr
}

func addrKey(asset, addr string) string { return asset + "|" + normalise(addr) }

// Add inserts or replaces intents; it keeps the highest sequence seen.
func (x *Index) Add(intents ...Intent) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := range intents {
		in := intents[i]
		x.byID[in.ID] = &in
		if in.Reference != "" {
			x.byRef[in.Reference] = &in
		} else {
			x.byAddress[addrKey(in.Asset, in.Address)] = &in
		}
		if in.Seq > x.maxSeq {
			x.maxSeq = in.Seq
		}
	}
}

// Lookup returns the intent receiving asset at address.
func (x *Index) Lookup(asset, address string) (*Intent, bool) {
	x.mu.RLock()
	in, ok := x.byAddress[addrKey(asset, address)]
	x.mu.RUnlock()
	return in, ok
}

// LookupReference returns the intent with a Solana Pay reference key.
func (x *Index) LookupReference(ref string) (*Intent, bool) {
	x.mu.RLock()
	in, ok := x.byRef[ref]
	x.mu.RUnlock()
	return in, ok
}

// MaxSeq is the newest intent sequence loaded.
func (x *Index) MaxSeq() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.maxSeq
}

// Len is the number of intents watched.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byID)
}

// Intents returns a snapshot of the watched intents.
func (x *Index) Intents() []Intent {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]Intent, 0, len(x.byID))
	for _, in := range x.byID {
		out = append(out, *in)
	}
	return out
}

// Evict drops intents no longer watched at now.
func (x *Index) Evict(now time.Time) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for id, in := range x.byID {
		if now.After(in.WatchUntil) {
			delete(x.byID, id)
			if in.Reference != "" {
				delete(x.byRef, in.Reference)
			} else {
				delete(x.byAddress, addrKey(in.Asset, in.Address))
			}
			n++
		}
	}
	return n
}
