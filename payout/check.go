package payout

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/btcsuite/btcd/btcutil/psbt"
	"github.com/btcsuite/btcd/txscript"
	"github.com/btcsuite/btcd/wire"
)

// Signed is a signed transaction that CheckSigned accepted: ready for
// sendrawtransaction.
type Signed struct {
	TxID string `json:"txid"`
	Hex  string `json:"hex"` // the raw transaction, witnesses included
	Fee  int64  `json:"fee"`
}

// maxUpload bounds what is decoded: a standard transaction is at most
// 400 kB, a PSBT of it with previous transactions somewhat more.
const maxUpload = 4 << 20

// field names the operator's upload in refusals.
const field = "signed_transaction"

// CheckSigned checks an operator's signed transaction against the batch's
// plan before it is broadcast: a raw transaction in hex, or a finalized
// PSBT in base64 (what finalizepsbt or a hardware wallet gives). It must
// spend exactly the plan's inputs, each with a signature that verifies,
// pay exactly the plan's outputs (each approved payout once, at its address
// and amount, and the change to the plan's change address), leave the
// plan's fee, and keep the plan's version, locktime and sequences, so that
// its txid is the plan's. Each refusal is a *Refusal with its own reason
// (ErrForeignInput, ErrExtraOutput, ...) and a French message for the
// operator.
func CheckSigned(plan Plan, upload string) (Signed, error) {
	tx, err := decodeSigned(upload)
	if err != nil {
		return Signed{}, err
	}
	if err := checkInputs(plan, tx); err != nil {
		return Signed{}, err
	}
	if err := checkOutputs(plan, tx); err != nil {
		return Signed{}, err
	}
	var in, out int64
	for _, i := range plan.Inputs {
		in += i.Value
	}
	for _, o := range tx.TxOut {
		out += o.Value
	}
	if in-out != plan.Fee {
		// Outputs and inputs equal to the plan's leave its fee: this only
		// fires on a plan that does not add up.
		return Signed{}, refuse(ErrFeeChanged, field, fmt.Sprintf(
			"Les frais de cette transaction (%d) ne sont pas ceux du lot (%d) : elle n'est pas diffusée.", in-out, plan.Fee))
	}
	if err := checkSignatures(plan, tx); err != nil {
		return Signed{}, err
	}
	if got := tx.TxHash().String(); got != plan.TxID {
		return Signed{}, refuse(ErrTxChanged, field,
			"La version, le verrouillage temporel ou les séquences de cette transaction ont été changés : elle n'est pas diffusée. Signez le PSBT du lot tel quel.")
	}
	var buf bytes.Buffer
	if err := tx.Serialize(&buf); err != nil {
		return Signed{}, fmt.Errorf("payout: serialize: %w", err)
	}
	return Signed{TxID: tx.TxHash().String(), Hex: hex.EncodeToString(buf.Bytes()), Fee: plan.Fee}, nil
}

// decodeSigned reads a raw transaction in hex or a finalized PSBT in
// base64 (which starts with "cHNidP", the base64 of "psbt").
func decodeSigned(upload string) (*wire.MsgTx, error) {
	s := strings.TrimSpace(upload)
	unreadable := refuse(ErrUnreadable, field,
		"Ce n'est ni une transaction signée en hexadécimal ni un PSBT finalisé en base64.")
	if s == "" || len(s) > maxUpload {
		return nil, unreadable
	}
	if strings.HasPrefix(s, "cHNidP") {
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, unreadable
		}
		p, err := psbt.NewFromRawBytes(bytes.NewReader(raw), false)
		if err != nil {
			return nil, unreadable
		}
		if !p.IsComplete() {
			return nil, refuse(ErrNotFinal, field,
				"Ce PSBT n'est pas finalisé : signez-le puis finalisez-le (finalizepsbt), ou envoyez la transaction brute en hexadécimal.")
		}
		tx, err := psbt.Extract(p)
		if err != nil {
			return nil, refuse(ErrNotFinal, field, "La transaction de ce PSBT ne peut pas être extraite : finalisez-le de nouveau.")
		}
		return tx, nil
	}
	raw, err := hex.DecodeString(s)
	if err != nil {
		return nil, unreadable
	}
	var tx wire.MsgTx
	r := bytes.NewReader(raw)
	if err := tx.Deserialize(r); err != nil || r.Len() != 0 {
		return nil, unreadable
	}
	return &tx, nil
}

func checkInputs(plan Plan, tx *wire.MsgTx) error {
	want := map[wire.OutPoint]bool{}
	for _, in := range plan.Inputs {
		op, err := outPoint(in)
		if err != nil {
			return err
		}
		want[op] = true
	}
	spent := map[wire.OutPoint]bool{}
	for i, in := range tx.TxIn {
		if !want[in.PreviousOutPoint] || spent[in.PreviousOutPoint] {
			return refuse(ErrForeignInput, field, fmt.Sprintf(
				"L'entrée %d de cette transaction ne dépense pas une des sorties du lot : elle n'est pas diffusée.", i))
		}
		spent[in.PreviousOutPoint] = true
	}
	if len(spent) != len(want) {
		return refuse(ErrMissingInput, field, fmt.Sprintf(
			"Cette transaction dépense %d des %d sorties du lot : les frais ne seraient pas ceux du lot. Elle n'est pas diffusée.",
			len(spent), len(want)))
	}
	return nil
}

