package chainwatch

import (
	"context"
	"math/big"
	"time"
)

// Payment states, as stored and as signalled.
const (
	StateSeen      = "seen"
	StateConfirmed = "confirmed"
	StateReverted  = "reverted"
)

// Seen is a payment to an intent found in a block.
type Seen struct {
	TxID        string
	Index       int64
	Asset       string
	Address     string
	Amount      *big.Int
	Intent      *Intent
	Late        bool
	BlockHeight int64
	BlockHash   string
}

// Pending is a stored payment whose current state the workflow has not
// acknowledged yet.
type Pending struct {
	Network     string `db:"network"`
	TxID        string `db:"txid"`
	Index       int64  `db:"index"`
	Asset       string `db:"asset"`
	IntentID    string `db:"intent_id"`
	TargetKind  string `db:"target_kind"`
	TargetRef   string `db:"target_ref"`
	AmountBase  string `db:"amount_base"`
	AmountCents int64  `db:"amount_cents"`
	Late        bool   `db:"late"`
	State       string `db:"state"`
}

// Store is the persistence a Watcher needs (implemented by package postgres).
type Store interface {
	// WatchedIntents returns the intents of network still watched at now
	// with a sequence above afterSeq.
	WatchedIntents(ctx context.Context, network string, afterSeq int64, now time.Time) ([]Intent, error)
	// LastBlock is the cursor: the newest recorded block.
	LastBlock(ctx context.Context, network string) (height int64, hash string, ok bool, err error)
	// BlockHash is the recorded hash at height.
	BlockHash(ctx context.Context, network string, height int64) (string, bool, error)
	// RecordBlock stores the block's hash and its payments (state seen; a
	// payment reverted earlier and mined again is seen again) in one
	// transaction, advancing the cursor.
	RecordBlock(ctx context.Context, network string, height int64, hash string, payments []Seen) error
	// Rewind forgets the blocks above height after a reorganisation; their
	// payments that were not confirmed become reverted. It returns how many.
	Rewind(ctx context.Context, network string, height int64) (int, error)
	// Confirm marks confirmed the seen payments at heights up to maxHeight.
	Confirm(ctx context.Context, network string, maxHeight int64) (int, error)
	// Unsignaled lists payments whose state the workflow has not acknowledged.
	Unsignaled(ctx context.Context, network string, limit int) ([]Pending, error)
	// MarkSignaled records that state was delivered (only if still current).
	MarkSignaled(ctx context.Context, p Pending) error
	// MarkUndeliverable records that the target's workflow is closed: the
	// payment goes to support, and a timeline entry says so.
	MarkUndeliverable(ctx context.Context, p Pending) error
	// AcquireLease takes or renews the network's lease for holder.
	AcquireLease(ctx context.Context, network, holder string, ttl time.Duration) (bool, error)
	// ReleaseLease gives the lease up.
	ReleaseLease(ctx context.Context, network, holder string) error
}
