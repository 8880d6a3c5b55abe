// Package payments creates payment requests (intents): a fresh rate, the
// exact amount in the asset's base units (rounded up, never short of the USD
// total), an address of its own derived from a watch-only key (or, on Solana,
// the shop's address with a Solana Pay reference key and a unique amount), a
// deadline and a payment URI.
package payments

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"time"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/rates"
)

// RateSource gives fresh USD rates.
type RateSource interface {
	Rate(ctx context.Context, asset string) (rates.Rate, error)
}

// Deriver derives the receiving address at an index (a watch-only account).
type Deriver interface {
	Address(index uint32) (string, error)
}

// Store persists intents (implemented by package postgres).
type Store interface {
	// InsertIntent allocates the derivation index (when derive is not nil),
	// supersedes the target's expired open request, inserts the intent with
	// the first free amount at or above its amount, and writes the
	// payment_requested timeline event, in one transaction. A second call with
	// the same target and request key returns the stored intent.
	InsertIntent(ctx context.Context, in domain.Intent, requestKey string, now time.Time, derive func(index int64) (string, error), uri func(domain.Intent) string) (domain.Intent, error)
}

// minRequestWindow is the shortest deadline a request is created with when
// its order's expiry shortens it: a customer needs a few minutes to send a
// payment.
const minRequestWindow = 5 * time.Minute

// Network settings of the service.
type Network struct {
	// Deriver is the network's watch-only account (not for Solana).
	Deriver Deriver
	// ShopAddress is Solana's receiving address.
	ShopAddress string
	// Tokens maps an asset to its contract on this network (ERC-20, TRC-20).
	Tokens map[string]string
	// ChainID is the EIP-155 chain id in Ethereum payment URIs.
	ChainID int64
}

// Service creates payment requests.
type Service struct {
	Store    Store
	Rates    RateSource
	Networks map[string]Network // by network name; absent = disabled
	// Deadline is how long a request is valid (60 minutes by default);
	// WatchAfter how long its address stays watched after it (late payments).
	Deadline   time.Duration
	WatchAfter time.Duration
	Now        func() time.Time
}

// Request asks for a payment request.
type Request struct {
	TargetKind string // "order" or "topup"
	TargetRef  string
	AccountID  int64
	Asset      string
	Network    string
	USDCents   int64
	RequestKey string // idempotency key from the workflow
	// NotAfter bounds the deadline: a request never outlives its order's
	// or top-up's payment window (zero: no bound).
	NotAfter time.Time
}

// Enabled lists the methods that can be used now (configured network and
// token contract).
func (s *Service) Enabled() []domain.Method {
	var out []domain.Method
	for _, m := range domain.Methods {
		if s.enabled(m) {
			out = append(out, m)
		}
	}
	return out
}

// Offered returns the method asset/network if it is offered now, else the
// refusal a payment request for it gets (the API asks first, so such a
// refusal never reaches the order's workflow).
func (s *Service) Offered(asset, network string) (domain.Method, error) {
	m, ok := domain.LookupMethod(asset, network)
	if !ok {
		return m, &domain.Error{Code: domain.ECodeInvalid, Field: "method",
			Message: "Méthode de paiement inconnue : choisissez BTC/bitcoin, ETH/ethereum, USDT/ethereum, USDC/ethereum, TRX/tron, USDT/tron, SOL/solana ou LTC/litecoin."}
	}
	if !s.enabled(m) {
		return m, domain.Errorf(domain.ECodeMethodUnavailable,
			"Le paiement en %s sur le réseau %s n'est pas disponible pour le moment. Choisissez une autre méthode ; votre commande reste enregistrée.", m.Asset, m.Network)
	}
	return m, nil
}

func (s *Service) enabled(m domain.Method) bool {
	n, ok := s.Networks[m.Network]
	if !ok {
		return false
	}
	if m.Token && n.Tokens[m.Asset] == "" {
		return false
	}
	if m.Network == domain.NetworkSolana {
		return n.ShopAddress != ""
	}
	return n.Deriver != nil
}

