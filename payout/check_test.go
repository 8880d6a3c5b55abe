package payout_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/wire"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/payout"
)

// batchPlan builds a two-input, three-payout batch with change, twice
// paying one address the same amount (two payouts may be alike).
func batchPlan(t *testing.T) (payout.Plan, []payout.Coin) {
	t.Helper()
	w := regtestWallet(t)
	coins := []payout.Coin{fund(t, w, 0, 40_000_000, 4), fund(t, w, 1, 30_000_000, 4), fund(t, w, 2, 1_000_000, 4)}
	twice := payee(t, "PO-2", 10_000_000)
	again := twice
	again.ID = "PO-3"
	plan, err := w.Build(payout.Batch{Coins: coins, Payees: []payout.Payee{payee(t, "PO-1", 45_000_000), twice, again}, FeeRate: 15, ChangeIndex: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Inputs) != 2 || len(plan.Outputs) != 4 {
		t.Fatalf("plan of %d inputs and %d outputs", len(plan.Inputs), len(plan.Outputs))
	}
	return plan, coins
}

func hexTx(t *testing.T, tx *wire.MsgTx) string {
	t.Helper()
	var b bytes.Buffer
	if err := tx.Serialize(&b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b.Bytes())
}

func TestCheckSignedAccepts(t *testing.T) {
	plan, _ := batchPlan(t)
	final, tx := signPSBT(t, plan, master(t))
	for name, upload := range map[string]string{"finalized PSBT": final, "raw hex": hexTx(t, tx), "raw hex with a newline": hexTx(t, tx) + "\n"} {
		got, err := payout.CheckSigned(plan, upload)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.TxID != plan.TxID || got.Hex != hexTx(t, tx) || got.Fee != plan.Fee {
			t.Errorf("%s: %+v", name, got)
		}
	}
}

func TestCheckSignedRefuses(t *testing.T) {
	plan, coins := batchPlan(t)
	m := master(t)
	_, signed := signPSBT(t, plan, m)
	idx := func(pred func(payout.PlanOutput) bool) int {
		for i, o := range plan.Outputs {
			if pred(o) {
				return i
			}
		}
		t.Fatal("no such output")
		return -1
	}
	changeAt := idx(func(o payout.PlanOutput) bool { return o.ChangeIndex != nil })
	po1 := idx(func(o payout.PlanOutput) bool { return o.PayeeID == "PO-1" })
	po2 := idx(func(o payout.PlanOutput) bool { return o.PayeeID == "PO-2" })
	stranger := payee(t, "x", 1)
	strangerScript, err := hdwallet.OutputScript(hdwallet.LitecoinRegtest, stranger.Address)
	if err != nil {
		t.Fatal(err)
	}
	unused := coins[2] // not selected by the plan

	// Each case changes a copy of the signed transaction (and, where it
	// says so, signs it again so that the signature is not what fails).
	cases := []struct {
		name    string
		change  func(tx *wire.MsgTx)
		resign  bool
		reason  error
		message string
	}{
		{"amount changed", func(tx *wire.MsgTx) { tx.TxOut[po1].Value -= 1 }, false, payout.ErrAmountChanged, "paie 44999999 au lieu de 45000000"},
		{"amount changed, signed again", func(tx *wire.MsgTx) { tx.TxOut[po1].Value -= 1000; tx.TxOut[changeAt].Value += 1000 }, true, payout.ErrAmountChanged, "PO-1"},
		{"address changed", func(tx *wire.MsgTx) { tx.TxOut[po1].PkScript = strangerScript }, true, payout.ErrExtraOutput, "ni un retrait approuvé"},
		{"extra output", func(tx *wire.MsgTx) {
			tx.TxOut[changeAt].Value -= 10_000
			tx.AddTxOut(wire.NewTxOut(10_000, strangerScript))
		}, true, payout.ErrExtraOutput, "ni un retrait approuvé"},
		{"payout left out", func(tx *wire.MsgTx) { tx.TxOut = append(tx.TxOut[:po1:po1], tx.TxOut[po1+1:]...) }, true, payout.ErrMissingOutput, "PO-1"},
		{"payout paid a third time", func(tx *wire.MsgTx) {
			tx.TxOut[changeAt].Value -= 1_000_000
			tx.AddTxOut(wire.NewTxOut(10_000_000, tx.TxOut[po2].PkScript))
		}, true, payout.ErrDuplicate, "deuxième fois"},
		{"change amount", func(tx *wire.MsgTx) { tx.TxOut[changeAt].Value -= 5000 }, true, payout.ErrChangeChanged, "monnaie"},
		{"change elsewhere", func(tx *wire.MsgTx) { tx.TxOut[changeAt].PkScript = strangerScript }, true, payout.ErrExtraOutput, "ni un retrait"},
		{"change left out", func(tx *wire.MsgTx) {
			tx.TxOut = append(tx.TxOut[:changeAt:changeAt], tx.TxOut[changeAt+1:]...)
		}, true, payout.ErrChangeChanged, "monnaie"},
		{"foreign input", func(tx *wire.MsgTx) {
			op, _ := wire.NewOutPointFromString(unused.TxID + ":1")
			tx.AddTxIn(wire.NewTxIn(op, nil, nil))
		}, false, payout.ErrForeignInput, "entrée 2"},
		{"input left out", func(tx *wire.MsgTx) { tx.TxIn = tx.TxIn[:1] }, true, payout.ErrMissingInput, "1 des 2"},
		{"input twice", func(tx *wire.MsgTx) { tx.TxIn = append(tx.TxIn, tx.TxIn[0]) }, false, payout.ErrForeignInput, "entrée 2"},
		{"signature removed", func(tx *wire.MsgTx) { tx.TxIn[1].Witness = nil }, false, payout.ErrUnsigned, "entrée 1"},
		{"signature of another input", func(tx *wire.MsgTx) { tx.TxIn[1].Witness = tx.TxIn[0].Witness }, false, payout.ErrUnsigned, "entrée 1"},
		{"locktime changed", func(tx *wire.MsgTx) { tx.LockTime = 500 }, true, payout.ErrTxChanged, "verrouillage"},
		{"sequence changed", func(tx *wire.MsgTx) { tx.TxIn[0].Sequence = wire.MaxTxInSequenceNum }, true, payout.ErrTxChanged, "séquences"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tx := signed.Copy()
			c.change(tx)
			if c.resign {
				resign(t, plan, tx, m)
			}
			_, err := payout.CheckSigned(plan, hexTx(t, tx))
			assertRefusal(t, err, c.reason, c.message)
		})
	}

	// What is not a signed transaction at all.
	unsigned := decodePSBT(t, plan)
	half := decodePSBT(t, plan)
	signTx(t, half, m) // signed, not finalized
	halfB64, _ := half.B64Encode()
	for _, c := range []struct {
		name, upload string
		reason       error
	}{
		{"empty", "  ", payout.ErrUnreadable},
		{"text", "bonjour", payout.ErrUnreadable},
		{"odd hex", hexTx(t, signed)[1:], payout.ErrUnreadable},
		{"trailing bytes", hexTx(t, signed) + "00", payout.ErrUnreadable},
		{"broken PSBT", plan.PSBT[:40], payout.ErrUnreadable},
		{"unsigned PSBT", plan.PSBT, payout.ErrNotFinal},
		{"signed, not finalized", halfB64, payout.ErrNotFinal},
		{"unsigned transaction", hexTx(t, unsigned.UnsignedTx), payout.ErrUnsigned},
		{"too large", strings.Repeat("00", 3<<20), payout.ErrUnreadable},
	} {
		_, err := payout.CheckSigned(plan, c.upload)
		if !errors.Is(err, c.reason) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.reason)
		}
	}
}

