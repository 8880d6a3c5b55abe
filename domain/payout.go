package domain

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// A payout sends a customer's available balance back to a wallet of theirs
// (issue 39). Its amount is held from the balance when it is asked; it can
// be cancelled until its batch is signed; it is done, and debited for good,
// when the chain watchers see its transfer confirmed.

// PayoutRefPrefix begins a payout's reference (PayoutBatchRefPrefix a
// batch's).
const (
	PayoutRefPrefix      = "PO"
	PayoutBatchRefPrefix = "PB"
)

// PayoutStatus is where a payout stands.
type PayoutStatus string

// Payout statuses.
const (
	PayoutRequested PayoutStatus = "requested" // held, waiting for an agent
	PayoutApproved  PayoutStatus = "approved"  // waiting for the next batch
	PayoutBatched   PayoutStatus = "batched"   // in an exported batch, not signed yet
	PayoutSigned    PayoutStatus = "signed"    // signed off the server; waiting for the chain
	PayoutSeen      PayoutStatus = "seen"      // its transfer is on the chain, not confirmed yet
	PayoutDone      PayoutStatus = "done"      // confirmed: debited for good
	PayoutCancelled PayoutStatus = "cancelled" // by the customer: the amount is back on the balance
	PayoutDeclined  PayoutStatus = "declined"  // by an agent: the amount is back on the balance
)

// payoutMoves are the only changes of a payout's status; the store refuses
// any other (one writer: postgres.Payouts.move).
var payoutMoves = map[PayoutStatus][]PayoutStatus{
	PayoutRequested: {PayoutApproved, PayoutCancelled, PayoutDeclined},
	PayoutApproved:  {PayoutBatched, PayoutCancelled, PayoutDeclined},
	PayoutBatched:   {PayoutSigned, PayoutApproved, PayoutCancelled},
	PayoutSigned:    {PayoutSeen, PayoutDone},
	// A reorganisation takes a seen or confirmed transfer off the chain:
	// the payout waits for it again; its debit, if done, stays posted once.
	PayoutSeen: {PayoutDone, PayoutSigned},
	PayoutDone: {PayoutSigned},
}

// CanMove reports whether a payout may go from one status to another.
func (s PayoutStatus) CanMove(to PayoutStatus) bool { return slices.Contains(payoutMoves[s], to) }

// Cancellable reports whether the customer may still cancel (not signed).
func (s PayoutStatus) Cancellable() bool { return s.CanMove(PayoutCancelled) }

// Held reports whether the payout's amount is held from the balance.
func (s PayoutStatus) Held() bool {
	return s != PayoutDone && s != PayoutCancelled && s != PayoutDeclined
}

// Label is the status in French, for people.
func (s PayoutStatus) Label() string {
	return map[PayoutStatus]string{
		PayoutRequested: "en attente de validation",
		PayoutApproved:  "validé, en attente d'envoi",
		PayoutBatched:   "en préparation d'envoi",
		PayoutSigned:    "envoyé, en attente de la blockchain",
		PayoutSeen:      "vu sur la blockchain, en attente de confirmations",
		PayoutDone:      "confirmé",
		PayoutCancelled: "annulé",
		PayoutDeclined:  "refusé",
	}[s]
}

