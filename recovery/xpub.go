package recovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/postgres"
)

// KeyStore records the networks' watch-only account keys.
type KeyStore interface {
	RecordAccountKey(ctx context.Context, k postgres.AccountKey) (postgres.AccountKey, error)
	ConfirmAccountKey(ctx context.Context, k postgres.AccountKey, by string) (postgres.AccountKey, error)
}

// ErrAccountKeyChanged refuses a start whose KERNODECK_XPUB_<NETWORK>
// is not the key recorded for the network.
var ErrAccountKeyChanged = errors.New("watch-only account key changed")

// AccountKeyOf is the record of acc for network.
func AccountKeyOf(network string, acc *hdwallet.Account) postgres.AccountKey {
	return postgres.AccountKey{Network: network, Fingerprint: acc.Fingerprint(), KeyDigest: acc.KeyDigest()}
}

// CheckAccountKeys compares each network's configured key with the one
// recorded: the first start records it; a different key refuses the
// start (ErrAccountKeyChanged, naming both fingerprints and the command
// that confirms the new one), since new payments would go to a wallet
// nobody checked.
func CheckAccountKeys(ctx context.Context, store KeyStore, accounts map[string]*hdwallet.Account) error {
	var errs []error
	for _, network := range slices.Sorted(maps.Keys(accounts)) {
		want := AccountKeyOf(network, accounts[network])
		got, err := store.RecordAccountKey(ctx, want)
		if err != nil {
			return err
		}
		if got.KeyDigest != want.KeyDigest {
			errs = append(errs, fmt.Errorf("%w: KERNODECK_XPUB_%s has fingerprint %s, but the key recorded for %s has fingerprint %s "+
				"(addresses already handed out belong to it). New payments would go to another wallet: if this key is the "+
				"intended one, check its fingerprint in the wallet, then run `kernodeck xpub confirm %s` (docs/recovery.md)",
				ErrAccountKeyChanged, strings.ToUpper(network), want.Fingerprint, network, got.Fingerprint, network))
		}
	}
	return errors.Join(errs...)
}

// ConfirmAccountKey records acc as network's key, by whom; it returns
// the fingerprint replaced ("" if none was recorded, or the same key).
func ConfirmAccountKey(ctx context.Context, store KeyStore, network string, acc *hdwallet.Account, by string) (string, error) {
	k := AccountKeyOf(network, acc)
	old, err := store.ConfirmAccountKey(ctx, k, by)
	if err != nil {
		return "", err
	}
	if old.KeyDigest == k.KeyDigest {
		return "", nil
	}
	return old.Fingerprint, nil
}
