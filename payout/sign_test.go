package payout_test

import (
	"bytes"
	"encoding/hex"
	"strconv"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/btcutil/hdkeychain"
	"github.com/btcsuite/btcd/btcutil/psbt"
	"github.com/btcsuite/btcd/txscript"
	"github.com/btcsuite/btcd/wire"

	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/payout"
	"github.com/kernodeck/kernodeck/payout/payouttest"
)

const hardened = hdkeychain.HardenedKeyStart

// master is the test wallet's master key (payouttest.Mnemonic, whose
// fingerprint wallets publish as 73c5da0a). Only tests hold its private
// keys; the server gets the account's tpub.
func master(t testing.TB) *hdkeychain.ExtendedKey {
	t.Helper()
	m, err := payouttest.Master()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func derive(t testing.TB, k *hdkeychain.ExtendedKey, path ...uint32) *hdkeychain.ExtendedKey {
	t.Helper()
	for _, i := range path {
		var err error
		if k, err = k.Derive(i); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// regtestWallet is the Litecoin regtest account m/84'/1'/0' of the test
// mnemonic, with its origin, as the server would be configured.
func regtestWallet(t testing.TB) payout.Wallet {
	t.Helper()
	acct, err := hdwallet.ParseAccountKey(hdwallet.LitecoinRegtest, ltcRegtestTpub)
	if err != nil {
		t.Fatal(err)
	}
	origin, err := hdwallet.ParseKeyOrigin("[73c5da0a/84'/1'/0']")
	if err != nil {
		t.Fatal(err)
	}
	return payout.Wallet{Network: hdwallet.LitecoinRegtest, Account: acct, Origin: origin}
}

// signPSBT signs every input of a plan's PSBT as a wallet holding the
// master key does: it finds the key by the BIP32 derivation the PSBT
// carries (and checks its fingerprint), signs with the witness UTXO's
// amount, and finalizes. It returns the finalized PSBT in base64 and the
// extracted transaction.
func signPSBT(t testing.TB, plan payout.Plan, m *hdkeychain.ExtendedKey) (string, *wire.MsgTx) {
	t.Helper()
	p, err := psbt.NewFromRawBytes(bytes.NewReader([]byte(plan.PSBT)), true)
	if err != nil {
		t.Fatal(err)
	}
	signTx(t, p, m)
	if err := psbt.MaybeFinalizeAll(p); err != nil {
		t.Fatal(err)
	}
	b64, err := p.B64Encode()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := psbt.Extract(p)
	if err != nil {
		t.Fatal(err)
	}
	return b64, tx
}

func signTx(t testing.TB, p *psbt.Packet, m *hdkeychain.ExtendedKey) {
	t.Helper()
	pub, _ := m.ECPubKey()
	fp := btcutil.Hash160(pub.SerializeCompressed())[:4]
	prev := txscript.NewMultiPrevOutFetcher(nil)
	for i, in := range p.UnsignedTx.TxIn {
		prev.AddPrevOut(in.PreviousOutPoint, p.Inputs[i].WitnessUtxo)
	}
	hashes := txscript.NewTxSigHashes(p.UnsignedTx, prev)
	u, _ := psbt.NewUpdater(p)
	for i := range p.Inputs {
		d := p.Inputs[i].Bip32Derivation[0]
		var want hdwallet.KeyOrigin
		copy(want.Fingerprint[:], fp)
		if want.FingerprintUint32() != d.MasterKeyFingerprint {
			t.Fatalf("input %d names master %08x, the signer's is %x", i, d.MasterKeyFingerprint, fp)
		}
		key, err := derive(t, m, d.Bip32Path...).ECPrivKey()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(key.PubKey().SerializeCompressed(), d.PubKey) {
			t.Fatalf("input %d: the path gives another key than the PSBT names", i)
		}
		utxo := p.Inputs[i].WitnessUtxo
		wit, err := txscript.WitnessSignature(p.UnsignedTx, hashes, i, utxo.Value, utxo.PkScript, txscript.SigHashAll, key, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := u.Sign(i, wit[0], wit[1], nil, nil); err != nil {
			t.Fatalf("sign input %d: %v", i, err)
		}
	}
}

// resign signs tx's inputs again after a test changed it (so that only
// the change, not a broken signature, can be what a refusal is about).
func resign(t testing.TB, plan payout.Plan, tx *wire.MsgTx, m *hdkeychain.ExtendedKey) {
	t.Helper()
	prev := txscript.NewMultiPrevOutFetcher(nil)
	scripts := map[wire.OutPoint]*wire.TxOut{}
	for _, in := range plan.Inputs {
		op, _ := wire.NewOutPointFromString(in.TxID + ":" + itoa(in.Vout))
		script, _ := hex.DecodeString(in.Script)
		scripts[*op] = wire.NewTxOut(in.Value, script)
		prev.AddPrevOut(*op, scripts[*op])
	}
	hashes := txscript.NewTxSigHashes(tx, prev)
	for i, in := range tx.TxIn {
		utxo := scripts[in.PreviousOutPoint]
		if utxo == nil {
			continue
		}
		key := keyFor(t, m, utxo.PkScript)
		wit, err := txscript.WitnessSignature(tx, hashes, i, utxo.Value, utxo.PkScript, txscript.SigHashAll, key, true)
		if err != nil {
			t.Fatal(err)
		}
		tx.TxIn[i].Witness = wit
	}
}

// keyFor finds the private key of a P2WPKH script among the first
// external addresses of m/84'/1'/0'.
func keyFor(t testing.TB, m *hdkeychain.ExtendedKey, script []byte) *btcec.PrivateKey {
	t.Helper()
	ext := derive(t, m, 84+hardened, 1+hardened, hardened, 0)
	for i := uint32(0); i < 50; i++ {
		key, _ := derive(t, ext, i).ECPrivKey()
		if bytes.Equal(script[2:], btcutil.Hash160(key.PubKey().SerializeCompressed())) {
			return key
		}
	}
	t.Fatal("no key for script")
	return nil
}

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
