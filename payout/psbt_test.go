package payout_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"github.com/btcsuite/btcd/btcutil/psbt"
	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/wire"

	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/payout"
)

// fund makes a transaction paying value to the wallet's deposit address
// at index, as a customer's payment would, and returns it as a coin with
// its previous transaction.
func fund(t testing.TB, w payout.Wallet, index uint32, value int64, salt byte) payout.Coin {
	t.Helper()
	addr, err := w.Account.Address(index)
	if err != nil {
		t.Fatal(err)
	}
	script, err := hdwallet.OutputScript(w.Network, addr)
	if err != nil {
		t.Fatal(err)
	}
	tx := wire.NewMsgTx(2)
	tx.AddTxIn(wire.NewTxIn(wire.NewOutPoint(&chainhash.Hash{salt, byte(index)}, 0), nil, nil))
	tx.AddTxOut(wire.NewTxOut(1000, []byte{0x51}))
	tx.AddTxOut(wire.NewTxOut(value, script))
	var raw bytes.Buffer
	if err := tx.Serialize(&raw); err != nil {
		t.Fatal(err)
	}
	return payout.Coin{TxID: tx.TxHash().String(), Vout: 1, Value: value, Address: addr, Index: index, PrevTx: raw.Bytes()}
}

// payee is an address of the regtest chain outside the shop's account.
func payee(t testing.TB, id string, amount int64) payout.Payee {
	t.Helper()
	return payout.Payee{ID: id, Address: btcAddresses(t, ltcRegtest).p2wpkh, Amount: amount}
}