// Payout is one payout.
type Payout struct {
	Ref         string       `json:"reference" db:"ref"`
	AccountID   int64        `json:"-" db:"account_id"`
	Asset       string       `json:"asset" db:"asset"`
	Network     string       `json:"network" db:"network"`
	Address     string       `json:"address" db:"address"`
	AmountCents int64        `json:"amount_cents" db:"amount_cents"`
	FeeCents    int64        `json:"fee_cents" db:"fee_cents"`
	Decimals    int32        `json:"decimals" db:"decimals"`
	AmountBase  BigInt       `json:"amount_base_units" db:"amount_base"`
	Rate        string       `json:"rate_usd_per_unit" db:"rate"`
	RateAt      time.Time    `json:"rate_at" db:"rate_at"`
	Status      PayoutStatus `json:"status" db:"status"`
	NeedsTwo    bool         `json:"-" db:"needs_two"`
	ApprovedBy  *string      `json:"-" db:"approved_by"`
	SecondBy    *string      `json:"-" db:"second_by"`
	DeclinedBy  *string      `json:"-" db:"declined_by"`
	Reason      *string      `json:"-" db:"reason"`
	BatchRef    *string      `json:"-" db:"batch_ref"`
	TxID        *string      `json:"txid,omitempty" db:"txid"`
	CreatedAt   time.Time    `json:"created_at" db:"created_at"`
	UpdatedAt   time.Time    `json:"updated_at" db:"updated_at"`
	// Email is the customer's (support's views).
	Email string `json:"-" db:"email"`
}

// Amount is what the customer receives, in whole units, exact.
func (p Payout) Amount() string { return FormatUnits(&p.AmountBase.Int, p.Decimals) }

// PayoutEvent is one line of a payout's timeline.
type PayoutEvent struct {
	Status    PayoutStatus `json:"status" db:"status"`
	Message   string       `json:"message" db:"message"`
	Actor     string       `json:"-" db:"actor"`
	CreatedAt time.Time    `json:"at" db:"created_at"`
}

// PayoutLimits bound what an account takes out.
type PayoutLimits struct {
	MinCents   int64            // smallest payout
	DailyCents int64            // an account's payouts asked over the last 24 hours
	FeeCents   map[string]int64 // the network fee charged per network, in the payout
}

// Defaults of PayoutLimits' zero fields.
const (
	DefaultPayoutMinCents   = 10_00    // 10 USD
	DefaultPayoutDailyCents = 2_000_00 // 2,000 USD
	PayoutDailyWindow       = 24 * time.Hour
)

// DefaultPayoutFeeCents is the network fee charged per network when none is
// configured: what one transfer costs there on a busy day, rounded up.
var DefaultPayoutFeeCents = map[string]int64{
	NetworkBitcoin: 3_00, NetworkLitecoin: 10, NetworkEthereum: 2_00, NetworkTron: 1_50, NetworkSolana: 5,
}

// WithDefaults fills the zero fields.
func (l PayoutLimits) WithDefaults() PayoutLimits {
	if l.MinCents <= 0 {
		l.MinCents = DefaultPayoutMinCents
	}
	if l.DailyCents <= 0 {
		l.DailyCents = DefaultPayoutDailyCents
	}
	fees := map[string]int64{}
	for n, c := range DefaultPayoutFeeCents {
		fees[n] = c
	}
	for n, c := range l.FeeCents {
		fees[n] = c
	}
	l.FeeCents = fees
	return l
}

// PayoutAsk is what a customer asks: an amount of their balance sent as
// one asset on one network to an address.
type PayoutAsk struct {
	Asset       string `json:"asset"`
	Network     string `json:"network"`
	Address     string `json:"address"`
	AmountCents int64  `json:"amount_cents"`
}

// Validate checks the shape of the ask (the address itself is checked per
// network by package payout, which knows the formats).
func (a PayoutAsk) Validate(l PayoutLimits) error {
	if _, ok := LookupMethod(a.Asset, a.Network); !ok {
		return Errorf(ECodeInvalid, "Ce moyen de retrait n'existe pas : choisissez une des cryptomonnaies proposées et son réseau.")
	}
	a.Address = strings.TrimSpace(a.Address)
	if a.Address == "" {
		return Errorf(ECodeInvalid, "Indiquez l'adresse de votre portefeuille qui recevra le retrait.")
	}
	if a.AmountCents < l.MinCents {
		return Errorf(ECodePayoutLimit, "Le retrait minimal est de %s.", FrenchUSD(l.MinCents))
	}
	if fee := l.FeeCents[a.Network]; a.AmountCents <= fee {
		return Errorf(ECodePayoutLimit, "Le montant ne couvre pas les frais de réseau (%s).", FrenchUSD(fee))
	}
	return nil
}

