package domain

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// A customer's extension of their own rental (issue 39, item 2): 3, 7 or
// 30 more days on the same machine, at the catalog's lot price for that
// length times the order's lots, paid from the balance or by a crypto
// payment (a top-up of the extension's exact amount, credited then
// debited for it).

// ExtensionDays are the lengths a customer may add: the catalog's.
var ExtensionDays = []int{3, 7, 30}

// Extension states and payment methods.
const (
	ExtensionReserved = "reserved" // checked and reserved, awaiting its payment
	ExtensionPaid     = "paid"     // paid and applied to the rental
	ExtensionLapsed   = "lapsed"   // not applied; what was received stays on the balance

	ExtensionByBalance = "balance"
	ExtensionByCrypto  = "crypto"

	ExtensionRefPrefix = "EX"
)

// ExtensionRequest is what a customer asks: the days to add, how they pay,
// and a key of their own that makes a retried request the same extension.
type ExtensionRequest struct {
	Days           int    `json:"days"`
	Method         string `json:"method"`
	IdempotencyKey string `json:"-"`
}

// Validate checks the request's shape.
func (r ExtensionRequest) Validate() error {
	if !slices.Contains(ExtensionDays, r.Days) {
		return FieldError("days", "Une location se prolonge de 3, 7 ou 30 jours.")
	}
	if r.Method != ExtensionByBalance && r.Method != ExtensionByCrypto {
		return FieldError("method", "Choisissez de payer la prolongation avec votre solde (balance) ou en crypto (crypto).")
	}
	if n := len(r.IdempotencyKey); n < 8 || n > 200 {
		return FieldError("idempotency_key", "La demande doit porter une clé d'idempotence (en-tête Idempotency-Key) de 8 à 200 caractères.")
	}
	return nil
}

// ExtensionRefFor is the extension's reference for an account's
// idempotency key: the same key always names the same extension, so a
// retried request, or two sent at once, extend the rental once.
func ExtensionRefFor(accountID int64, key string) string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	sum := sha256.Sum256([]byte("kernodeck-extension\x00" + strconv.FormatInt(accountID, 10) + "\x00" + key))
	b := []byte(ExtensionRefPrefix + "-")
	for _, c := range sum[:10] {
		b = append(b, alphabet[int(c)%32])
	}
	return string(b)
}

// RentalExtension is one extension of an order, as its customer sees it.
type RentalExtension struct {
	Ref         string `json:"reference" db:"ref"`
	OrderRef    string `json:"order_reference" db:"order_ref"`
	AccountID   int64  `json:"-" db:"account_id"`
	Days        int    `json:"days" db:"days"`
	AmountCents int64  `json:"amount_cents" db:"amount_cents"`
	Method      string `json:"method" db:"method"`
	State       string `json:"state" db:"state"`
	// Reason says, in French, why a lapsed extension was not applied.
	Reason string `json:"reason,omitempty" db:"reason"`
	// HeldUntil is when the reservation of an unpaid extension ends.
	HeldUntil time.Time `json:"held_until" db:"held_until"`
	// PeriodEnd is the rental's end once this extension was applied (nil
	// before, or when it was applied before the period started).
	PeriodEnd *time.Time `json:"period_end" db:"period_end"`
	// TopUpRef is the top-up that takes its crypto payment.
	TopUpRef  *string    `json:"topup_reference,omitempty" db:"topup_ref"`
	CreatedAt time.Time  `json:"created_at" db:"created_at"`
	PaidAt    *time.Time `json:"paid_at" db:"paid_at"`
	LapsedAt  *time.Time `json:"lapsed_at" db:"lapsed_at"`
}

// ExtensionOffer is one length a rental may be extended by, priced.
type ExtensionOffer struct {
	Days        int    `json:"days"`
	AmountCents int64  `json:"amount_cents"`
	AmountUSD   string `json:"amount_usd"`
	// NewPeriodEnd is the end the rental would have (nil before its period
	// started: the days add to the period when it starts).
	NewPeriodEnd *time.Time `json:"new_period_end"`
}

// ExtensionOffers is what a customer may add to their rental now: the
// offers, or why none may be asked (Code, Message), and the extensions
// asked so far, newest first.
type ExtensionOffers struct {
	OrderRef   string            `json:"order_reference"`
	PeriodEnd  *time.Time        `json:"period_end"`
	Available  bool              `json:"available"`
	Code       string            `json:"code,omitempty"`
	Message    string            `json:"message,omitempty"`
	Offers     []ExtensionOffer  `json:"offers"`
	Extensions []RentalExtension `json:"extensions"`
}

// ExtendableStatus reports whether an order in status may be extended by
// its customer: paid (its period not started yet) or active.
func ExtendableStatus(status string) bool {
	return status == StatusPaid || status == StatusProvisioning || status == StatusActive
}

// ErrNotExtendable refuses an extension of an order that is not paid or
// active (ending, ended, unpaid, closed...): nothing changes.
var ErrNotExtendable = &Error{Code: ECodeConflict,
	Message: "Cette location ne peut pas être prolongée : seule une location payée ou en cours, qui n'arrive pas à sa fin, peut l'être. Rien n'a été débité."}

// ExtensionMessage is the timeline's words of a customer's extension
// applied: to end newEnd, or added to a period not started yet.
func ExtensionMessage(days int, amountCents int64, newEnd *time.Time, method string) string {
	paid := "débités de votre solde"
	if method == ExtensionByCrypto {
		paid = "réglés par votre paiement en crypto"
	}
	if newEnd != nil {
		return fmt.Sprintf("Vous avez prolongé la location de %s (%s USD %s) : nouvelle fin le %s.",
			Plural(days, "jour", "jours"), FormatUSD(amountCents), paid, newEnd.UTC().Format("02/01/2006 à 15:04 UTC"))
	}
	return fmt.Sprintf("Vous avez prolongé la location de %s (%s USD %s), qui s'ajoutent à la période quand la machine est prête.",
		Plural(days, "jour", "jours"), FormatUSD(amountCents), paid)
}

// ExtensionNew is an extension to reserve or pay: its reference (from
// the customer's key), order, days, method and the price the customer was
// shown.
type ExtensionNew struct {
	Ref         string
	OrderRef    string
	AccountID   int64
	Days        int
	Method      string
	AmountCents int64
	// HeldUntil ends the reservation of a crypto extension: its top-up's
	// payment window.
	HeldUntil time.Time
}

// ExtensionPayment pays an extension and applies it to the order, as one
// transition of the order: its event (Key, Kind, Message, Status, the new
// PeriodEnd when the period runs) with the balance's debit.
type ExtensionPayment struct {
	ExtensionNew
	At        time.Time
	Status    string
	PeriodEnd *time.Time
	Message   string
}

// ExtensionOutcome is what PayExtension did: Paid (now or before), or
// Lapsed with the reason the customer reads.
type ExtensionOutcome struct {
	Paid   bool
	Lapsed bool
	Reason string
}
