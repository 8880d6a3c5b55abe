package domain

import (
	"fmt"
	"time"
)

// Money rules shared by the API, the workflows and the store: each input
// validates itself (Validate), and the bounds that depend on state are
// functions of that state, so every layer refuses the same thing with the
// same code and message.

// Bounds of support inputs.
const (
	MinExtendDays = 1
	MaxExtendDays = 30
	// MaxSupportCents bounds any amount support types (1,000,000 USD): a
	// typo never reaches the workflow.
	MaxSupportCents = 1_000_000_00
)

// Targets of payments: an order or a top-up.
const (
	TargetOrder = "order"
	TargetTopUp = "topup"
	// TargetPayout: a payout's watch, whose target is its batch.
	TargetPayout = "payout"
)

// SupportActionInput carries who and why for the support updates without a
// parameter of their own (end early, retry provisioning).
type SupportActionInput struct {
	Addressed
	ActionID int64
	Agent    string
	Reason   string
}

// Validate checks the action's identity.
func (a SupportActionInput) Validate() error { return validateActionID(a.ActionID) }

func validateActionID(id int64) error {
	if id <= 0 {
		return FieldError("action_id", "L'identifiant de l'action de support est manquant.")
	}
	return nil
}

// Extension extends a running (or not yet started) rental by whole days:
// support's (ActionID, Agent, Reason) or, with ExtensionRef, the
// customer's own, paid (RentalExtension).
type Extension struct {
	Addressed
	ActionID int64
	Agent    string
	Days     int
	Reason   string
	// ExtensionRef names a customer's extension (ExtensionRefFor); Method
	// is how it is paid and AmountCents the price the customer was shown,
	// which the store checks against the catalog's.
	ExtensionRef string `json:",omitempty"`
	Method       string `json:",omitempty"`
	AmountCents  int64  `json:",omitempty"`
}

// ByCustomer reports whether the extension is the customer's own.
func (e Extension) ByCustomer() bool { return e.ExtensionRef != "" }

// Validate checks the extension's bounds and its action (support's) or
// its reference, method and price (the customer's).
func (e Extension) Validate() error {
	if e.ByCustomer() {
		if err := (ExtensionRequest{Days: e.Days, Method: e.Method, IdempotencyKey: e.ExtensionRef}).Validate(); err != nil {
			return err
		}
		if e.ActionID != 0 || e.AmountCents <= 0 || e.AmountCents > MaxSupportCents {
			return FieldError("amount_cents", "Le prix de la prolongation est invalide.")
		}
		return nil
	}
	if err := e.ValidateParams(); err != nil {
		return err
	}
	return validateActionID(e.ActionID)
}

// ValidateParams checks what support asks (the API, before the action is
// recorded and has its ID).
func (e Extension) ValidateParams() error {
	if e.Days < MinExtendDays || e.Days > MaxExtendDays {
		return FieldError("days", fmt.Sprintf("La prolongation est de %d à %d jours entiers.", MinExtendDays, MaxExtendDays))
	}
	return nil
}

// Refund credits an amount of an order back to the customer's balance.
type Refund struct {
	Addressed
	ActionID    int64
	Agent       string
	AmountCents int64
	Reason      string
}

// Validate checks the amount's shape; CheckRefund checks it against what
// may still be refunded.
func (r Refund) Validate() error {
	if err := r.ValidateParams(); err != nil {
		return err
	}
	return validateActionID(r.ActionID)
}

// ValidateParams checks the amount alone (see Extension.ValidateParams).
func (r Refund) ValidateParams() error {
	if r.AmountCents <= 0 || r.AmountCents > MaxSupportCents {
		return FieldError("amount_cents", "Indiquez le montant à rembourser sur le solde, en cents (positif).")
	}
	return nil
}

// CheckRefund refuses a refund above what was received and is neither
// kept nor already refunded (refundable).
func CheckRefund(amountCents, refundableCents int64) error {
	if amountCents > refundableCents {
		return Errorf(ECodeConflict, "Le remboursement dépasse ce qui peut encore être remboursé (%s USD au plus).",
			FormatUSD(max(refundableCents, 0)))
	}
	return nil
}

// CheckBalance refuses a debit of dueCents from an available balance that
// does not cover it.
func CheckBalance(availableCents, dueCents int64) error {
	if availableCents < dueCents {
		return Errorf(ECodeInsufficient, "Votre solde disponible (%s USD) ne couvre pas le total de la commande (%s USD).",
			FormatUSD(availableCents), FormatUSD(dueCents))
	}
	return nil
}

