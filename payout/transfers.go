package payout

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"math/big"
	"net/url"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
)

// ErrTransfer: a transfer list cannot be made as asked.
var ErrTransfer = errors.New("payout: invalid transfer list")

// Transfer is one approved payout to send from the operator's payout
// wallet on Ethereum, Tron or Solana.
type Transfer struct {
	ID      string   // the payout's reference
	Address string   // checked by Addresses.Check
	Amount  *big.Int // base units (wei, sun, lamports, token units)
	// Reference is an optional Solana Pay reference (a base58 public key
	// the wallet adds to the transfer's accounts), by which a watcher
	// finds the transaction as it finds payments.
	Reference string
}

// TransferList is a batch of transfers of one method.
type TransferList struct {
	Method domain.Method
	// Contract is the token's contract (ERC-20, TRC-20) or mint (SPL),
	// required for a token and refused otherwise.
	Contract string
	// ChainID is Ethereum's chain id (KERNODECK_ETHEREUM_CHAIN_ID), which
	// EIP-681 URIs carry so that a wallet on another chain refuses them.
	ChainID   int64
	Transfers []Transfer
}

// csvHeader names the columns of CSV.
var csvHeader = []string{"payout", "network", "asset", "token_contract", "to", "amount", "amount_base_units", "uri"}

// CSV returns the list as CSV for the operator: a header, then one line
// per transfer with the amount in the asset's units as an exact decimal
// string and in base units, and its URI. A cell a spreadsheet would read
// as a formula (starting with =, +, -, @, a tab or a carriage return) is
// prefixed with an apostrophe, as OWASP advises against CSV injection.
func (l TransferList) CSV() ([]byte, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(csvHeader)
	for _, t := range l.Transfers {
		_ = w.Write([]string{
			cell(t.ID), cell(l.Method.Network), cell(l.Method.Asset), cell(l.Contract), cell(t.Address),
			cell(domain.FormatUnits(t.Amount, l.Method.Decimals)), cell(t.Amount.String()), cell(l.uri(t)),
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, fmt.Errorf("payout: csv: %w", err)
	}
	return b.Bytes(), nil
}

// cell is a CSV cell a spreadsheet will not read as a formula.
func cell(s string) string { return domain.CSVCell(s) }

// URIs returns each transfer's URI, in the list's order.
func (l TransferList) URIs() ([]string, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	out := make([]string, len(l.Transfers))
	for i, t := range l.Transfers {
		out[i] = l.uri(t)
	}
	return out, nil
}

// uri is the wallet link of one transfer:
//   - Ethereum: EIP-681, ethereum:<to>@<chain id>?value=<wei> for ETH and
//     ethereum:<contract>@<chain id>/transfer?address=<to>&uint256=<units>
//     for an ERC-20, amounts in base units;
//   - Solana: Solana Pay, solana:<to>?amount=<SOL>, reference= when set,
//     and memo=<payout> (written on chain by the wallet, so the transfer
//     names its payout). The shop offers no Solana token (domain.Methods);
//     one would add spl-token=<mint>;
//   - Tron: the plain address, as payment requests show it: Tron has no
//     common URI scheme, and TronLink and the others take the address and
//     the amount typed in (the CSV's to and amount columns).
func (l TransferList) uri(t Transfer) string {
	units := domain.TrimZeros(domain.FormatUnits(t.Amount, l.Method.Decimals))
	switch l.Method.Network {
	case domain.NetworkEthereum:
		if l.Method.Token {
			return fmt.Sprintf("ethereum:%s@%d/transfer?address=%s&uint256=%s", l.Contract, l.ChainID, t.Address, t.Amount)
		}
		return fmt.Sprintf("ethereum:%s@%d?value=%s", t.Address, l.ChainID, t.Amount)
	case domain.NetworkSolana:
		// Solana Pay's parameters in its own order; url.Values would sort them.
		q := "amount=" + units
		if t.Reference != "" {
			q += "&reference=" + url.QueryEscape(t.Reference)
		}
		q += "&label=Kernodeck&memo=" + url.QueryEscape(t.ID)
		return "solana:" + t.Address + "?" + q
	default:
		return t.Address
	}
}

// check refuses a list that would send the wrong thing: a network with
// PSBTs, a token without its contract, an address of another network, an
// amount that is not positive, the same payout twice.
func (l TransferList) check() error {
	m, ok := domain.LookupMethod(l.Method.Asset, l.Method.Network)
	if !ok || m != l.Method {
		return fmt.Errorf("%w: unknown method %s/%s", ErrTransfer, l.Method.Asset, l.Method.Network)
	}
	network := hdwallet.Network(m.Network)
	switch m.Network {
	case domain.NetworkEthereum, domain.NetworkTron, domain.NetworkSolana:
	default:
		return fmt.Errorf("%w: %s payouts are signed as a PSBT", ErrTransfer, m.Network)
	}
	if m.Token != (l.Contract != "") {
		return fmt.Errorf("%w: a contract is required for a token, and only then", ErrTransfer)
	}
	if l.Contract != "" && hdwallet.ValidateAddress(network, l.Contract) != nil {
		return fmt.Errorf("%w: contract is not a %s address", ErrTransfer, m.Network)
	}
	if m.Network == domain.NetworkEthereum && l.ChainID <= 0 {
		return fmt.Errorf("%w: Ethereum needs its chain id", ErrTransfer)
	}
	if len(l.Transfers) == 0 {
		return fmt.Errorf("%w: no transfer", ErrTransfer)
	}
	seen := map[string]bool{}
	for i, t := range l.Transfers {
		switch {
		case t.ID == "" || seen[t.ID]:
			return fmt.Errorf("%w: transfer %d: payout %q empty or given twice", ErrTransfer, i, t.ID)
		case hdwallet.ValidateAddress(network, t.Address) != nil:
			return fmt.Errorf("%w: payout %s: not a %s address", ErrTransfer, t.ID, m.Network)
		case t.Amount == nil || t.Amount.Sign() <= 0:
			return fmt.Errorf("%w: payout %s: amount must be positive", ErrTransfer, t.ID)
		case t.Reference != "" && (m.Network != domain.NetworkSolana || hdwallet.ValidateAddress(hdwallet.Solana, t.Reference) != nil):
			return fmt.Errorf("%w: payout %s: a reference is a Solana public key", ErrTransfer, t.ID)
		}
		seen[t.ID] = true
	}
	return nil
}

// Total is the sum of the list's amounts in base units, for the operator
// to check against the payout wallet's balance.
func (l TransferList) Total() *big.Int {
	sum := new(big.Int)
	for _, t := range l.Transfers {
		if t.Amount != nil {
			sum.Add(sum, t.Amount)
		}
	}
	return sum
}
