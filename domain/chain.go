package domain

import (
	"errors"
	"math/big"
	"time"
)

// What the chain watchers and their store (package postgres) exchange:
// payments found on chain, their stored states to deliver, and the payment
// requests and addresses watched. Defined here so that the store depends on
// domain only; package chainwatch names them too.

// Payment states, as stored and as signalled.
const (
	PaymentStateSeen      = "seen"
	PaymentStateConfirmed = "confirmed"
	PaymentStateReverted  = "reverted"
)

// ErrLeaseLost is returned by the store's writes when the writer no longer
// holds its network's lease: another watcher may be writing.
var ErrLeaseLost = errors.New("watcher lease lost")

// ChainSeen is a payment found on chain to an address the shop handed out.
type ChainSeen struct {
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

// PendingPayment is a stored payment whose current state the workflow has not
// acknowledged yet.
type PendingPayment struct {
	Network    string `db:"network"`
	TxID       string `db:"txid"`
	Index      int64  `db:"index"`
	Asset      string `db:"asset"`
	IntentID   string `db:"intent_id"`
	TargetKind string `db:"target_kind"`
	TargetRef  string `db:"target_ref"`
	// Address is the payment request's address (see workflows.PaymentEvent).
	Address           string `db:"address"`
	AmountBase        string `db:"amount_base"`
	AmountCents       int64  `db:"amount_cents"`
	Late              bool   `db:"late"`
	State             string `db:"state"`
	AfterConfirmation bool   `db:"after_confirmation"`
	Mempool           bool   `db:"mempool"`
	// Reversals and StateVersion: see workflows.PaymentEvent.
	Reversals    int   `db:"reversals"`
	StateVersion int64 `db:"state_version"`
}

// PendingDust is a request's dust summary not yet acknowledged.
type PendingDust struct {
	Network     string `db:"network"`
	Asset       string `db:"asset"`
	IntentID    string `db:"intent_id"`
	TargetKind  string `db:"target_kind"`
	TargetRef   string `db:"target_ref"`
	Address     string `db:"address"`
	Version     int64  `db:"version"`
	Outputs     int64  `db:"outputs"`
	AmountBase  string `db:"amount_base"`
	AmountCents int64  `db:"amount_cents"`
}

// WatchedIntent is what a chain watcher needs of a payment request it follows by
// reference (Solana, where every request shares the shop's address).
type WatchedIntent struct {
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

// KnownAddress is an address the shop handed out in a payment request.
type KnownAddress struct {
	Seq     int64
	Address string
}