func assertRefusal(t *testing.T, err error, reason error, message string) {
	t.Helper()
	if !errors.Is(err, reason) {
		t.Fatalf("err = %v, want %v", err, reason)
	}
	if domain.ErrorCode(err) != domain.ECodeInvalid {
		t.Errorf("code %s", domain.ErrorCode(err))
	}
	if msg := domain.ErrorMessage(err); !strings.Contains(msg, message) {
		t.Errorf("message %q lacks %q", msg, message)
	}
}

// FuzzCheckSigned: any upload is accepted or refused with a reason, never
// a panic; what is accepted is the plan's transaction.
//
//	go test ./payout -run '^$' -fuzz '^FuzzCheckSigned$' -fuzztime 5m
func FuzzCheckSigned(f *testing.F) {
	w := regtestWallet(f)
	plan, err := w.Build(payout.Batch{Coins: []payout.Coin{fund(f, w, 0, 10_000_000, 5)}, Payees: []payout.Payee{payee(f, "PO-1", 1_000_000)}, FeeRate: 10})
	if err != nil {
		f.Fatal(err)
	}
	final, tx := signPSBT(f, plan, master(f))
	var raw bytes.Buffer
	_ = tx.Serialize(&raw)
	for _, s := range []string{final, hex.EncodeToString(raw.Bytes()), plan.PSBT, "", "cHNidP8B", "00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, upload string) {
		got, err := payout.CheckSigned(plan, upload)
		if err != nil {
			var r *payout.Refusal
			if !errors.As(err, &r) {
				t.Fatalf("not a refusal: %v", err)
			}
			return
		}
		if got.TxID != plan.TxID {
			t.Fatalf("accepted %s, the plan is %s", got.TxID, plan.TxID)
		}
	})
}
