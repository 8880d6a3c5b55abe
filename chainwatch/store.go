package chainwatch

import (
	"context"
	"errors"
	"math/big"
	"time"
)

// Payment states, as stored and as signalled.
const (
	StateSeen      = "seen"
	StateConfirmed = "confirmed"
	StateReverted  = "reverted"
)

// ErrLeaseLost is returned by the store's writes when the writer no longer
// holds its network's lease: another watcher may be writing.
var ErrLeaseLost = errors.New("watcher lease lost")

// Seen is a payment found on chain to an address the shop handed out.
type Seen struct {
	TxID    string
	Index   int64
	Asset   string
	Address string
	Amount  *big.Int
	// IntentID names the request when the watcher matched it itself
	// (Solana: by reference or by amount); otherwise the store finds the
	// request by address.
	IntentID string
	// Dust is set for an amount below the network's dust threshold: stored,
	// summarised per request rather than signalled.
	Dust        bool
	BlockHeight int64
	BlockHash   string
	// BlockTime is the block's time: the store judges by it whether the
	// payment was late and whether its request was still watched.
	BlockTime time.Time
}

// Pending is a stored payment whose current state the workflow has not
// acknowledged yet.
type Pending struct {
	Network           string `db:"network"`
	TxID              string `db:"txid"`
	Index             int64  `db:"index"`
	Asset             string `db:"asset"`
	IntentID          string `db:"intent_id"`
	TargetKind        string `db:"target_kind"`
	TargetRef         string `db:"target_ref"`
	AmountBase        string `db:"amount_base"`
	AmountCents       int64  `db:"amount_cents"`
	Late              bool   `db:"late"`
	State             string `db:"state"`
	AfterConfirmation bool   `db:"after_confirmation"`
	Mempool           bool   `db:"mempool"`
	// Reversals: see workflows.PaymentEvent.
	Reversals int `db:"reversals"`
}

// DustPending is a request's dust summary not yet acknowledged.
type DustPending struct {
	Network     string `db:"network"`
	Asset       string `db:"asset"`
	IntentID    string `db:"intent_id"`
	TargetKind  string `db:"target_kind"`
	TargetRef   string `db:"target_ref"`
	Version     int64  `db:"version"`
	Outputs     int64  `db:"outputs"`
	AmountBase  string `db:"amount_base"`
	AmountCents int64  `db:"amount_cents"`
}

// Store is the persistence a Watcher needs (implemented by package postgres).
// The writes that follow the chain take the writer's holder name and fail
// with ErrLeaseLost unless it holds the network's lease, so two watchers
// never write at once; an empty holder writes without the check (tools).
type Store interface {
	// KnownAddresses returns every address handed out on network (any age)
	// by requests with a sequence above afterSeq.
	KnownAddresses(ctx context.Context, network string, afterSeq int64) ([]KnownAddress, error)
	// WatchedIntents returns the intents of network still watched at now
	// with a sequence above afterSeq (followers by reference: Solana).
	WatchedIntents(ctx context.Context, network string, afterSeq int64, now time.Time) ([]Intent, error)
	// LastBlock is the cursor: the newest recorded block.
	LastBlock(ctx context.Context, network string) (height int64, hash string, ok bool, err error)
	// BlockHash is the recorded hash at height.
	BlockHash(ctx context.Context, network string, height int64) (string, bool, error)
	// RecordBlock stores the block's hash and its payments (state seen; a
	// payment reverted earlier and mined again is seen again) in one
	// transaction, advancing the cursor. A payment the store cannot count
	// (another asset than its request's, or its request no longer watched
	// at the block's time) is stored for support and never signalled.
	RecordBlock(ctx context.Context, network, holder string, height int64, hash string, payments []Seen) error
	// RecordMempool stores payments seen in the node's mempool (state seen,
	// no block); a payment already stored is left as it is.
	RecordMempool(ctx context.Context, network, holder string, payments []Seen) error
	// MempoolPayments lists the transactions of payments seen in the
	// mempool and not (yet) in a block.
	MempoolPayments(ctx context.Context, network string) ([]string, error)
	// RevertMempool reverts the mempool payments of a transaction the node
	// dropped (replaced or double-spent).
	RevertMempool(ctx context.Context, network, holder, txid string) error
	// Rewind forgets the blocks above height after a reorganisation; their
	// payments become reverted, confirmed ones included (reverted after
	// confirmation). It returns how many.
	Rewind(ctx context.Context, network, holder string, height int64) (int, error)
	// Confirm marks confirmed the seen payments at heights up to maxHeight.
	Confirm(ctx context.Context, network, holder string, maxHeight int64) (int, error)
	// Unsignaled lists, oldest first, up to limit payments whose state the
	// workflow has not acknowledged, except those of the skipped targets
	// (order or top-up references).
	Unsignaled(ctx context.Context, network string, skip []string, limit int) ([]Pending, error)
	// MarkSignaled records that state was delivered (only if still current).
	MarkSignaled(ctx context.Context, p Pending) error
	// MarkUndeliverable records that the target's workflow is closed: the
	// payment goes to support, and a timeline entry says so.
	MarkUndeliverable(ctx context.Context, p Pending) error
	// UnsignaledDust lists the dust summaries not yet acknowledged.
	UnsignaledDust(ctx context.Context, network string) ([]DustPending, error)
	// MarkDustSignaled records the delivery of a summary's version.
	MarkDustSignaled(ctx context.Context, d DustPending) error
	// MarkDustUndeliverable records a summary whose workflow closed: its
	// total goes to support's queue, and it is not signalled again.
	MarkDustUndeliverable(ctx context.Context, d DustPending) error
	// AcquireLease takes or renews the network's lease for holder.
	AcquireLease(ctx context.Context, network, holder string, ttl time.Duration) (bool, error)
	// ReleaseLease gives the lease up.
	ReleaseLease(ctx context.Context, network, holder string) error
}
