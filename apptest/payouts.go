package apptest

import (
	"testing"

	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/payout"
	"github.com/kernodeck/kernodeck/postgres"
)

// Payouts are the harness's payout settings: the chain side is a
// payout.Shop over the harness's database, as cmd/kernodeck builds it
// (never one of the shop's own addresses).
type Payouts struct {
	// KeyNetworks maps a network to the hdwallet network of its addresses
	// (litecoin: litecoin-regtest); one absent uses its own name.
	KeyNetworks map[string]string
	// Wallets are the accounts PSBT batches spend from (Bitcoin, Litecoin).
	Wallets map[string]payout.Wallet
	// ChainID is Ethereum's, in the transfer lists' URIs.
	ChainID int64
	Limits  domain.PayoutLimits
}

func (p *Payouts) shop(db *postgres.DB) *payout.Shop {
	return &payout.Shop{
		Addresses: payout.Addresses{Networks: p.KeyNetworks, Own: payout.OwnAddressesFunc(db.IsShopAddress)},
		Wallets:   p.Wallets,
		ChainID:   p.ChainID,
	}
}

// RegtestPayouts are payouts in LTC on Litecoin regtest, batched as PSBTs
// spending the development account (devnodes.LitecoinRegtestXpub, under
// the test mnemonic's origin: payouttest's signer holds its keys),
// and on Ethereum as transfer lists for geth --dev's chain (1337).
func RegtestPayouts(t testing.TB) *Payouts {
	t.Helper()
	acc, err := hdwallet.ParseAccountKey(hdwallet.LitecoinRegtest, devnodes.LitecoinRegtestXpub)
	if err != nil {
		t.Fatal(err)
	}
	origin, err := hdwallet.ParseKeyOrigin(devnodes.TestKeyOrigin("84'/1'/0'"))
	if err != nil {
		t.Fatal(err)
	}
	return &Payouts{
		KeyNetworks: map[string]string{domain.NetworkLitecoin: string(hdwallet.LitecoinRegtest)},
		Wallets: map[string]payout.Wallet{domain.NetworkLitecoin: {
			Network: hdwallet.LitecoinRegtest, Account: acc, Origin: origin}},
		ChainID: 1337,
	}
}