// Attribution is a support agent's manual attribution of a payment to an
// order or a top-up. With ExceptionID it counts that received amount (a
// payment left unsettled, e.g. late); without, it records money received
// by other means, bounded by what is still due and never refundable.
type Attribution struct {
	Addressed
	ActionID    int64 // support_actions.id, the idempotency key
	Agent       string
	AmountCents int64 // USD value attributed; 0 means "the full amount due"
	Reason      string
	ExceptionID int64
}

// Validate checks the attribution's shape.
func (a Attribution) Validate() error {
	if err := a.ValidateParams(); err != nil {
		return err
	}
	return validateActionID(a.ActionID)
}

// ValidateParams checks the amount alone (see Extension.ValidateParams).
func (a Attribution) ValidateParams() error {
	if a.AmountCents < 0 || a.AmountCents > MaxSupportCents {
		return FieldError("amount_cents", "Le montant attribué doit être positif (0 : le montant dû).")
	}
	return nil
}

// CheckAttribution refuses an attribution above what is still due.
func CheckAttribution(amountCents, dueCents int64) error {
	if amountCents > dueCents {
		return Errorf(ECodeConflict, "Le montant attribué (%s USD) dépasse ce qui reste dû (%s USD).",
			FormatUSD(amountCents), FormatUSD(dueCents))
	}
	return nil
}

// CancelRequest cancels an unpaid order or top-up.
type CancelRequest struct {
	Addressed
	By       string // "customer" or "support"
	ActionID int64  // support action ID, 0 for the customer
	Agent    string
	Reason   string
}

// Exception reasons: why a received amount was not counted.
const (
	ExceptionLate       = "late"        // confirmed after its payment request's deadline
	ExceptionOver       = "over"        // the part above the total
	ExceptionExtra      = "extra"       // arrived when the target no longer awaited payment
	ExceptionPartial    = "partial"     // counted, then the target expired unpaid
	ExceptionAfterClose = "after_close" // arrived after the target's workflow closed
	// ExceptionDust is the running total of the dust outputs paid to one
	// payment request (PaymentKey DustKey(intent)): never provisioned
	// automatically, counted or refunded by support like the others.
	ExceptionDust = "dust"
	// ExceptionReverted flags a payment a deep reorganisation removed after
	// its confirmation, once provisioning started or a top-up was credited
	// (or when money was already paid out of it). It is not money: nothing
	// to count or refund (RemainingCents 0); support resolves it
	// (ExceptionResolve). ShortfallCents is what was counted or paid out on
	// the strength of the payment and could not be taken back.
	ExceptionReverted = "reverted"
	// Recorded by the watchers, never signalled (chain_payments.to_support):
	ExceptionOtherAsset = "other_asset" // another asset sent to a request's address: no value until support states one
	ExceptionNotWatched = "not_watched" // paid after the request's watch window, valued at its rate
)

// DustKey is the payment key of a payment request's dust total.
func DustKey(intentID string) string { return "dust:" + intentID }

// Exception is a received amount not settled: neither counted toward its
// order or top-up nor refunded yet. It stays in support's queue until
// CountedCents + RefundedCents reaches AmountCents.
type Exception struct {
	ID            int64  `json:"id" db:"id"`
	TargetKind    string `json:"target_kind" db:"target_kind"`
	TargetRef     string `json:"target_reference" db:"target_ref"`
	AccountID     int64  `json:"account_id" db:"account_id"`
	Email         string `json:"customer_email" db:"email"`
	Reason        string `json:"reason" db:"reason"`
	PaymentKey    string `json:"payment_key" db:"payment_key"`
	Network       string `json:"network" db:"network"`
	TxID          string `json:"txid" db:"txid"`
	Asset         string `json:"asset" db:"asset"`
	AmountBase    string `json:"amount_base_units" db:"amount_base"`
	AmountCents   int64  `json:"amount_cents" db:"amount_cents"`
	CountedCents  int64  `json:"counted_cents" db:"counted_cents"`
	RefundedCents int64  `json:"refunded_cents" db:"refunded_cents"`
	// VoidedCents left the queue with its payment (reorganisation).
	VoidedCents    int64 `json:"voided_cents" db:"voided_cents"`
	ShortfallCents int64 `json:"shortfall_cents" db:"shortfall_cents"`
	// DebitedCents of the shortfall were taken back from the customer's
	// balance (all of it, once the transition that set it commits).
	DebitedCents int64 `json:"debited_cents" db:"debited_cents"`
	// AtRiskCents of it the balance could not cover: the customer's debt
	// (at most DebitedCents), money the shop may not see again.
	AtRiskCents int64      `json:"at_risk_cents" db:"at_risk_cents"`
	ResolvedAt  *time.Time `json:"resolved_at,omitempty" db:"resolved_at"`
	Resolution  string     `json:"resolution,omitempty" db:"resolution"`
	// NeedsValue: received in an asset the request had no rate for; open
	// until support states its USD value (ExceptionValue).
	NeedsValue bool      `json:"needs_value" db:"needs_value"`
	CreatedAt  time.Time `json:"created_at" db:"created_at"`
}

