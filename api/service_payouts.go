package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/rates"
)

// PayoutStore keeps payouts and their batches (package postgres).
type PayoutStore interface {
	RequestPayout(ctx context.Context, in domain.NewPayout) (domain.Payout, error)
	CancelPayout(ctx context.Context, accountID int64, ref string) (domain.Payout, string, error)
	Payouts(ctx context.Context, accountID int64) ([]domain.Payout, error)
	Payout(ctx context.Context, accountID int64, ref string) (domain.Payout, []domain.PayoutEvent, error)
	PayoutsHeldCents(ctx context.Context, accountID int64) (int64, error)
	SupportPayouts(ctx context.Context, status domain.PayoutStatus, limit int) ([]domain.Payout, error)
	ApprovePayout(ctx context.Context, ref, agent string, senior bool) (domain.Payout, error)
	DeclinePayout(ctx context.Context, ref, agent, reason string) (domain.Payout, error)
	OpenBatch(ctx context.Context, network, asset, agent string) (domain.PayoutBatch, []domain.Payout, error)
	Batch(ctx context.Context, ref string) (domain.PayoutBatch, []domain.Payout, error)
	Batches(ctx context.Context, limit int) ([]domain.PayoutBatch, error)
	SpendableOutputs(ctx context.Context, network string) ([]domain.ShopOutput, error)
	SaveBatchPSBT(ctx context.Context, ref string, ex domain.BatchExport) error
	VoidOpenBatch(ctx context.Context, ref string) error
	SignBatch(ctx context.Context, ref, txid, rawTx, agent string, dress func(domain.Payout, *domain.Intent) error) error
}

// PayoutRates prices a payout (the rates the payment requests use).
type PayoutRates interface {
	Rate(ctx context.Context, asset string) (rates.Rate, error)
}

// PayoutWorkflows drives the batches' workflows (wfclient.Client).
type PayoutWorkflows interface {
	StartPayoutBatch(ctx context.Context, batchRef string) error
	TellPayoutBatch(ctx context.Context, batchRef string, voided bool) error
}

// PayoutChain is what differs per network: the address formats, and how a
// batch is exported for signing off the server and its signed transaction
// checked (package payout).
type PayoutChain interface {
	// CheckAddress refuses an address that is not a valid one to send to
	// by the method, or is one of the shop's own (a *domain.Error, in
	// French), and returns its canonical form.
	CheckAddress(ctx context.Context, m domain.Method, address string) (string, error)
	// Export is the batch for its signer: for BTC and LTC a PSBT spending
	// some of outputs (those it used are returned, with its fee); for the
	// other networks a transfer list (CSV), with no inputs.
	Export(ctx context.Context, b domain.PayoutBatch, ps []domain.Payout, outputs []domain.ShopOutput) (domain.BatchExport, error)
	// CheckSigned checks a signed transaction (hex, or a finalized PSBT)
	// against the batch's PSBT: it pays exactly the approved outputs.
	CheckSigned(b domain.PayoutBatch, ps []domain.Payout, signed string) (txid, rawHex string, err error)
	// Dress completes a payout's watch (token contract, Solana's reference).
	Dress(p domain.Payout, w *domain.Intent) error
}

// PayoutDeps are the payouts' dependencies; without them (nil) the API
// offers no payout.
type PayoutDeps struct {
	Store     PayoutStore
	Rates     PayoutRates
	Workflows PayoutWorkflows
	Chain     PayoutChain
	Limits    domain.PayoutLimits
	// FourEyesCents: a payout above it takes two agents, the second a
	// senior (KERNODECK_SUPPORT_ROLES).
	FourEyesCents int64
}

var errNoPayouts = domain.Errorf(domain.ECodeConflict, "Les retraits ne sont pas disponibles pour le moment.")

func (s *Server) payoutsOn() (*PayoutDeps, error) {
	if s.payouts == nil {
		return nil, errNoPayouts
	}
	return s.payouts, nil
}

// PayoutTerms are the limits and network fees a customer's payout is
// held to (their defaults filled), and whether this server offers payouts.
func (s *Server) PayoutTerms() (domain.PayoutLimits, bool) {
	if s.payouts == nil {
		return domain.PayoutLimits{}, false
	}
	return s.payouts.Limits.WithDefaults(), true
}

// quoteLabel binds a sealed quote to its account.
func quoteLabel(accountID int64) string { return fmt.Sprintf("payout-quote:%d", accountID) }

