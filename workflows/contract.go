// Package workflows holds Kernodeck's durable workflows: one RentalWorkflow
// per order and one TopUpWorkflow per top-up. Workflow code is deterministic;
// every side effect runs in an activity (package activities) with an
// idempotency key derived here.
//
// This file is the contract shared with the API, the support CLI and the
// chain watchers: signal, update and query names and their payloads.
package workflows

import (
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// TaskQueue is the task queue the Kernodeck worker polls.
const TaskQueue = "kernodeck"

// Signals sent by the chain watchers (and accepted by both workflows). Each
// carries a PaymentEvent; a payment already counted under the same Key is
// ignored, so a watcher may re-send freely.
//
// The life of one payment (Key) as the watchers report it:
//   - payment-seen: in the node's mempool (Mempool) or in a block not yet
//     deep enough. The order may show "payment detected"; nothing is counted.
//   - payment-confirmed: deep enough for the network's policy: count it.
//   - payment-reverted: gone from the chain. Before confirmation (a reorg, or
//     a mempool transaction replaced (RBF) or double-spent) it is simply
//     not counted. With AfterConfirmation, a reorganisation deeper than the
//     policy removed a payment already signalled confirmed: it must be
//     uncounted (order back to awaiting payment before provisioning, flagged
//     for support after). If the same transaction is mined again, the same
//     Key is seen and confirmed again and counts again.
//
// Outputs below the network's dust threshold are not signalled one by one:
// they are recorded by the watcher and summarised per payment request in
// SignalPaymentDust, so whatever payers send, a workflow receives at most one
// dust signal per request per watcher step.
//
// Payments the watcher cannot count are not signalled at all: another asset
// sent to a request's address (USDT to an ETH request's address), or any
// payment to an address the shop handed out whose watch window has ended.
// They are recorded in chain_payments (to_support set, amount_cents 0) with a
// "payment_to_support" timeline entry on the order or top-up, for support.
const (
	SignalPaymentSeen      = "payment-seen"
	SignalPaymentConfirmed = "payment-confirmed"
	SignalPaymentReverted  = "payment-reverted"
	// SignalPaymentDust carries a DustSummary.
	SignalPaymentDust = "payment-dust"
)

// Updates (synchronous, validated, answer to the caller) common to both workflows.
const (
	// UpdateAttributePayment: support attributes a payment manually (Attribution).
	UpdateAttributePayment = "attribute-payment"
	// UpdateCancel: cancel while unpaid (CancelRequest), by the customer or support.
	UpdateCancel = "cancel"
)

// Queries common to both workflows.
const (
	// QueryStatus returns RentalStatus or TopUpStatus.
	QueryStatus = "status"
)

// PaymentEvent is one on-chain payment (or a part of one) toward an order or
// top-up, as reported by a chain watcher.
type PaymentEvent struct {
	// Target is the workflow the watcher sent it to (domain.Addressed).
	domain.Addressed
	Network string // "bitcoin", "ethereum", ...
	Asset   string // "BTC", "USDT", ...
	TxID    string
	Index   int64 // output index (UTXO chains) or log index (token transfers)
	// AmountBase is the amount in the asset's base units (satoshi, wei, ...),
	// as a decimal string: it may exceed int64.
	AmountBase string
	// AmountCents is the USD value at the payment request's rate.
	AmountCents int64
	IntentID    string
	// Address is the payment request's address the payment went to: with
	// IntentID, Asset and Network it must match one of the workflow's own
	// payment requests (vAddressed).
	Address string `json:",omitempty"`
	// Late is set by the watcher when the payment arrived after the intent's
	// deadline: recorded, never provisioned automatically.
	Late bool
	// Mempool is set on payment-seen for a transaction not yet in a block.
	Mempool bool `json:",omitempty"`
	// AfterConfirmation is set on payment-reverted when the payment had been
	// signalled confirmed (a reorganisation deeper than the policy).
	AfterConfirmation bool `json:",omitempty"`
	// Reversals is how many times the watcher has seen this payment removed
	// by a reorganisation after its confirmation, when it sent this state:
	// the payment's generation. A workflow reads its signals by kind, so a
	// reversal and the confirmation of the same transaction mined again can
	// come in either order within one batch; the generation puts them back
	// in the chain's order.
	Reversals int `json:",omitempty"`
	// StateVersion grows with every change of the payment's state in the
	// watcher's store (seen, confirmed, reverted, seen again). Signals of
	// one batch are read by kind, not in the order sent: a workflow ignores
	// a state older than one it applied (vStateOrder). 0: unknown (a
	// watcher older than the field).
	StateVersion int64 `json:",omitempty"`
}

// DustSummary is the running total of the confirmed outputs below the
// network's dust threshold paid to one payment request (in its asset). Each
// summary replaces the previous one for the same IntentID: a workflow keeps
// the one with the highest Version and ignores older or repeated ones. The
// outputs themselves are in PostgreSQL (chain_payments with dust set) for
// support.
type DustSummary struct {
	domain.Addressed
	Network  string
	Asset    string
	IntentID string
	// Address: see PaymentEvent.Address.
	Address string `json:",omitempty"`
	// Version increases with every summary sent for IntentID.
	Version int64
	// Outputs is how many dust outputs were confirmed so far.
	Outputs int64
	// AmountBase is their total in base units (decimal string).
	AmountBase string
	// AmountCents is the total's USD value at the request's rate.
	AmountCents int64
}

// Key identifies a payment: (network, txid, index). Seen twice, counted once.
func (p PaymentEvent) Key() string { return domain.PaymentKey(p.Network, p.TxID, p.Index) }

// Support inputs are domain types: each validates itself, the same way in
// the API and in the workflows.
type (
	Attribution   = domain.Attribution
	CancelRequest = domain.CancelRequest
	SupportAction = domain.SupportActionInput
	Extension     = domain.Extension
	Refund        = domain.Refund
)

// Search attribute names registered on the Temporal namespace, so operators
// find workflows in the Web UI (all Keyword).
const (
	SearchAttrRef      = "KdRef"
	SearchAttrCustomer = "KdCustomer"
	SearchAttrStatus   = "KdStatus"
	SearchAttrGPU      = "KdGPU"
	SearchAttrAsset    = "KdAsset"
	SearchAttrNetwork  = "KdNetwork"
	SearchAttrKind     = "KdKind"
)

// SearchAttributeNames lists the custom search attributes, for registration.
var SearchAttributeNames = []string{
	SearchAttrRef, SearchAttrCustomer, SearchAttrStatus, SearchAttrGPU,
	SearchAttrAsset, SearchAttrNetwork, SearchAttrKind,
}

// Defaults for workflow configuration. The configuration is captured in the
// workflow input at start, so changing it never alters a running workflow.
const (
	DefaultUnpaidTimeout        = 24 * time.Hour
	DefaultTopUpTimeout         = 24 * time.Hour
	DefaultProvisioningAttempts = 5
)

// DefaultReminderOffsets are the reminders before the end of a rental.
var DefaultReminderOffsets = []time.Duration{48 * time.Hour, 6 * time.Hour}