// RemainingCents is what is still to count or refund (none for a
// reverted payment's flag: it is not money).
func (e Exception) RemainingCents() int64 {
	if e.Reason == ExceptionReverted {
		return 0
	}
	return e.AmountCents - e.CountedCents - e.RefundedCents - e.VoidedCents
}

// NewException is an unsettled amount a transition puts in the queue.
type NewException struct {
	Reason      string
	PaymentKey  string
	Network     string
	TxID        string
	Asset       string
	AmountBase  string
	AmountCents int64
	// ShortfallCents (ExceptionReverted): counted on the strength of the
	// payment and not taken back by the workflow (a credited top-up).
	ShortfallCents int64
}

// Reversal is what a payment removed from the chain after its
// confirmation does to support's queue, in its transition: the payment's
// queued remainders are voided, and its ExceptionReverted row (in the
// event's Exceptions, if the workflow flags it) gets as shortfall what
// was refunded from them plus its own. With Remined the same payment is
// back on chain: the flag is resolved ("remined") once its shortfall, less
// RecoveredCents, is nothing.
//
// With Restore (a credited top-up's payment mined again: nothing of it is
// counted anew), the remainders its reversal voided are queued again as
// they were, and what was refunded from them no longer counts as shortfall.
type Reversal struct {
	PaymentKey     string
	Remined        bool
	RecoveredCents int64
	Restore        bool `json:",omitempty"`
}

// Resolutions of a reverted payment's flag.
const (
	ResolutionAcknowledged = "acknowledged" // by support, with who and why
	ResolutionRemined      = "remined"      // the payment came back on chain
)

// ExceptionResolve is support's resolution of a reverted payment's flag
// (the rental goes on, or support ends it apart with end-early).
type ExceptionResolve struct {
	Addressed
	ExceptionID int64
	ActionID    int64
	Agent       string
	Reason      string
}

// Validate checks the resolution's shape.
func (r ExceptionResolve) Validate() error {
	if r.ExceptionID <= 0 {
		return FieldError("id", "Indiquez le signalement à clore.")
	}
	return validateActionID(r.ActionID)
}

// ExceptionUse counts or refunds part of an exception.
type ExceptionUse struct {
	ExceptionID int64
	Cents       int64
	Refund      bool // false: counted toward the target
	// Resolve closes a reverted payment's flag (Cents 0).
	Resolve *ExceptionResolve `json:",omitempty"`
}

// Ledger posting kinds a transition may carry.
const (
	PostingOrderPayment = "order_payment" // customer balance -> revenue
	PostingTopUp        = "topup"         // crypto receipts -> customer balance
	PostingRefund       = "refund"        // refunds -> customer balance
	// PostingReversal takes back from a balance what was paid out to it
	// on a payment the chain removed (customer balance -> reversals), or
	// gives it back when the payment is mined again; it alone may leave a
	// balance below zero (a debt).
	PostingReversal = "reversal"
)

// Posting is the ledger transaction caused by a transition's event, applied
// in the same database transaction (keyed by the event: applied once).
type Posting struct {
	Kind      string
	AccountID int64
	Cents     int64
	Memo      string
}

// ExceptionValue states, once, the USD value of a queued amount received in
// another asset (NeedsValue), valued by support at that asset's rate when
// it came in. It is then refunded or counted like any queued amount; a value
// of 0 closes it (sent back on chain, nothing owed). Its fields are a
// refund's, AmountCents being the value, and Approved.
//
// The store refuses a value outside the amount's ValueBound
// (ECodeValueOutOfBounds). When no rate was observed near the payment's
// reception (ValueBound.Known false), it refuses any value
// (ECodeValueUnbounded) unless Approved.
type ExceptionValue struct {
	Addressed
	ExceptionID int64
	ActionID    int64
	Agent       string
	AmountCents int64
	Reason      string
	// Approved: a second agent approved this value (four-eyes review of
	// the support action). It is only needed, and only used, when no rate
	// bounds the value; it never lifts a known bound.
	Approved bool `json:",omitempty"`
}

// Validate checks the value's shape.
func (v ExceptionValue) Validate() error {
	err := ExceptionRefund{Addressed: v.Addressed, ExceptionID: v.ExceptionID, ActionID: v.ActionID, Agent: v.Agent,
		AmountCents: v.AmountCents, Reason: v.Reason}.Validate()
	if de, ok := err.(*Error); ok && de.Field == "amount_cents" {
		return FieldError("amount_cents", "La valeur doit être positive (0 : renvoyé sur la chaîne, rien n'est dû).")
	}
	return err
}