// QuotePayout prices a customer's payout ask at the current rate, locked
// for domain.PayoutQuoteTTL: the quote and its sealed form, which
// RequestPayout takes back (nobody can alter it, and it is the caller's
// only).
func (s *Server) QuotePayout(ctx context.Context, me *Customer, ask domain.PayoutAsk) (domain.PayoutQuote, string, error) {
	p, err := s.payoutsOn()
	if err != nil {
		return domain.PayoutQuote{}, "", err
	}
	lim := p.Limits.WithDefaults()
	ask.Address = strings.TrimSpace(ask.Address)
	if err := ask.Validate(lim); err != nil {
		return domain.PayoutQuote{}, "", err
	}
	m, _ := domain.LookupMethod(ask.Asset, ask.Network)
	if ask.Address, err = p.Chain.CheckAddress(ctx, m, ask.Address); err != nil {
		return domain.PayoutQuote{}, "", err
	}
	r, err := p.Rates.Rate(ctx, m.Asset)
	if err != nil {
		if errors.Is(err, rates.ErrStale) || errors.Is(err, rates.ErrUnknownAsset) {
			return domain.PayoutQuote{}, "", fmt.Errorf("%w (%w)", domain.Errorf(domain.ECodeRateUnavailable,
				"Aucun cours récent n'est disponible pour %s : le retrait ne peut pas être calculé. Réessayez dans quelques minutes.", m.Asset), err)
		}
		return domain.PayoutQuote{}, "", fmt.Errorf("rate %s: %w", m.Asset, err)
	}
	fee := lim.FeeCents[ask.Network]
	// What the customer receives, rounded down to a base unit: the shop
	// never sends more than the balance it takes.
	units := decimal.New(ask.AmountCents-fee, -2).Div(r.USDPerUnit).Shift(m.Decimals).Floor()
	if !units.IsPositive() {
		return domain.PayoutQuote{}, "", domain.Errorf(domain.ECodePayoutLimit, "Ce montant est trop petit pour être envoyé en %s.", m.Asset)
	}
	q := domain.PayoutQuote{PayoutAsk: ask, FeeCents: fee, Decimals: m.Decimals,
		AmountBase: domain.NewBigInt(units.BigInt()), Rate: r.USDPerUnit.String(), RateAt: r.At,
		ExpiresAt: s.now().Add(domain.PayoutQuoteTTL).UTC().Truncate(time.Second)}
	q.Amount = domain.FormatUnits(&q.AmountBase.Int, q.Decimals)
	raw, err := json.Marshal(q)
	if err != nil {
		return domain.PayoutQuote{}, "", err
	}
	return q, s.links.Keyring.Seal(string(raw), quoteLabel(me.Account.ID)), nil
}

var errBadQuote = domain.FieldError("quote", "Ce devis de retrait n'est pas valide : recommencez la demande.")

// RequestPayout confirms a sealed quote: the payout is recorded and its
// amount held from the balance at once. It needs the account's second
// factor, turned on and its code given (code); key makes a retried
// confirmation the same payout.
func (s *Server) RequestPayout(ctx context.Context, me *Customer, sealed, code, key string) (domain.Payout, error) {
	p, err := s.payoutsOn()
	if err != nil {
		return domain.Payout{}, err
	}
	raw, err := s.links.Keyring.Open(sealed, quoteLabel(me.Account.ID))
	if err != nil {
		return domain.Payout{}, errBadQuote
	}
	var q domain.PayoutQuote
	if err := json.Unmarshal([]byte(raw), &q); err != nil {
		return domain.Payout{}, errBadQuote
	}
	if !s.now().Before(q.ExpiresAt) {
		return domain.Payout{}, domain.Errorf(domain.ECodeQuoteExpired,
			"Le cours de ce devis n'est plus garanti (10 minutes) : demandez un nouveau devis.")
	}
	if err := s.requireTwoFactorOn(ctx, me.Account.ID); err != nil {
		return domain.Payout{}, err
	}
	if err := s.RequireSecondFactor(ctx, me.Account.ID, code); err != nil {
		return domain.Payout{}, err
	}
	if key == "" {
		key = sealed // one quote, one payout
	}
	lim := p.Limits.WithDefaults()
	four := p.FourEyesCents
	if four <= 0 {
		four = domain.DefaultFourEyesCents
	}
	return p.Store.RequestPayout(ctx, domain.NewPayout{AccountID: me.Account.ID, Quote: q, RequestKey: key,
		NeedsTwo: q.AmountCents > four, Daily: lim.DailyCents})
}

// requireTwoFactorOn refuses a payout to an account without a second
// factor: a stolen password alone never takes money out.
func (s *Server) requireTwoFactorOn(ctx context.Context, accountID int64) error {
	if s.twoFactor != nil {
		tf, err := s.twoFactor.TwoFactor(ctx, accountID)
		if err != nil {
			return err
		}
		if tf.Enabled {
			return nil
		}
	}
	return domain.Errorf(domain.ECodeSecondFactorRequired,
		"Activez la double authentification sur votre compte (page Compte) avant de demander un retrait.")
}

// CancelPayout is the customer's cancel of a payout not signed yet.
func (s *Server) CancelPayout(ctx context.Context, me *Customer, ref string) (domain.Payout, error) {
	p, err := s.payoutsOn()
	if err != nil {
		return domain.Payout{}, err
	}
	po, voided, err := p.Store.CancelPayout(ctx, me.Account.ID, ref)
	if err != nil {
		return po, err
	}
	if voided != "" {
		// Written first; the workflow only ends. Told later if this fails
		// (it also ends when the batch is found voided).
		if err := p.Workflows.TellPayoutBatch(ctx, voided, true); err != nil {
			s.log.Warn("payouts: batch voided, its workflow not told yet", "batch", voided, "err", err)
		}
	}
	return po, nil
}

// PayoutView is a payout with its timeline.
type PayoutView struct {
	domain.Payout
	Events []domain.PayoutEvent `json:"events"`
}

// CustomerPayouts lists the caller's payouts and what they hold.
func (s *Server) CustomerPayouts(ctx context.Context, me *Customer) ([]domain.Payout, int64, error) {
	p, err := s.payoutsOn()
	if err != nil {
		return nil, 0, err
	}
	ps, err := p.Store.Payouts(ctx, me.Account.ID)
	if err != nil {
		return nil, 0, err
	}
	held, err := p.Store.PayoutsHeldCents(ctx, me.Account.ID)
	return ps, held, err
}

// CustomerPayout is one of the caller's payouts with its timeline.
func (s *Server) CustomerPayout(ctx context.Context, me *Customer, ref string) (PayoutView, error) {
	p, err := s.payoutsOn()
	if err != nil {
		return PayoutView{}, err
	}
	po, ev, err := p.Store.Payout(ctx, me.Account.ID, ref)
	if err != nil {
		return PayoutView{}, notFoundAs(err, domain.Errorf(domain.ECodeNotFound, "Aucun retrait %s sur votre compte.", ref))
	}
	return PayoutView{Payout: po, Events: ev}, nil
}
