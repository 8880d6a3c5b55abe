package chainwatch

import (
	"context"
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// The payments and requests the store and the watchers exchange are
// domain types (package postgres speaks them without importing chainwatch).
const (
	StateSeen      = domain.PaymentStateSeen
	StateConfirmed = domain.PaymentStateConfirmed
	StateReverted  = domain.PaymentStateReverted
)

// ErrLeaseLost: see domain.ErrLeaseLost.
var ErrLeaseLost = domain.ErrLeaseLost

type (
	Seen         = domain.ChainSeen
	Pending      = domain.PendingPayment
	DustPending  = domain.PendingDust
	Intent       = domain.WatchedIntent
	KnownAddress = domain.KnownAddress
)

// Store is the persistence a Watcher needs (implemented by package postgres).
// The writes that follow the chain take the writer's holder name and fail
// with ErrLeaseLost unless it holds the network's lease, so two watchers
// never write at once; an empty holder writes without the check (tools).
type Store interface {
	// KnownAddresses returns every address handed out on network (any age)
	// by requests with a sequence above afterSeq.
	KnownAddresses(ctx context.Context, network string, afterSeq int64) ([]KnownAddress, error)
	// WatchedIntents returns the intents of network still watched at now
	// (the chain's time, see Checkpoint) with a sequence above afterSeq
	// (followers by reference: Solana).
	WatchedIntents(ctx context.Context, network string, afterSeq int64, now time.Time) ([]Intent, error)
	// IntentsByReference returns the requests of network, of any age,
	// whose reference key is one of keys (Solana).
	IntentsByReference(ctx context.Context, network string, keys []string) ([]Intent, error)
	// Checkpoint is how far a follower by reference (Solana) has read
	// every watched request: a finalized slot and its block time.
	Checkpoint(ctx context.Context, network string) (height int64, at time.Time, ok bool, err error)
	// SaveCheckpoint moves the checkpoint forward (never back).
	SaveCheckpoint(ctx context.Context, network, holder string, height int64, at time.Time) error
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