// PayoutQuote is an ask priced at a locked rate: what the customer sees
// before confirming, and what the payout then holds to.
type PayoutQuote struct {
	PayoutAsk
	FeeCents   int64     `json:"fee_cents"`
	Decimals   int32     `json:"decimals"`
	AmountBase BigInt    `json:"amount_base_units"`
	Amount     string    `json:"amount"`
	Rate       string    `json:"rate_usd_per_unit"`
	RateAt     time.Time `json:"rate_at"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// PayoutQuoteTTL is how long a quote's rate holds.
const PayoutQuoteTTL = 10 * time.Minute

// NewPayout is a quote the customer confirmed, with the key that makes a
// retried confirmation the same payout.
type NewPayout struct {
	AccountID  int64
	Quote      PayoutQuote
	RequestKey string
	NeedsTwo   bool
	Daily      int64 // the account's daily limit
}

// ErrPayoutNotCancellable refuses to cancel a payout already signed.
func ErrPayoutNotCancellable(s PayoutStatus) *Error {
	return Errorf(ECodeConflict, "Ce retrait ne peut plus être annulé : il est %s.", s.Label())
}

// PayoutKey names a payout's ledger postings: held, released, sent.
func PayoutKey(what, ref string) string { return fmt.Sprintf("payout_%s:%s", what, ref) }

// PayoutBatch is a set of approved payouts of one asset on one network,
// exported for signing off the server.
type PayoutBatch struct {
	Ref       string  `json:"reference" db:"ref"`
	Network   string  `json:"network" db:"network"`
	Asset     string  `json:"asset" db:"asset"`
	Status    string  `json:"status" db:"status"`
	CreatedBy string  `json:"created_by" db:"created_by"`
	PSBT      *string `json:"psbt,omitempty" db:"psbt"`
	Plan      *string `json:"-" db:"plan"`
	FeeBase   *BigInt `json:"fee_base_units,omitempty" db:"fee_base"`
	// ChangeIndex is the change's index on the account's internal chain
	// (BTC, LTC).
	ChangeIndex *int64     `json:"-" db:"change_index"`
	TxID        *string    `json:"txid,omitempty" db:"txid"`
	RawTx       *string    `json:"-" db:"raw_tx"`
	SignedBy    *string    `json:"signed_by,omitempty" db:"signed_by"`
	CreatedAt   time.Time  `json:"created_at" db:"created_at"`
	SignedAt    *time.Time `json:"signed_at,omitempty" db:"signed_at"`
}

// Payout batch statuses.
const (
	BatchOpen   = "open"
	BatchSigned = "signed"
	BatchDone   = "done"
	BatchVoided = "voided"
)

// PayoutWorkflowID is the workflow of a payout batch.
func PayoutWorkflowID(batchRef string) string { return "payout-" + batchRef }

// ShopOutput is an output the shop received on a UTXO network (BTC, LTC),
// spendable by a payout batch: at its derived address of the account's
// external chain.
type ShopOutput struct {
	TxID            string `db:"txid"`
	Index           int64  `db:"output_index"`
	AmountBase      BigInt `db:"amount_base"`
	Address         string `db:"address"`
	DerivationIndex int64  `db:"derivation_index"`
}

// BatchExport is a batch as its signer receives it: for BTC and LTC a PSBT
// (and the plan it was built from, kept to check the signed transaction,
// with the outputs it spends); elsewhere a transfer list.
type BatchExport struct {
	PSBT    string       `json:"psbt,omitempty"` // base64
	Plan    string       `json:"-"`              // JSON
	FeeBase BigInt       `json:"fee_base_units"`
	Inputs  []ShopOutput `json:"-"`
	CSV     string       `json:"csv,omitempty"`
	URIs    []string     `json:"uris,omitempty"`
}
