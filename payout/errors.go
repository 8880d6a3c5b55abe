package payout

import (
	"errors"

	"github.com/kernodeck/kernodeck/domain"
)

// Refusal is a refused address or signed transaction. It is both a
// domain error (code invalid, a field, a French message for the customer
// or the operator) and one of this package's reason sentinels, so a caller
// matches the reason with errors.Is and answers with domain.ErrorCode and
// domain.ErrorMessage. Messages never repeat what was submitted.
type Refusal struct {
	Reason error
	Domain *domain.Error
}

func (r *Refusal) Error() string { return r.Domain.Error() }

// Unwrap lets errors.Is find the reason and errors.As the domain error.
func (r *Refusal) Unwrap() []error { return []error{r.Reason, r.Domain} }

func refuse(reason error, field, message string) *Refusal {
	return &Refusal{Reason: reason, Domain: domain.FieldError(field, message)}
}

// Reasons an address is refused.
var (
	ErrAddressFormat   = errors.New("payout: not an address of the network")
	ErrAddressChecksum = errors.New("payout: address checksum mismatch")
	// ErrAddressAmbiguous: a Litecoin address that is a Bitcoin address too.
	ErrAddressAmbiguous = errors.New("payout: address valid on another network too")
	// ErrAddressUnspendable: well-formed, but no one can spend what it
	// receives (burn address, unknown witness version, a key off the curve).
	ErrAddressUnspendable = errors.New("payout: address whose funds no wallet can spend")
	// ErrAddressContract: a token contract or mint, not a wallet.
	ErrAddressContract = errors.New("payout: address of a token contract")
	// ErrAddressOwn: one of the shop's own addresses.
	ErrAddressOwn = errors.New("payout: one of the shop's own addresses")
	// ErrMethod: not one of the shop's methods.
	ErrMethod = errors.New("payout: unknown payment method")
)

// Reasons a signed transaction is refused (CheckSigned).
var (
	ErrUnreadable    = errors.New("payout: neither a raw transaction in hex nor a PSBT in base64")
	ErrNotFinal      = errors.New("payout: PSBT not finalized")
	ErrForeignInput  = errors.New("payout: spends an output that is not one of the batch's inputs")
	ErrMissingInput  = errors.New("payout: does not spend every input of the batch")
	ErrUnsigned      = errors.New("payout: an input's signature does not verify")
	ErrAmountChanged = errors.New("payout: an approved address is paid another amount")
	ErrDuplicate     = errors.New("payout: an approved payout is paid twice")
	ErrExtraOutput   = errors.New("payout: an output the batch does not have")
	ErrMissingOutput = errors.New("payout: an approved payout is not paid")
	ErrChangeChanged = errors.New("payout: the change output differs from the batch's")
	ErrFeeChanged    = errors.New("payout: the fee differs from the batch's")
	// ErrTxChanged: version, locktime or a sequence differs, so the txid
	// is not the one the batch watches for.
	ErrTxChanged = errors.New("payout: the transaction's version, locktime or sequences differ from the batch's")
)