// ExceptionRefund refunds part of an exception to the balance.
type ExceptionRefund struct {
	Addressed
	ExceptionID int64
	ActionID    int64
	Agent       string
	AmountCents int64 // 0: all that remains
	Reason      string
}

// Validate checks the refund's shape.
func (r ExceptionRefund) Validate() error {
	if err := r.ValidateParams(); err != nil {
		return err
	}
	return validateActionID(r.ActionID)
}

// ValidateParams checks the queued amount and the amount alone (see
// Extension.ValidateParams).
func (r ExceptionRefund) ValidateParams() error {
	if r.ExceptionID <= 0 {
		return FieldError("id", "Indiquez le montant en attente à rembourser.")
	}
	if r.AmountCents < 0 || r.AmountCents > MaxSupportCents {
		return FieldError("amount_cents", "Le montant à rembourser doit être positif (0 : tout ce qui reste).")
	}
	return nil
}

// Workflow IDs of an order's and a top-up's workflows, and of the
// settlement workflow that refunds their unsettled amounts.
func RentalWorkflowID(orderRef string) string      { return "rental-" + orderRef }
func TopUpWorkflowID(topUpRef string) string       { return "topup-" + topUpRef }
func SettlementWorkflowID(targetRef string) string { return "settle-" + targetRef }

// PayFromBalanceInput pays an order from the customer's balance.
type PayFromBalanceInput struct {
	OrderRef    string
	AccountID   int64
	AmountCents int64
	At          time.Time
	// PaidCents is the order's paid amount with this debit (crypto counted
	// before it included); 0 from workflows started before it existed.
	PaidCents int64 `json:",omitempty"`
}

// CreditTopUpInput credits a covered top-up.
type CreditTopUpInput struct {
	TopUpRef    string
	AccountID   int64
	AmountCents int64
	At          time.Time
}

// RefundInput is the ledger half of an order refund of rentals started
// before refunds became one transition.
type RefundInput struct {
	Ref         string // order reference
	AccountID   int64
	AmountCents int64
	ActionID    int64 // support action: the idempotency key
	Agent       string
	Reason      string
	At          time.Time
}

// FoundCase is an order or a top-up found by support's search.
type FoundCase struct {
	Kind      string `json:"kind" db:"kind"`
	Ref       string `json:"reference" db:"ref"`
	Email     string `json:"customer_email" db:"email"`
	Status    string `json:"status" db:"status"`
	AmountCts int64  `json:"amount_cents" db:"amount_cents"`
	// Matched says what matched: reference, email, txid or address.
	Matched string `json:"matched" db:"matched"`
}

// The support_actions row each support update claims to carry out (see
// SupportAction.Check), on the order or top-up ref.

// Claim of an attribution (a queued amount's count included).
func (a Attribution) Claim(ref string) SupportActionClaim {
	return SupportActionClaim{ID: a.ActionID, TargetRef: ref, Action: ActionAttributePayment, Agent: a.Agent,
		Params: map[string]int64{"amount_cents": a.AmountCents, "exception_id": a.ExceptionID}}
}

// Claim of a support cancellation.
func (c CancelRequest) Claim(ref string) SupportActionClaim {
	return SupportActionClaim{ID: c.ActionID, TargetRef: ref, Action: ActionCancel, Agent: c.Agent}
}

// Claim of an extension.
func (e Extension) Claim(ref string) SupportActionClaim {
	return SupportActionClaim{ID: e.ActionID, TargetRef: ref, Action: ActionExtend, Agent: e.Agent,
		Params: map[string]int64{"days": int64(e.Days)}}
}

// Claim of a refund to the balance.
func (r Refund) Claim(ref string) SupportActionClaim {
	return SupportActionClaim{ID: r.ActionID, TargetRef: ref, Action: ActionRefund, Agent: r.Agent,
		Params: map[string]int64{"amount_cents": r.AmountCents}}
}

// Claim of an action without parameters (end early, retry provisioning).
func (a SupportActionInput) Claim(ref, action string) SupportActionClaim {
	return SupportActionClaim{ID: a.ActionID, TargetRef: ref, Action: action, Agent: a.Agent}
}

// Claim of a queued amount's refund.
func (r ExceptionRefund) Claim(ref string) SupportActionClaim {
	return SupportActionClaim{ID: r.ActionID, TargetRef: ref, Action: ActionRefundException, Agent: r.Agent,
		Params: map[string]int64{"exception_id": r.ExceptionID, "amount_cents": r.AmountCents}}
}

// Claim of a reverted payment's resolution.
func (r ExceptionResolve) Claim(ref string) SupportActionClaim {
	return SupportActionClaim{ID: r.ActionID, TargetRef: ref, Action: ActionResolveException, Agent: r.Agent,
		Params: map[string]int64{"exception_id": r.ExceptionID}}
}
