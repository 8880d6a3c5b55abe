// Package chainwatch follows the chains' nodes and turns payments to open
// payment requests into workflow signals. One Watcher runs per network (a
// lease in PostgreSQL keeps it single); for each block it matches outputs and
// token transfers against an in-memory index of the open requests (O(1) per
// output), writes what it saw to PostgreSQL first, then signals the workflow.
// A persisted cursor (the recent block hashes) makes restarts miss nothing
// and reorganisations visible; a reconciler re-sends every signal the
// workflow has not acknowledged.
package chainwatch

import (
	"context"
	"math/big"
	"time"
)

// Output is one payment carried by a block: a transaction output (UTXO
// chains), a native transfer or a token Transfer log (account chains).
type Output struct {
	TxID    string
	Index   int64 // output index, or log index for token transfers
	Address string
	Asset   string // "BTC", "USDT", ...
	Amount  *big.Int
}

// Block is what a Chain reports for one height.
type Block struct {
	Height  int64
	Hash    string
	Parent  string
	Time    time.Time
	Outputs []Output
}

// Chain is a follower of one network's node, for block-based networks.
type Chain interface {
	// Network is the network's name ("bitcoin", "ethereum", ...).
	Network() string
	// Tip is the newest height the watcher may read: the best block, or the
	// last solidified or finalized one where the network's policy says so.
	Tip(ctx context.Context) (int64, error)
	// BlockHash is the hash of the node's block at height on its best chain.
	BlockHash(ctx context.Context, height int64) (string, error)
	// Block returns the block at height with every payment output it holds;
	// the watcher filters them.
	Block(ctx context.Context, height int64) (Block, error)
}

// Policy is a network's confirmation policy.
type Policy struct {
	// Confirmations needed (the including block counts as 1). A Chain whose
	// Tip is already final (Tron solidified, Ethereum finalized) uses 1.
	Confirmations int64
}