// Create makes a payment request. A method that is not offered or not
// configured, or a missing or stale rate, is refused with a clear error and
// nothing written.
func (s *Service) Create(ctx context.Context, r Request) (domain.Intent, error) {
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	m, err := s.Offered(r.Asset, r.Network)
	if err != nil {
		return domain.Intent{}, err
	}
	if r.USDCents <= 0 {
		return domain.Intent{}, domain.Errorf(domain.ECodeConflict, "Il n'y a plus rien à payer sur ce dossier.")
	}
	rate, err := s.Rates.Rate(ctx, m.Asset)
	if err != nil {
		if errors.Is(err, rates.ErrStale) || errors.Is(err, rates.ErrUnknownAsset) {
			return domain.Intent{}, fmt.Errorf("%w (%w)", domain.Errorf(domain.ECodeRateUnavailable,
				"Aucun cours récent n'est disponible pour %s : le montant ne peut pas être calculé. Réessayez dans quelques minutes ; votre commande reste enregistrée.", m.Asset), err)
		}
		return domain.Intent{}, fmt.Errorf("rate %s: %w", m.Asset, err)
	}
	amount, err := rates.AmountBase(r.USDCents, rate.USDPerUnit, m.Decimals)
	if err != nil {
		return domain.Intent{}, fmt.Errorf("amount: %w", err)
	}
	deadline := s.Deadline
	if deadline <= 0 {
		deadline = time.Hour
	}
	watch := s.WatchAfter
	if watch <= 0 {
		watch = 24 * time.Hour
	}
	until := now.Add(deadline)
	if !r.NotAfter.IsZero() && r.NotAfter.Before(until) {
		// Floored to what PostgreSQL stores, so it never ends up after.
		until = r.NotAfter.Truncate(time.Microsecond)
	}
	// A request is never shorter than the configured deadline or
	// minRequestWindow, whichever is smaller: only the order's own expiry can
	// make it shorter, and then it is refused.
	window := minRequestWindow
	if deadline < window {
		window = deadline
	}
	if until.Sub(now) < window {
		return domain.Intent{}, domain.Errorf(domain.ECodeConflict,
			"Le délai de paiement de ce dossier se termine dans moins de %d minutes : une demande de paiement n'est plus possible.", int(minRequestWindow.Minutes()))
	}
	n := s.Networks[m.Network]
	in := domain.Intent{
		ID:         domain.NewRef("PI"),
		TargetKind: r.TargetKind,
		TargetRef:  r.TargetRef,
		AccountID:  r.AccountID,
		Asset:      m.Asset,
		Network:    m.Network,
		Decimals:   m.Decimals,
		AmountBase: domain.NewBigInt(amount),
		USDCents:   r.USDCents,
		Rate:       rate.USDPerUnit.String(),
		RateSource: rate.Source,
		RateAt:     rate.At,
		Deadline:   until,
		WatchUntil: until.Add(watch),
		Status:     domain.IntentOpen,
	}
	if m.Token {
		c := n.Tokens[m.Asset]
		in.TokenContract = &c
	}
	var derive func(int64) (string, error)
	if m.Network == domain.NetworkSolana {
		ref, err := newSolanaReference()
		if err != nil {
			return domain.Intent{}, err
		}
		in.ReferenceKey = &ref
		in.Address = n.ShopAddress
	} else {
		derive = func(i int64) (string, error) { return n.Deriver.Address(uint32(i)) }
	}
	out, err := s.Store.InsertIntent(ctx, in, r.RequestKey, now, derive, func(i domain.Intent) string { return PaymentURI(i, n.ChainID) })
	if err != nil {
		return domain.Intent{}, err
	}
	out.Amount = domain.FormatUnits(&out.AmountBase.Int, out.Decimals)
	return out, nil
}

// PaymentURI is the wallet link for an intent: BIP21 for Bitcoin and
// Litecoin, EIP-681 for ETH and ERC-20 transfers, Solana Pay for SOL, the
// plain address for Tron (no common URI scheme).
func PaymentURI(in domain.Intent, chainID int64) string {
	amount := domain.FormatUnits(&in.AmountBase.Int, in.Decimals)
	switch in.Network {
	case domain.NetworkBitcoin, domain.NetworkLitecoin:
		return fmt.Sprintf("%s:%s?amount=%s", in.Network, in.Address, domain.TrimZeros(amount))
	case domain.NetworkEthereum:
		if in.TokenContract != nil {
			return fmt.Sprintf("ethereum:%s@%d/transfer?address=%s&uint256=%s", *in.TokenContract, chainID, in.Address, in.AmountBase.String())
		}
		return fmt.Sprintf("ethereum:%s@%d?value=%s", in.Address, chainID, in.AmountBase.String())
	case domain.NetworkSolana:
		q := url.Values{}
		q.Set("amount", domain.TrimZeros(amount))
		if in.ReferenceKey != nil {
			q.Set("reference", *in.ReferenceKey)
		}
		q.Set("label", "Kernodeck")
		q.Set("message", "Kernodeck "+in.TargetRef)
		return "solana:" + in.Address + "?" + q.Encode()
	default:
		return in.Address
	}
}

// NextAmount is the amount one base unit above a (to make amounts unique).
func NextAmount(a *big.Int) *big.Int { return new(big.Int).Add(a, big.NewInt(1)) }

// CreateIntent adapts Create to the activities' interface.
func (s *Service) CreateIntent(ctx context.Context, in activities.CreateIntentInput) (domain.Intent, error) {
	return s.Create(ctx, Request(in))
}
