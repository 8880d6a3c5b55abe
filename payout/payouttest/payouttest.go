// Package payouttest is the operator's side of payouts for tests: a
// Litecoin Core wallet holding the development account's private keys
// signs a batch's PSBT off the server, as docs/payouts-operators.md tells
// an operator to. The keys are BIP39's public test mnemonic's
// ("abandon ... about"), whose account m/84'/1'/0' is
// devnodes.LitecoinRegtestXpub: never for real funds.
package payouttest

import (
	"context"
	"fmt"
	"strings"

	"github.com/btcsuite/btcd/btcutil/hdkeychain"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/tyler-smith/go-bip39"

	"github.com/kernodeck/kernodeck/devnodes"
)

// Mnemonic is the test wallet's: its master fingerprint is
// devnodes.TestMasterFingerprint.
const Mnemonic = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"

// Master is the test mnemonic's master key on a test network.
func Master() (*hdkeychain.ExtendedKey, error) {
	return hdkeychain.NewMaster(bip39.NewSeed(Mnemonic, ""), &chaincfg.RegressionNetParams)
}

// ImportLitecoinSigner creates the wallet name on the Litecoin Core node
// at url (devnodes' URL form) holding the account m/84'/1'/0' of the
// test mnemonic, external and internal chains, under the origin the
// server is configured with. A node with SQLite makes it a descriptor
// wallet (importdescriptors); Debian's package has none, so there the
// same descriptors go into a legacy wallet with importmulti, which keeps
// each key's origin (fingerprint and path). It returns the import used.
func ImportLitecoinSigner(ctx context.Context, url, name string) (string, error) {
	account, err := Master()
	if err != nil {
		return "", err
	}
	for _, i := range []uint32{84, 1, 0} {
		if account, err = account.Derive(hdkeychain.HardenedKeyStart + i); err != nil {
			return "", err
		}
	}
	var reqs []map[string]any
	for _, chain := range []string{"0", "1"} {
		desc := "wpkh([" + devnodes.TestMasterFingerprint + "/84h/1h/0h]" + account.String() + "/" + chain + "/*)"
		var info struct{ Checksum string }
		if err := devnodes.RPC(ctx, url, "getdescriptorinfo", []any{desc}, &info); err != nil {
			return "", err
		}
		reqs = append(reqs, map[string]any{"desc": desc + "#" + info.Checksum, "timestamp": 0, "internal": chain == "1", "range": []int{0, 50}})
	}
	method := "importdescriptors"
	if err := devnodes.RPC(ctx, url, "createwallet", []any{name, false, true, "", false, true}, nil); err != nil {
		if !strings.Contains(err.Error(), "sqlite") {
			return "", err
		}
		if err := devnodes.RPC(ctx, url, "createwallet", []any{name, false, true}, nil); err != nil {
			return "", err
		}
		method = "importmulti"
	} else {
		for _, r := range reqs {
			r["active"] = true
		}
	}
	var res []struct {
		Success bool
		Error   *struct{ Message string }
	}
	if err := devnodes.RPC(ctx, url+"/wallet/"+name, method, []any{reqs}, &res); err != nil {
		return "", err
	}
	for _, r := range res {
		if !r.Success {
			return "", fmt.Errorf("%s: %+v", method, r.Error)
		}
	}
	return method, nil
}

// SignLitecoinPSBT signs a batch's PSBT (base64) with the signer wallet
// from the PSBT alone (walletprocesspsbt), finalizes it (finalizepsbt) and
// returns the signed transaction in hex, what the console takes back.
func SignLitecoinPSBT(ctx context.Context, url, wallet, psbt string) (string, error) {
	var processed struct {
		PSBT     string
		Complete bool
	}
	if err := devnodes.RPC(ctx, url+"/wallet/"+wallet, "walletprocesspsbt", []any{psbt, true, "ALL", true}, &processed); err != nil {
		return "", err
	}
	if !processed.Complete {
		return "", fmt.Errorf("walletprocesspsbt: not complete: the wallet did not find its keys from the PSBT's derivations")
	}
	var final struct {
		Hex      string
		Complete bool
	}
	if err := devnodes.RPC(ctx, url, "finalizepsbt", []any{processed.PSBT, true}, &final); err != nil {
		return "", err
	}
	if !final.Complete || final.Hex == "" {
		return "", fmt.Errorf("finalizepsbt: not complete")
	}
	return final.Hex, nil
}