func outPoint(in PlanInput) (wire.OutPoint, error) {
	op, err := wire.NewOutPointFromString(fmt.Sprintf("%s:%d", in.TxID, in.Vout))
	if err != nil {
		return wire.OutPoint{}, fmt.Errorf("payout: plan input %s:%d: %w", in.TxID, in.Vout, err)
	}
	return *op, nil
}

// checkOutputs matches each output of the transaction with an unmatched
// output of the plan of the same script and amount, and names what does
// not match. When several things differ it names the gravest: money to an
// address outside the batch, then a payout's amount, a payout paid twice,
// a payout left out, and last the change (which moves when any of these
// do).
func checkOutputs(plan Plan, tx *wire.MsgTx) error {
	matched := make([]bool, len(plan.Outputs))
	var extra, amount, duplicate, changed *Refusal
	for i, out := range tx.TxOut {
		script := hex.EncodeToString(out.PkScript)
		found, same, sameMatched := -1, -1, false
		for j, o := range plan.Outputs {
			if o.Script != script {
				continue
			}
			if !matched[j] && o.Amount == out.Value {
				found = j
				break
			}
			sameMatched = sameMatched || o.Amount == out.Value
			same = j
		}
		switch {
		case found >= 0:
			matched[found] = true
		case same < 0:
			extra = first(extra, refuse(ErrExtraOutput, field, fmt.Sprintf(
				"La sortie %d (%d) va à une adresse qui n'est ni un retrait approuvé du lot ni sa monnaie : la transaction n'est pas diffusée.", i, out.Value)))
		case plan.Outputs[same].ChangeIndex != nil:
			changed = first(changed, refuse(ErrChangeChanged, field, fmt.Sprintf(
				"La sortie %d rend %d à l'adresse de monnaie du lot, qui attend %d : la transaction n'est pas diffusée.",
				i, out.Value, plan.Outputs[same].Amount)))
		case sameMatched:
			duplicate = first(duplicate, refuse(ErrDuplicate, field, fmt.Sprintf(
				"La sortie %d paie une deuxième fois le retrait %s : la transaction n'est pas diffusée.", i, plan.Outputs[same].PayeeID)))
		default:
			amount = first(amount, refuse(ErrAmountChanged, field, fmt.Sprintf(
				"La sortie %d paie %d au lieu de %d à l'adresse du retrait %s : la transaction n'est pas diffusée.",
				i, out.Value, plan.Outputs[same].Amount, plan.Outputs[same].PayeeID)))
		}
	}
	var missing *Refusal
	for j, ok := range matched {
		switch {
		case ok:
		case plan.Outputs[j].ChangeIndex != nil:
			changed = first(changed, refuse(ErrChangeChanged, field,
				"La monnaie du lot ne revient pas à l'adresse de monnaie de la boutique : la transaction n'est pas diffusée."))
		default:
			missing = first(missing, refuse(ErrMissingOutput, field, fmt.Sprintf(
				"Le retrait %s n'est pas payé par cette transaction : elle n'est pas diffusée.", plan.Outputs[j].PayeeID)))
		}
	}
	for _, r := range []*Refusal{extra, amount, duplicate, missing, changed} {
		if r != nil {
			return r
		}
	}
	return nil
}

func first(kept, r *Refusal) *Refusal {
	if kept != nil {
		return kept
	}
	return r
}

// checkSignatures runs each input's script with the amount and script it
// spends: an unsigned, half-signed or wrongly signed transaction would be
// refused by the node anyway, but said here in the operator's words.
func checkSignatures(plan Plan, tx *wire.MsgTx) error {
	prevOuts := txscript.NewMultiPrevOutFetcher(nil)
	for _, in := range plan.Inputs {
		op, err := outPoint(in)
		if err != nil {
			return err
		}
		script, err := hex.DecodeString(in.Script)
		if err != nil {
			return fmt.Errorf("payout: plan input %s:%d script: %w", in.TxID, in.Vout, err)
		}
		prevOuts.AddPrevOut(op, wire.NewTxOut(in.Value, script))
	}
	hashes := txscript.NewTxSigHashes(tx, prevOuts)
	for i, in := range tx.TxIn {
		prev := prevOuts.FetchPrevOutput(in.PreviousOutPoint)
		engine, err := txscript.NewEngine(prev.PkScript, tx, i, txscript.StandardVerifyFlags, nil, hashes, prev.Value, prevOuts)
		if err == nil {
			err = engine.Execute()
		}
		if err != nil {
			return refuse(ErrUnsigned, field, fmt.Sprintf(
				"La signature de l'entrée %d ne se vérifie pas (transaction non signée, signée à moitié ou par une autre clé) : elle n'est pas diffusée.", i))
		}
	}
	return nil
}
