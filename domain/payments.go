package domain

import (
	"math/big"
	"strings"
	"time"
)

// Method is a payment method: an asset on one network. A transfer on another
// network is not equivalent, so the pair is always carried together.
type Method struct {
	Asset    string `json:"asset"`
	Network  string `json:"network"`
	Decimals int32  `json:"decimals"` // base units per whole unit = 10^Decimals
	// Token says the asset is a token contract on the network (ERC-20, TRC-20).
	Token bool `json:"token"`
}

// Networks.
const (
	NetworkBitcoin  = "bitcoin"
	NetworkEthereum = "ethereum"
	NetworkTron     = "tron"
	NetworkSolana   = "solana"
	NetworkLitecoin = "litecoin"
)

// Methods are exactly the eight methods the shop offers.
var Methods = []Method{
	{Asset: "BTC", Network: NetworkBitcoin, Decimals: 8},
	{Asset: "ETH", Network: NetworkEthereum, Decimals: 18},
	{Asset: "USDT", Network: NetworkEthereum, Decimals: 6, Token: true},
	{Asset: "USDC", Network: NetworkEthereum, Decimals: 6, Token: true},
	{Asset: "TRX", Network: NetworkTron, Decimals: 6},
	{Asset: "USDT", Network: NetworkTron, Decimals: 6, Token: true},
	{Asset: "SOL", Network: NetworkSolana, Decimals: 9},
	{Asset: "LTC", Network: NetworkLitecoin, Decimals: 8},
}

// LookupMethod returns the method for an asset on a network.
func LookupMethod(asset, network string) (Method, bool) {
	for _, m := range Methods {
		if m.Asset == asset && m.Network == network {
			return m, true
		}
	}
	return Method{}, false
}

// Intent is a payment request: pay exactly AmountBase of Asset on Network to
// Address before Deadline.
type Intent struct {
	ID              string      `json:"id" db:"id"`
	TargetKind      string      `json:"target_kind" db:"target_kind"` // "order" or "topup"
	TargetRef       string      `json:"target_reference" db:"target_ref"`
	AccountID       int64       `json:"-" db:"account_id"`
	Asset           string      `json:"asset" db:"asset"`
	Network         string      `json:"network" db:"network"`
	Decimals        int32       `json:"decimals" db:"decimals"`
	AmountBase      BigInt      `json:"amount_base_units" db:"amount_base"`
	Amount          string      `json:"amount" db:"-"` // AmountBase in whole units, exact
	USDCents        int64       `json:"usd_cents" db:"usd_cents"`
	Rate            string      `json:"rate_usd_per_unit" db:"rate"`
	RateSource      string      `json:"rate_source" db:"rate_source"`
	RateAt          time.Time   `json:"rate_at" db:"rate_at"`
	Address         string      `json:"address" db:"address"`
	DerivationIndex *int64      `json:"-" db:"derivation_index"`
	ReferenceKey    *string     `json:"reference_key,omitempty" db:"reference_key"`
	TokenContract   *string     `json:"token_contract,omitempty" db:"token_contract"`
	PaymentURI      string      `json:"payment_uri" db:"payment_uri"`
	Deadline        time.Time   `json:"deadline" db:"deadline"`
	WatchUntil      time.Time   `json:"-" db:"watch_until"`
	Status          string      `json:"status" db:"status"`
	CreatedAt       time.Time   `json:"created_at" db:"created_at"`
	Claims          []time.Time `json:"claims,omitempty" db:"-"`
}

// Expired reports whether the request's deadline has passed at now.
func (i Intent) Expired(now time.Time) bool { return !now.Before(i.Deadline) }

// ErrIntentActive refuses a new payment request while one is still valid
// until deadline (one active request per order or top-up).
func ErrIntentActive(deadline time.Time) *Error {
	return Errorf(ECodeIntentActive,
		"Une demande de paiement est encore valable jusqu'au %s : utilisez-la, ou attendez son échéance pour en créer une autre.",
		deadline.UTC().Format("02/01/2006 à 15:04 UTC"))
}

// Intent statuses.
const (
	IntentOpen       = "open"
	IntentSuperseded = "superseded"
)

// FormatUnits renders base units as an exact decimal amount of whole units
// ("0.00012345").
func FormatUnits(base *big.Int, decimals int32) string {
	s := new(big.Int).Abs(base).String()
	sign := ""
	if base.Sign() < 0 {
		sign = "-"
	}
	if decimals == 0 {
		return sign + s
	}
	for len(s) <= int(decimals) {
		s = "0" + s
	}
	whole, frac := s[:len(s)-int(decimals)], s[len(s)-int(decimals):]
	return sign + whole + "." + frac
}

// TrimZeros drops the fraction's trailing zeros of a FormatUnits amount
// ("0.00036260" → "0.0003626", "1.000" → "1"); a whole number keeps its
// own ("100" stays "100"). Payment URIs write amounts so.
func TrimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// IntentPayment is a payment seen on chain for a payment request, as its
// customer sees it: how much, and how far it is from counting.
type IntentPayment struct {
	TxID        string `json:"txid" db:"txid"`
	Asset       string `json:"asset" db:"asset"`
	AmountBase  BigInt `json:"amount_base_units" db:"amount_base"`
	Amount      string `json:"amount" db:"-"` // AmountBase in whole units
	AmountCents int64  `json:"amount_cents" db:"amount_cents"`
	State       string `json:"state" db:"state"` // seen or confirmed
	Late        bool   `json:"late" db:"late"`
	// Confirmations is the number of blocks on top of the payment's, its
	// own included (0 while it is not in a block); ConfirmationsRequired is
	// the network's policy.
	Confirmations         int64 `json:"confirmations" db:"confirmations"`
	ConfirmationsRequired int64 `json:"confirmations_required" db:"-"`
}

// PaymentClaim is what a watcher's signal says of one payment (or, Dust,
// of a payment request's dust total), to be checked against what the
// watchers recorded before a workflow counts anything: a signal sealed and
// sent by someone else names a payment no watcher saw.
type PaymentClaim struct {
	Network     string
	TxID        string
	Index       int64
	Asset       string
	IntentID    string
	Address     string
	AmountBase  string // decimal base units
	AmountCents int64
	// Dust: the claim is a dust summary of IntentID at Version (TxID and
	// Index unused): recorded when the stored summary is at that version
	// or later and holds at least AmountBase.
	Dust    bool  `json:",omitempty"`
	Version int64 `json:",omitempty"`
}

// PaymentCheck is the store's answer on one claim.
type PaymentCheck struct {
	// Recorded: a watcher recorded the payment as claimed (network, txid,
	// output, asset, request, address, amount and value).
	Recorded bool
	// Request is the payment request the claim names, if it exists (so a
	// workflow need not read it again).
	Request *Intent `json:",omitempty"`
}
