// Package payout holds the chain side of payouts (issue 39): the checks
// on a customer's payout address, the PSBT (BIP174) a batch of Bitcoin or
// Litecoin payouts is signed from, the check of the signed transaction
// before it is broadcast, and the transfer lists an operator sends from the
// payout wallet on Ethereum, Tron and Solana.
//
// It holds no spending key (the shop is watch-only: the PSBT names the keys
// by their BIP32 paths, and a wallet off the server signs), touches no
// database and runs no workflow: callers give it what they stored and store
// what it returns.
package payout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"filippo.io/edwards25519"
	"github.com/btcsuite/btcd/txscript"
	"github.com/ethereum/go-ethereum/common"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
)

// OwnAddresses says whether an address is one of the shop's own: a deposit
// address it handed out, a change address, the Solana shop address, the
// payout wallets. The shop's addresses live in PostgreSQL, so the caller
// wires this. address is in Addresses.Check's canonical form (lowercase
// bech32, EIP-55 for Ethereum), the form hdwallet derives.
type OwnAddresses interface {
	IsOwnAddress(ctx context.Context, network, address string) (bool, error)
}

// OwnAddressesFunc adapts a function to OwnAddresses.
type OwnAddressesFunc func(ctx context.Context, network, address string) (bool, error)

// IsOwnAddress calls f.
func (f OwnAddressesFunc) IsOwnAddress(ctx context.Context, network, address string) (bool, error) {
	return f(ctx, network, address)
}

// Addresses checks payout addresses.
type Addresses struct {
	// Networks maps a domain network to the hdwallet network its addresses
	// belong to (config.Payments.KeyNetworks: bitcoin-regtest in tests). A
	// network absent from it uses its own name.
	Networks map[string]string
	// Tokens are the token contracts per network and asset
	// (config.Payments.Tokens): never a payout's destination.
	Tokens map[string]map[string]string
	// Own is required: a payout to the shop's own address would take the
	// money off the balance and leave it with the shop.
	Own OwnAddresses
}

// maxAddressLength bounds the work done on input: the longest address
// accepted anywhere (a bech32m witness program of 40 bytes) is 90.
const maxAddressLength = 100

// Check validates address as the destination of a payout by method and
// returns its canonical form, the one to store, show back to the customer
// and compare: lowercase for bech32, EIP-55 for Ethereum (an all-lowercase
// address, which carries no checksum, is accepted and shown back
// checksummed; a mixed-case one must match its checksum), unchanged
// otherwise. Surrounding white space is dropped, nothing else is forgiven.
//
// A refusal is a *Refusal (domain code invalid, field "address") whose
// Reason is one of the ErrAddress* sentinels; an error from Own is returned
// wrapped, as it is not the customer's.
func (v Addresses) Check(ctx context.Context, method domain.Method, address string) (string, error) {
	if _, ok := domain.LookupMethod(method.Asset, method.Network); !ok {
		return "", refuse(ErrMethod, "method", "Ce moyen de paiement n'existe pas.")
	}
	if v.Own == nil {
		return "", errors.New("payout: Addresses.Own is not set")
	}
	network := hdwallet.Network(method.Network)
	if n := v.Networks[method.Network]; n != "" {
		network = hdwallet.Network(n)
	}
	s := strings.TrimSpace(address)
	if s == "" || len(s) > maxAddressLength {
		return "", formatRefusal(network, s)
	}
	canonical, err := checkFormat(network, s)
	if err != nil {
		return "", err
	}
	for asset, contract := range v.Tokens[method.Network] {
		if strings.EqualFold(contract, canonical) {
			return "", refuse(ErrAddressContract, "address", fmt.Sprintf(
				"Cette adresse est celle du contrat du jeton %s, pas celle d'un portefeuille : les fonds y seraient perdus.", asset))
		}
	}
	own, err := v.Own.IsOwnAddress(ctx, method.Network, canonical)
	if err != nil {
		return "", fmt.Errorf("payout: own addresses: %w", err)
	}
	if own {
		return "", refuse(ErrAddressOwn, "address",
			"Cette adresse appartient à Kernodeck : indiquez l'adresse d'un portefeuille qui est à vous.")
	}
	return canonical, nil
}