func decodePSBT(t testing.TB, plan payout.Plan) *psbt.Packet {
	t.Helper()
	p, err := psbt.NewFromRawBytes(bytes.NewReader([]byte(plan.PSBT)), true)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBuild(t *testing.T) {
	w := regtestWallet(t)
	coins := []payout.Coin{fund(t, w, 0, 20_000_000, 1), fund(t, w, 1, 100_000_000, 1), fund(t, w, 2, 50_000_000, 1)}
	payees := []payout.Payee{payee(t, "PO-1", 30_000_000), payee(t, "PO-2", 45_000_000), payee(t, "PO-3", 40_000_000)}
	plan, err := w.Build(payout.Batch{Coins: coins, Payees: payees, FeeRate: 20, ChangeIndex: 7})
	if err != nil {
		t.Fatal(err)
	}
	// Largest first: 1 LTC then 0.5 cover 1.15 and the fee.
	var spent []string
	var in int64
	for _, i := range plan.Inputs {
		spent = append(spent, i.TxID)
		in += i.Value
	}
	if len(spent) != 2 || !slices.Contains(spent, coins[1].TxID) || !slices.Contains(spent, coins[2].TxID) {
		t.Fatalf("inputs %v, want the two largest coins", spent)
	}
	// Fee: the rate times the estimated vsize of 2 P2WPKH inputs and 4
	// P2WPKH outputs: 10.5 + 2*68 + 4*31 = 270.5, so 271 vbytes.
	if plan.VSize != 271 || plan.Fee != 20*271 {
		t.Errorf("vsize %d fee %d, want 271 and %d", plan.VSize, plan.Fee, 20*271)
	}
	change, ok := plan.Change()
	if !ok {
		t.Fatal("no change")
	}
	wantChange, _ := w.Account.InternalAddress(7)
	if change.Address != wantChange || *change.ChangeIndex != 7 {
		t.Errorf("change to %s (index %d), want %s", change.Address, *change.ChangeIndex, wantChange)
	}
	if want := in - 115_000_000 - plan.Fee; change.Amount != want {
		t.Errorf("change %d, want %d", change.Amount, want)
	}

	p := decodePSBT(t, plan)
	tx := p.UnsignedTx
	if tx.Version != 2 || tx.LockTime != 0 || tx.TxHash().String() != plan.TxID {
		t.Errorf("version %d locktime %d txid %s", tx.Version, tx.LockTime, tx.TxHash())
	}
	fee, err := p.GetTxFee()
	if err != nil || int64(fee) != plan.Fee {
		t.Errorf("PSBT fee %d (%v), plan says %d", fee, err, plan.Fee)
	}
	// Inputs: BIP69 order, RBF, witness UTXO, previous transaction and the
	// key's full derivation under the origin.
	for i, txIn := range tx.TxIn {
		if i > 0 && bytes.Compare(reversed(tx.TxIn[i-1].PreviousOutPoint.Hash), reversed(txIn.PreviousOutPoint.Hash)) > 0 {
			t.Errorf("inputs not in BIP69 order")
		}
		if txIn.Sequence != wire.MaxTxInSequenceNum-2 {
			t.Errorf("input %d sequence %x", i, txIn.Sequence)
		}
		pin := p.Inputs[i]
		coin := coins[slices.IndexFunc(coins, func(c payout.Coin) bool { return c.TxID == txIn.PreviousOutPoint.Hash.String() })]
		if pin.WitnessUtxo == nil || pin.WitnessUtxo.Value != coin.Value || pin.NonWitnessUtxo == nil {
			t.Errorf("input %d: witness utxo %v, previous transaction %v", i, pin.WitnessUtxo, pin.NonWitnessUtxo != nil)
		}
		if len(pin.Bip32Derivation) != 1 {
			t.Fatalf("input %d: %d derivations", i, len(pin.Bip32Derivation))
		}
		d := pin.Bip32Derivation[0]
		pub, _ := w.Account.PublicKey(hdwallet.External, coin.Index)
		if got := hdwallet.FormatPath(d.Bip32Path); got != "m/84'/1'/0'/0/"+itoa(coin.Index) || !bytes.Equal(d.PubKey, pub) ||
			d.MasterKeyFingerprint != w.Origin.FingerprintUint32() {
			t.Errorf("input %d: derivation %s %x %08x", i, got, d.PubKey, d.MasterKeyFingerprint)
		}
	}
	// Outputs: the plan's, in the transaction's order; the change alone
	// carries a derivation, on the internal chain.
	if len(tx.TxOut) != 4 || len(plan.Outputs) != 4 {
		t.Fatalf("%d outputs, plan %d", len(tx.TxOut), len(plan.Outputs))
	}
	for i, o := range tx.TxOut {
		po := plan.Outputs[i]
		if hex.EncodeToString(o.PkScript) != po.Script || o.Value != po.Amount {
			t.Errorf("output %d: %x %d, plan %s %d", i, o.PkScript, o.Value, po.Script, po.Amount)
		}
		if i > 0 && tx.TxOut[i-1].Value > o.Value {
			t.Errorf("outputs not in BIP69 order")
		}
		ds := p.Outputs[i].Bip32Derivation
		if po.ChangeIndex == nil {
			if len(ds) != 0 {
				t.Errorf("payout output %d carries a derivation", i)
			}
			continue
		}
		if len(ds) != 1 || hdwallet.FormatPath(ds[0].Bip32Path) != "m/84'/1'/0'/1/7" {
			t.Errorf("change derivation %v", ds)
		}
	}

	// The same request gives the same PSBT.
	backwards := slices.Clone(coins)
	slices.Reverse(backwards)
	again, err := w.Build(payout.Batch{Coins: backwards, Payees: payees, FeeRate: 20, ChangeIndex: 7})
	if err != nil || again.PSBT != plan.PSBT {
		t.Errorf("not reproducible: %v", err)
	}
}

func reversed(h chainhash.Hash) []byte {
	b := h[:]
	out := make([]byte, len(b))
	for i := range b {
		out[i] = b[len(b)-1-i]
	}
	return out
}

// TestBuildDust: a payout below the dust limit is refused; change below
// it is not made and goes to the fee, by less than the change output's
// cost plus the dust limit.
func TestBuildDust(t *testing.T) {
	w := regtestWallet(t)
	script, _ := hdwallet.OutputScript(w.Network, payee(t, "x", 1).Address)
	limit := payout.DustLimit(script, payout.DefaultDustRelayFee(w.Network))
	if limit != 2940 { // (31 + 67) vbytes at 30 litoshi per vbyte
		t.Errorf("P2WPKH dust limit on Litecoin %d, want 2940", limit)
	}
	coin := fund(t, w, 0, 1_000_000, 2)
	_, err := w.Build(payout.Batch{Coins: []payout.Coin{coin}, Payees: []payout.Payee{payee(t, "PO-dust", limit-1)}, FeeRate: 10})
	if !errors.Is(err, payout.ErrPayeeAmount) {
		t.Fatalf("payout under the dust limit: err = %v", err)
	}
	if _, err := w.Build(payout.Batch{Coins: []payout.Coin{coin}, Payees: []payout.Payee{payee(t, "PO-limit", limit)}, FeeRate: 10}); err != nil {
		t.Fatalf("payout at the dust limit: %v", err)
	}

	// One input, one payout: 10.5 + 68 + 31 = 109.5 → 110 vbytes without
	// change, 141 with. Leave 100 litoshi of change at 10 per vbyte.
	const rate = 10
	amount := coin.Value - rate*141 - 100
	plan, err := w.Build(payout.Batch{Coins: []payout.Coin{coin}, Payees: []payout.Payee{payee(t, "PO-1", amount)}, FeeRate: rate})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plan.Change(); ok || len(plan.Outputs) != 1 {
		t.Fatalf("change of 100 made: %+v", plan.Outputs)
	}
	if plan.Fee != coin.Value-amount || plan.VSize != 110 {
		t.Errorf("fee %d vsize %d, want %d and 110", plan.Fee, plan.VSize, coin.Value-amount)
	}
	changeCost := int64(31 * rate)
	changeDust := payout.DustLimit(script, payout.DefaultDustRelayFee(w.Network))
	if extra := plan.Fee - rate*plan.VSize; extra <= 0 || extra >= changeCost+changeDust {
		t.Errorf("folded %d, want between 0 and %d", extra, changeCost+changeDust)
	}
	// At exactly the dust limit, the change is made.
	amount = coin.Value - rate*141 - changeDust
	plan, err = w.Build(payout.Batch{Coins: []payout.Coin{coin}, Payees: []payout.Payee{payee(t, "PO-1", amount)}, FeeRate: rate})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := plan.Change(); !ok || c.Amount != changeDust || plan.Fee != rate*141 {
		t.Errorf("change %+v fee %d, want %d and %d", c, plan.Fee, changeDust, rate*141)
	}
}

func TestBuildRefuses(t *testing.T) {
	w := regtestWallet(t)
	coin := fund(t, w, 0, 1_000_000, 3)
	other := fund(t, w, 1, 1_000_000, 3)
	ok := payee(t, "PO-1", 100_000)
	change, _ := w.Account.InternalAddress(0)
	wrongIndex := other
	wrongIndex.Index = 5
	badPrev := other
	badPrev.Value = 999_999
	otherOrigin := w
	otherOrigin.Origin, _ = hdwallet.ParseKeyOrigin("[73c5da0a/84'/1'/1']")
	cases := []struct {
		name string
		w    payout.Wallet
		b    payout.Batch
		want error
	}{
		{"no payee", w, payout.Batch{Coins: []payout.Coin{coin}, FeeRate: 1}, payout.ErrNoPayees},
		{"fee rate 0", w, payout.Batch{Coins: []payout.Coin{coin}, Payees: []payout.Payee{ok}}, payout.ErrFeeRate},
		{"fee rate per kvB", w, payout.Batch{Coins: []payout.Coin{coin}, Payees: []payout.Payee{ok}, FeeRate: 20_000}, payout.ErrFeeRate},
		{"not enough", w, payout.Batch{Coins: []payout.Coin{coin}, Payees: []payout.Payee{payee(t, "PO-2", 999_000)}, FeeRate: 10}, payout.ErrInsufficientFunds},
		{"no coins", w, payout.Batch{Payees: []payout.Payee{ok}, FeeRate: 10}, payout.ErrInsufficientFunds},
		{"coin twice", w, payout.Batch{Coins: []payout.Coin{coin, coin}, Payees: []payout.Payee{ok}, FeeRate: 10}, payout.ErrCoin},
		{"coin not at its index", w, payout.Batch{Coins: []payout.Coin{coin, wrongIndex}, Payees: []payout.Payee{ok}, FeeRate: 10}, payout.ErrCoin},
		{"previous transaction disagrees", w, payout.Batch{Coins: []payout.Coin{badPrev}, Payees: []payout.Payee{ok}, FeeRate: 10}, payout.ErrCoin},
		{"pays the change address", w, payout.Batch{Coins: []payout.Coin{coin}, Payees: []payout.Payee{{ID: "PO-3", Address: change, Amount: 100_000}}, FeeRate: 10}, payout.ErrAddressOwn},
		{"pays an input's address", w, payout.Batch{Coins: []payout.Coin{coin}, Payees: []payout.Payee{{ID: "PO-4", Address: coin.Address, Amount: 100_000}}, FeeRate: 10}, payout.ErrAddressOwn},
		{"origin of another account", otherOrigin, payout.Batch{Coins: []payout.Coin{coin}, Payees: []payout.Payee{ok}, FeeRate: 10}, hdwallet.ErrInvalidOrigin},
		{"address of another network", w, payout.Batch{Coins: []payout.Coin{coin}, Payees: []payout.Payee{{ID: "PO-5", Address: btcAddresses(t, ltcMain).p2wpkh, Amount: 100_000}}, FeeRate: 10}, hdwallet.ErrInvalidAddress},
	}
	for _, c := range cases {
		if _, err := c.w.Build(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
}
