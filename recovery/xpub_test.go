package recovery_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcutil/hdkeychain"
	"github.com/btcsuite/btcd/chaincfg"

	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/recovery"
)

// otherEthereumKey is an account key of another wallet (m/44'/60'/0' of
// another seed).
func otherEthereumKey(t *testing.T) *hdwallet.Account {
	t.Helper()
	master, err := hdkeychain.NewMaster([]byte("another wallet's seed, 32 bytes!"), &chaincfg.MainNetParams)
	if err != nil {
		t.Fatal(err)
	}
	k := master
	for _, i := range []uint32{44, 60, 0} {
		if k, err = k.Derive(hdkeychain.HardenedKeyStart + i); err != nil {
			t.Fatal(err)
		}
	}
	pub, err := k.Neuter()
	if err != nil {
		t.Fatal(err)
	}
	acc, err := hdwallet.ParseAccountKey(hdwallet.Ethereum, pub.String())
	if err != nil {
		t.Fatal(err)
	}
	return acc
}

// The first start records each network's key; a start with another key
// is refused, naming both fingerprints, until an operator confirms it;
// then that key starts, and the first one is refused in turn.
func TestChangedAccountKeyRefusesToStartUntilConfirmed(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	first, err := hdwallet.ParseAccountKey(hdwallet.Ethereum, devnodes.EthereumXpub)
	if err != nil {
		t.Fatal(err)
	}
	other := otherEthereumKey(t)
	if first.Fingerprint() == other.Fingerprint() {
		t.Fatal("the test's two keys share a fingerprint")
	}
	if err := recovery.CheckAccountKeys(ctx, db, map[string]*hdwallet.Account{"ethereum": first}); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if err := recovery.CheckAccountKeys(ctx, db, map[string]*hdwallet.Account{"ethereum": first}); err != nil {
		t.Fatalf("restart with the same key: %v", err)
	}
	err = recovery.CheckAccountKeys(ctx, db, map[string]*hdwallet.Account{"ethereum": other})
	if !errors.Is(err, recovery.ErrAccountKeyChanged) {
		t.Fatalf("start with another key: %v, want it refused", err)
	}
	for _, want := range []string{first.Fingerprint(), other.Fingerprint(), "KERNODECK_XPUB_ETHEREUM", "kernodeck xpub confirm ethereum"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %q", err, want)
		}
	}
	// Still refused: the refusal changed nothing.
	if err := recovery.CheckAccountKeys(ctx, db, map[string]*hdwallet.Account{"ethereum": other}); !errors.Is(err, recovery.ErrAccountKeyChanged) {
		t.Fatalf("second start with another key: %v, want it refused", err)
	}
	replaced, err := recovery.ConfirmAccountKey(ctx, db, "ethereum", other, "operator@test")
	if err != nil {
		t.Fatal(err)
	}
	if replaced != first.Fingerprint() {
		t.Fatalf("confirmation replaced %q, want %s", replaced, first.Fingerprint())
	}
	if err := recovery.CheckAccountKeys(ctx, db, map[string]*hdwallet.Account{"ethereum": other}); err != nil {
		t.Fatalf("start with the confirmed key: %v", err)
	}
	if err := recovery.CheckAccountKeys(ctx, db, map[string]*hdwallet.Account{"ethereum": first}); !errors.Is(err, recovery.ErrAccountKeyChanged) {
		t.Fatalf("start with the key replaced: %v, want it refused", err)
	}
	var changes int
	if err := db.GetContext(ctx, &changes, `SELECT count(*) FROM account_key_changes WHERE network = 'ethereum'
		AND old_fingerprint = $1 AND new_fingerprint = $2 AND confirmed_by = 'operator@test'`,
		first.Fingerprint(), other.Fingerprint()); err != nil || changes != 1 {
		t.Fatalf("confirmation recorded %d times (%v), want once", changes, err)
	}
}