// checkFormat applies hdwallet's checks, then what a payout adds: only
// outputs a wallet can spend today, and no address that another network
// reads the same way.
func checkFormat(network hdwallet.Network, s string) (string, error) {
	if err := hdwallet.ValidateAddress(network, s); err != nil {
		if errors.Is(err, hdwallet.ErrUnknownNetwork) {
			return "", fmt.Errorf("payout: %w", err)
		}
		if errors.Is(err, hdwallet.ErrChecksum) {
			return "", refuse(ErrAddressChecksum, "address", fmt.Sprintf(
				"Le contrôle de cette adresse %s échoue : un caractère a sans doute été mal copié. Copiez-la de nouveau depuis votre portefeuille.",
				networkName(network)))
		}
		return "", formatRefusal(network, s)
	}
	switch network {
	case hdwallet.Ethereum:
		a := common.HexToAddress(s)
		if a == (common.Address{}) {
			return "", burnRefusal()
		}
		return a.Hex(), nil
	case hdwallet.Tron:
		a, _ := hdwallet.EthereumAddressOfTron(s)
		if a == (common.Address{}) {
			return "", burnRefusal()
		}
		return s, nil
	case hdwallet.Solana:
		return s, checkSolanaWallet(s)
	}
	if hdwallet.IsLegacyScriptHashVersion(network, s) {
		return "", refuse(ErrAddressAmbiguous, "address",
			"Cette adresse Litecoin a la même forme qu'une adresse Bitcoin (elle commence par 3 ou 2) : indiquez la forme que votre portefeuille Litecoin affiche, qui commence par M, Q ou ltc1.")
	}
	script, err := hdwallet.OutputScript(network, s)
	if err != nil {
		return "", formatRefusal(network, s)
	}
	switch txscript.GetScriptClass(script) {
	case txscript.PubKeyHashTy, txscript.ScriptHashTy, txscript.WitnessV0PubKeyHashTy,
		txscript.WitnessV0ScriptHashTy, txscript.WitnessV1TaprootTy:
	default:
		// Witness versions 2 to 16, or version 1 with a program other
		// than 32 bytes: valid strings that no wallet spends yet, so
		// anyone could take what they receive once rules change.
		return "", refuse(ErrAddressUnspendable, "address",
			"Cette adresse utilise une version de SegWit qu'aucun portefeuille ne dépense aujourd'hui : les fonds y seraient perdus. Indiquez une adresse de réception de votre portefeuille.")
	}
	// bech32 is case-insensitive: its canonical spelling is lowercase, the
	// one nodes print. (base58 is not: lowercased, it is another string.)
	if lower, err := hdwallet.OutputScript(network, strings.ToLower(s)); err == nil && bytes.Equal(lower, script) {
		return strings.ToLower(s), nil
	}
	return s, nil
}

// checkSolanaWallet refuses what a Solana wallet cannot spend from: an
// address off the ed25519 curve is a program-derived address (for example
// the associated token account that customers paste by mistake), whose
// lamports only its program moves; the all-zero key is the system program.
// The check decodes the point as curve25519-dalek does, except that a
// non-canonical encoding (y at or above 2^255-19, a handful of the 2^255
// strings) is refused rather than reduced: no wallet generates one.
func checkSolanaWallet(s string) error {
	key, err := hdwallet.SolanaPublicKey(s)
	if err != nil {
		return fmt.Errorf("payout: %w", err)
	}
	if bytes.Equal(key, make([]byte, 32)) {
		return burnRefusal()
	}
	if _, err := new(edwards25519.Point).SetBytes(key); err != nil {
		return refuse(ErrAddressUnspendable, "address",
			"Cette adresse Solana n'est pas celle d'un portefeuille (c'est un compte de programme ou de jeton) : indiquez l'adresse principale de votre portefeuille Solana.")
	}
	return nil
}

func burnRefusal() *Refusal {
	return refuse(ErrAddressUnspendable, "address",
		"Cette adresse est une adresse de destruction (que des zéros) : les fonds y seraient perdus.")
}

// formatRefusal says what the address is not, and what it is when another
// network reads it: the commonest mistake is an address of the wrong chain.
func formatRefusal(network hdwallet.Network, s string) *Refusal {
	if strings.HasPrefix(strings.ToLower(s), "ltcmweb1") {
		return refuse(ErrAddressFormat, "address",
			"Les adresses MWEB (ltcmweb1…) ne sont pas prises en charge : indiquez une adresse Litecoin ordinaire (ltc1…, L… ou M…).")
	}
	for _, other := range everyNetwork {
		if other != network && s != "" && len(s) <= maxAddressLength && hdwallet.ValidateAddress(other, s) == nil {
			return refuse(ErrAddressFormat, "address", fmt.Sprintf(
				"Cette adresse est une adresse %s, pas %s : les fonds envoyés sur un autre réseau seraient perdus.",
				networkName(other), networkName(network)))
		}
	}
	return refuse(ErrAddressFormat, "address", fmt.Sprintf(
		"Ce n'est pas une adresse %s valide. Copiez l'adresse de réception depuis votre portefeuille.", networkName(network)))
}

// everyNetwork is the order in which formatRefusal looks for the network an
// address belongs to (mainnets first: a testnet match is rarely the point).
var everyNetwork = []hdwallet.Network{
	hdwallet.Bitcoin, hdwallet.Litecoin, hdwallet.Ethereum, hdwallet.Tron, hdwallet.Solana,
	hdwallet.BitcoinTestnet, hdwallet.BitcoinRegtest, hdwallet.LitecoinTestnet, hdwallet.LitecoinRegtest,
}

// networkName is the network as the site names it.
func networkName(n hdwallet.Network) string {
	switch n {
	case hdwallet.Bitcoin:
		return "Bitcoin"
	case hdwallet.BitcoinTestnet:
		return "Bitcoin (testnet)"
	case hdwallet.BitcoinRegtest:
		return "Bitcoin (regtest)"
	case hdwallet.Litecoin:
		return "Litecoin"
	case hdwallet.LitecoinTestnet:
		return "Litecoin (testnet)"
	case hdwallet.LitecoinRegtest:
		return "Litecoin (regtest)"
	case hdwallet.Ethereum:
		return "Ethereum"
	case hdwallet.Tron:
		return "Tron"
	case hdwallet.Solana:
		return "Solana"
	}
	return string(n)
}
