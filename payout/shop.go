package payout

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/mr-tron/base58"

	"github.com/kernodeck/kernodeck/domain"
)

// Shop is the chain side of payouts as the API uses it (api.PayoutChain):
// the address checks, the export of a batch for its signer, the check of
// what the signer sends back, and the payouts' watches.
type Shop struct {
	Addresses Addresses
	// Wallets are the Bitcoin-like accounts batches spend from, per
	// domain network (bitcoin, litecoin).
	Wallets map[string]Wallet
	// FeeRates are the PSBTs' fee rates per network, in base units per
	// vbyte (0 or absent: DefaultFeeRate).
	FeeRates map[string]int64
	// ChainID is Ethereum's chain id, in the transfer list's URIs.
	ChainID int64
}

// DefaultFeeRate is a PSBT's fee rate when none is configured: Bitcoin
// Core's and Litecoin Core's minimum relay fee is 1 and 10 per vbyte.
func DefaultFeeRate(network string) int64 {
	if network == domain.NetworkLitecoin {
		return 10
	}
	return 5
}

// CheckAddress checks a payout's address (Addresses.Check).
func (s Shop) CheckAddress(ctx context.Context, m domain.Method, address string) (string, error) {
	return s.Addresses.Check(ctx, m, address)
}

func (s Shop) contract(network, asset string) string { return s.Addresses.Tokens[network][asset] }

// solanaReference is a payout's Solana Pay reference: derived from its
// reference, so the transfer list and the watch carry the same one.
func solanaReference(payoutRef string) string {
	sum := sha256.Sum256([]byte("kernodeck payout reference " + payoutRef))
	return base58.Encode(sum[:])
}

// Export is a batch for its signer: a PSBT for Bitcoin and Litecoin, a
// transfer list elsewhere.
func (s Shop) Export(_ context.Context, b domain.PayoutBatch, ps []domain.Payout, outs []domain.ShopOutput) (domain.BatchExport, error) {
	m, ok := domain.LookupMethod(b.Asset, b.Network)
	if !ok {
		return domain.BatchExport{}, fmt.Errorf("payout: batch %s: unknown method %s/%s", b.Ref, b.Asset, b.Network)
	}
	if b.Network == domain.NetworkBitcoin || b.Network == domain.NetworkLitecoin {
		w, ok := s.Wallets[b.Network]
		if !ok {
			return domain.BatchExport{}, domain.Errorf(domain.ECodeConflict,
				"Les retraits sur le réseau %s ne peuvent pas être préparés : l'origine de la clé du portefeuille (KERNODECK_%s_KEY_ORIGIN) n'est pas configurée.",
				domain.NetworkName(b.Network), strings.ToUpper(b.Network))
		}
		return s.psbt(w, b, ps, outs)
	}
	l := TransferList{Method: m, ChainID: s.ChainID}
	if m.Token {
		l.Contract = s.contract(m.Network, m.Asset)
	}
	for _, p := range ps {
		t := Transfer{ID: p.Ref, Address: p.Address, Amount: &p.AmountBase.Int}
		if m.Network == domain.NetworkSolana {
			t.Reference = solanaReference(p.Ref)
		}
		l.Transfers = append(l.Transfers, t)
	}
	csv, err := l.CSV()
	if err != nil {
		return domain.BatchExport{}, err
	}
	uris, err := l.URIs()
	if err != nil {
		return domain.BatchExport{}, err
	}
	return domain.BatchExport{CSV: string(csv), URIs: uris, FeeBase: domain.NewBigInt(new(big.Int))}, nil
}

func (s Shop) psbt(w Wallet, b domain.PayoutBatch, ps []domain.Payout, outs []domain.ShopOutput) (domain.BatchExport, error) {
	if b.ChangeIndex == nil {
		return domain.BatchExport{}, fmt.Errorf("payout: batch %s has no change index", b.Ref)
	}
	rate := s.FeeRates[b.Network]
	if rate <= 0 {
		rate = DefaultFeeRate(b.Network)
	}
	req := Batch{FeeRate: rate, ChangeIndex: uint32(*b.ChangeIndex)}
	byOutpoint := map[string]domain.ShopOutput{}
	for _, o := range outs {
		if !o.AmountBase.IsInt64() || o.DerivationIndex < 0 || o.DerivationIndex > 1<<31-1 {
			continue // not an output this account spends
		}
		req.Coins = append(req.Coins, Coin{TxID: o.TxID, Vout: uint32(o.Index), Value: o.AmountBase.Int64(),
			Address: o.Address, Index: uint32(o.DerivationIndex)})
		byOutpoint[fmt.Sprintf("%s:%d", o.TxID, o.Index)] = o
	}
	for _, p := range ps {
		if !p.AmountBase.IsInt64() {
			return domain.BatchExport{}, fmt.Errorf("payout %s: amount out of range", p.Ref)
		}
		req.Payees = append(req.Payees, Payee{ID: p.Ref, Address: p.Address, Amount: p.AmountBase.Int64()})
	}
	plan, err := w.Build(req)
	switch {
	case errors.Is(err, ErrInsufficientFunds):
		return domain.BatchExport{}, fmt.Errorf("%w (%w)", domain.Errorf(domain.ECodeConflict,
			"Les paiements reçus et confirmés sur le réseau %s ne couvrent pas ce lot et ses frais : approvisionnez le portefeuille ou attendez des confirmations.",
			domain.NetworkName(b.Network)), err)
	case errors.Is(err, ErrPayeeAmount):
		return domain.BatchExport{}, fmt.Errorf("%w (%w)", domain.Errorf(domain.ECodeConflict,
			"Un retrait de ce lot est trop petit pour être envoyé sur le réseau %s (sous le seuil de poussière).", domain.NetworkName(b.Network)), err)
	case err != nil:
		return domain.BatchExport{}, err
	}
	raw, err := json.Marshal(plan)
	if err != nil {
		return domain.BatchExport{}, err
	}
	ex := domain.BatchExport{PSBT: plan.PSBT, Plan: string(raw), FeeBase: domain.NewBigInt(big.NewInt(plan.Fee))}
	for _, in := range plan.Inputs {
		ex.Inputs = append(ex.Inputs, byOutpoint[fmt.Sprintf("%s:%d", in.TxID, in.Vout)])
	}
	return ex, nil
}

// CheckSigned checks the signer's transaction against the batch's plan.
func (s Shop) CheckSigned(b domain.PayoutBatch, _ []domain.Payout, signed string) (txid, rawHex string, err error) {
	if b.Plan == nil {
		return "", "", domain.Errorf(domain.ECodeConflict, "Ce lot n'a pas de PSBT : rien à signer.")
	}
	var plan Plan
	if err := json.Unmarshal([]byte(*b.Plan), &plan); err != nil {
		return "", "", fmt.Errorf("payout: plan of %s: %w", b.Ref, err)
	}
	sg, err := CheckSigned(plan, signed)
	if err != nil {
		return "", "", err
	}
	return sg.TxID, sg.Hex, nil
}

// Dress completes a payout's watch: the token's contract, and on Solana
// the reference its transfer list carries.
func (s Shop) Dress(p domain.Payout, w *domain.Intent) error {
	if m, _ := domain.LookupMethod(p.Asset, p.Network); m.Token {
		c := s.contract(p.Network, p.Asset)
		if c == "" {
			return fmt.Errorf("payout %s: no contract for %s on %s", p.Ref, p.Asset, p.Network)
		}
		w.TokenContract = &c
	}
	if p.Network == domain.NetworkSolana {
		ref := solanaReference(p.Ref)
		w.ReferenceKey = &ref
	}
	return nil
}
