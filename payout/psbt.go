package payout

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/btcsuite/btcd/btcutil/psbt"
	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/wire"

	"github.com/kernodeck/kernodeck/hdwallet"
)

// Reasons a batch cannot be built. They are the caller's (the batch
// workflow's) to act on, not a customer's, so they are plain errors.
var (
	ErrNoPayees          = errors.New("payout: a batch needs at least one payout")
	ErrPayeeAmount       = errors.New("payout: a payout's amount is below the network's dust limit")
	ErrFeeRate           = errors.New("payout: fee rate out of range")
	ErrInsufficientFunds = errors.New("payout: the shop's spendable outputs do not cover the payouts and the fee")
	ErrCoin              = errors.New("payout: a spendable output does not match the account")
	ErrTooLarge          = errors.New("payout: the transaction would exceed the standard size")
)

// Wallet is the shop's account on a Bitcoin-like network as the server
// knows it: the watch-only account key and where that key sits in the
// wallet that signs (its master fingerprint and path, which an xpub does
// not carry).
type Wallet struct {
	Network hdwallet.Network
	Account *hdwallet.Account
	Origin  hdwallet.KeyOrigin
	// DustRelayFee (base units per 1000 vbytes) is the nodes' dust policy;
	// 0 means DefaultDustRelayFee for the network.
	DustRelayFee int64
}

// DefaultDustRelayFee is the nodes' default -dustrelayfee: 3000 sat/kvB for
// Bitcoin Core; Litecoin Core keeps Bitcoin's rule with its own default
// (checked against a Litecoin Core regtest node in TestLitecoinCoreSigns).
func DefaultDustRelayFee(n hdwallet.Network) int64 {
	switch n {
	case hdwallet.Litecoin, hdwallet.LitecoinTestnet, hdwallet.LitecoinRegtest:
		return litecoinDustRelayFee
	}
	return 3000
}

const litecoinDustRelayFee = 30000

// Coin is an output the shop received and may spend: one of the deposit
// addresses of the account's external chain.
type Coin struct {
	TxID    string `json:"txid"` // as nodes print it
	Vout    uint32 `json:"vout"`
	Value   int64  `json:"value"`   // base units
	Address string `json:"address"` // the deposit address, checked against Index
	Index   uint32 `json:"index"`   // its index on the external chain (m/.../0/Index)
	// PrevTx is the raw transaction that created the output, optional:
	// hardware wallets ask for it before signing a segwit v0 input (they
	// trust no amount they cannot hash).
	PrevTx []byte `json:"prev_tx,omitempty"`
}

// Payee is an approved payout: its reference, its checked address
// (Addresses.Check's canonical form) and its amount in base units.
type Payee struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Amount  int64  `json:"amount"`
}

// Batch asks for a transaction paying Payees from Coins. FeeRate is in
// base units per vbyte. ChangeIndex is the internal-chain index of the
// change address (m/.../1/ChangeIndex), which the caller allocates and
// never reuses, as it does deposit indexes.
type Batch struct {
	Coins       []Coin
	Payees      []Payee
	FeeRate     int64
	ChangeIndex uint32
}

// maxFeeRate catches a rate given in the wrong unit (per kvB for per vB).
const maxFeeRate = 10_000

// maxVSize is Bitcoin Core's and Litecoin Core's largest standard
// transaction (MAX_STANDARD_TX_WEIGHT / 4).
const maxVSize = 100_000

// Plan is what a built batch spends and pays: the PSBT for the operator
// and everything CheckSigned compares a signed transaction with. It is
// plain data (JSON) for the caller to store with the batch.
type Plan struct {
	Network string       `json:"network"`
	TxID    string       `json:"txid"` // of the unsigned transaction, which signing segwit inputs does not change
	Inputs  []PlanInput  `json:"inputs"`
	Outputs []PlanOutput `json:"outputs"` // in the transaction's order
	Fee     int64        `json:"fee"`
	VSize   int64        `json:"vsize"` // estimated once signed
	PSBT    string       `json:"psbt"`  // base64 (BIP174)
}

// PlanInput is one spent output.
type PlanInput struct {
	TxID   string `json:"txid"`
	Vout   uint32 `json:"vout"`
	Value  int64  `json:"value"`
	Script string `json:"script"` // hex scriptPubKey
}

// PlanOutput is one output: a payout (PayeeID set) or the change
// (ChangeIndex set).
type PlanOutput struct {
	PayeeID     string  `json:"payee_id,omitempty"`
	ChangeIndex *uint32 `json:"change_index,omitempty"`
	Address     string  `json:"address"`
	Script      string  `json:"script"` // hex scriptPubKey
	Amount      int64   `json:"amount"`
}

// Change returns the change output, if the plan has one.
func (p Plan) Change() (PlanOutput, bool) {
	for _, o := range p.Outputs {
		if o.ChangeIndex != nil {
			return o, true
		}
	}
	return PlanOutput{}, false
}

type output struct {
	PlanOutput
	script []byte
}

// Build selects coins, computes the fee and the change, and returns the
// batch's plan with its PSBT: version 2, locktime 0, every input signalling
// replacement (BIP125, so that a stuck batch can be replaced by one paying
// more), inputs and outputs in BIP69 order. Each input carries its witness
// UTXO (and previous transaction when given) and its key's BIP32
// derivation under w.Origin; the change output carries its own, so that the
// signer shows it as change rather than as a payment.
//
// Coins are taken largest first until they cover the payouts and the fee
// at FeeRate for the estimated size. Change below the dust limit is not
// made: it goes to the fee, which then exceeds the target by less than the
// change output's own cost plus the dust limit.
func (w Wallet) Build(b Batch) (Plan, error) {
	if w.Account == nil || w.Account.Network() != w.Network {
		return Plan{}, fmt.Errorf("payout: the wallet's account is not for %s", w.Network)
	}
	if err := w.Account.CheckOrigin(w.Origin); err != nil {
		return Plan{}, fmt.Errorf("payout: %w", err)
	}
	if b.FeeRate < 1 || b.FeeRate > maxFeeRate {
		return Plan{}, fmt.Errorf("%w: %d per vbyte (want 1 to %d)", ErrFeeRate, b.FeeRate, maxFeeRate)
	}
	if len(b.Payees) == 0 {
		return Plan{}, ErrNoPayees
	}
	dustFee := w.DustRelayFee
	if dustFee == 0 {
		dustFee = DefaultDustRelayFee(w.Network)
	}
	var outs []output
	var total int64
	for _, p := range b.Payees {
		script, err := hdwallet.OutputScript(w.Network, p.Address)
		if err != nil {
			return Plan{}, fmt.Errorf("payout %s: %w", p.ID, err)
		}
		if limit := DustLimit(script, dustFee); p.Amount < limit {
			return Plan{}, fmt.Errorf("%w: payout %s of %d (limit %d)", ErrPayeeAmount, p.ID, p.Amount, limit)
		}
		outs = append(outs, output{PlanOutput{PayeeID: p.ID, Address: p.Address, Script: hex.EncodeToString(script), Amount: p.Amount}, script})
		total += p.Amount
	}
	coins, err := w.checkCoins(b.Coins)
	if err != nil {
		return Plan{}, err
	}
	change, err := w.changeOutput(b.ChangeIndex)
	if err != nil {
		return Plan{}, err
	}
	changeDust := DustLimit(change.script, dustFee)
	for _, o := range outs {
		// Addresses.Check refuses the shop's addresses it is told of; the
		// batch's own change and inputs are refused here whatever it knew.
		own := bytes.Equal(o.script, change.script)
		for _, c := range coins {
			script, _ := hdwallet.OutputScript(w.Network, c.Address) // checked by checkCoins
			own = own || bytes.Equal(o.script, script)
		}
		if own {
			return Plan{}, fmt.Errorf("%w: payout %s", ErrAddressOwn, o.PayeeID)
		}
	}

	scripts := make([][]byte, 0, len(outs)+1)
	for _, o := range outs {
		scripts = append(scripts, o.script)
	}
	withChange := append(slices.Clone(scripts), change.script)
	var sum int64
	for n, c := range coins {
		sum += c.Value
		vsize := estimateVSize(n+1, withChange)
		if vsize > maxVSize {
			return Plan{}, fmt.Errorf("%w: %d inputs", ErrTooLarge, n+1)
		}
		fee := b.FeeRate * vsize
		if rest := sum - total - fee; rest >= changeDust {
			change.Amount = rest
			return w.plan(coins[:n+1], append(outs, change), fee, vsize)
		}
		vsize = estimateVSize(n+1, scripts)
		if fee = b.FeeRate * vsize; sum-total >= fee {
			// Too little for change: the rest is fee.
			return w.plan(coins[:n+1], outs, sum-total, vsize)
		}
	}
	return Plan{}, fmt.Errorf("%w: %d available, %d to pay before fees", ErrInsufficientFunds, sum, total)
}

// checkCoins checks each coin against the account (its address is the one
// at its index: otherwise the PSBT would name a key that cannot sign it)
// and sorts them largest first, ties by outpoint, so that a batch is
// reproducible.
func (w Wallet) checkCoins(in []Coin) ([]Coin, error) {
	coins := slices.Clone(in)
	seen := map[string]bool{}
	for _, c := range coins {
		op := fmt.Sprintf("%s:%d", c.TxID, c.Vout)
		if seen[op] {
			return nil, fmt.Errorf("%w: %s given twice", ErrCoin, op)
		}
		seen[op] = true
		if _, err := chainhash.NewHashFromStr(c.TxID); err != nil || len(c.TxID) != 64 {
			return nil, fmt.Errorf("%w: txid %q", ErrCoin, c.TxID)
		}
		if c.Value <= 0 {
			return nil, fmt.Errorf("%w: %s has no value", ErrCoin, op)
		}
		addr, err := w.Account.Address(c.Index)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrCoin, op, err)
		}
		if addr != c.Address {
			return nil, fmt.Errorf("%w: %s pays %s, not the account's address at index %d", ErrCoin, op, c.Address, c.Index)
		}
		if c.PrevTx != nil {
			if err := checkPrevTx(c); err != nil {
				return nil, err
			}
		}
	}
	slices.SortFunc(coins, func(a, b Coin) int {
		if c := cmp.Compare(b.Value, a.Value); c != 0 {
			return c
		}
		if c := cmp.Compare(a.TxID, b.TxID); c != 0 {
			return c
		}
		return cmp.Compare(a.Vout, b.Vout)
	})
	return coins, nil
}

// checkPrevTx checks that a coin's previous transaction is the one it
// names and pays it what it says: a signer trusts these bytes.
func checkPrevTx(c Coin) error {
	var tx wire.MsgTx
	if err := tx.Deserialize(bytes.NewReader(c.PrevTx)); err != nil {
		return fmt.Errorf("%w: %s: previous transaction: %v", ErrCoin, c.TxID, err)
	}
	if tx.TxHash().String() != c.TxID {
		return fmt.Errorf("%w: %s: the previous transaction given is %s", ErrCoin, c.TxID, tx.TxHash())
	}
	if int(c.Vout) >= len(tx.TxOut) || tx.TxOut[c.Vout].Value != c.Value {
		return fmt.Errorf("%w: %s:%d: the previous transaction does not pay %d there", ErrCoin, c.TxID, c.Vout, c.Value)
	}
	return nil
}

func (w Wallet) changeOutput(index uint32) (output, error) {
	addr, err := w.Account.InternalAddress(index)
	if err != nil {
		return output{}, fmt.Errorf("payout: change address: %w", err)
	}
	script, err := hdwallet.OutputScript(w.Network, addr)
	if err != nil {
		return output{}, fmt.Errorf("payout: change address: %w", err)
	}
	i := index
	return output{PlanOutput{ChangeIndex: &i, Address: addr, Script: hex.EncodeToString(script)}, script}, nil
}

// sequence signals replacement (BIP125) and leaves locktime enabled.
const sequence = wire.MaxTxInSequenceNum - 2

// plan makes the PSBT and the plan for the chosen coins and outputs.
func (w Wallet) plan(coins []Coin, outs []output, fee, vsize int64) (Plan, error) {
	points := make([]*wire.OutPoint, len(coins))
	seqs := make([]uint32, len(coins))
	for i, c := range coins {
		h, _ := chainhash.NewHashFromStr(c.TxID) // checked by checkCoins
		points[i] = wire.NewOutPoint(h, c.Vout)
		seqs[i] = sequence
	}
	txOuts := make([]*wire.TxOut, len(outs))
	for i, o := range outs {
		txOuts[i] = wire.NewTxOut(o.Amount, o.script)
	}
	p, err := psbt.New(points, txOuts, 2, 0, seqs)
	if err != nil {
		return Plan{}, fmt.Errorf("payout: psbt: %w", err)
	}
	u, err := psbt.NewUpdater(p)
	if err != nil {
		return Plan{}, fmt.Errorf("payout: psbt: %w", err)
	}
	fp := w.Origin.FingerprintUint32()
	for i, c := range coins {
		script, err := hdwallet.OutputScript(w.Network, c.Address)
		if err != nil {
			return Plan{}, fmt.Errorf("payout: input %s: %w", c.TxID, err)
		}
		if err := u.AddInWitnessUtxo(wire.NewTxOut(c.Value, script), i); err != nil {
			return Plan{}, fmt.Errorf("payout: psbt input %d: %w", i, err)
		}
		if c.PrevTx != nil {
			var prev wire.MsgTx
			_ = prev.Deserialize(bytes.NewReader(c.PrevTx)) // checked by checkCoins
			if err := u.AddInNonWitnessUtxo(&prev, i); err != nil {
				return Plan{}, fmt.Errorf("payout: psbt input %d: %w", i, err)
			}
		}
		pub, err := w.Account.PublicKey(hdwallet.External, c.Index)
		if err != nil {
			return Plan{}, fmt.Errorf("payout: input %s: %w", c.TxID, err)
		}
		if err := u.AddInBip32Derivation(fp, w.Origin.KeyPath(hdwallet.External, c.Index), pub, i); err != nil {
			return Plan{}, fmt.Errorf("payout: psbt input %d: %w", i, err)
		}
	}
	for i, o := range outs {
		if o.ChangeIndex == nil {
			continue
		}
		pub, err := w.Account.PublicKey(hdwallet.Internal, *o.ChangeIndex)
		if err != nil {
			return Plan{}, fmt.Errorf("payout: change: %w", err)
		}
		if err := u.AddOutBip32Derivation(fp, w.Origin.KeyPath(hdwallet.Internal, *o.ChangeIndex), pub, i); err != nil {
			return Plan{}, fmt.Errorf("payout: psbt change: %w", err)
		}
	}
	if err := psbt.InPlaceSort(p); err != nil {
		return Plan{}, fmt.Errorf("payout: psbt: %w", err)
	}
	if err := p.SanityCheck(); err != nil {
		return Plan{}, fmt.Errorf("payout: psbt: %w", err)
	}
	encoded, err := p.B64Encode()
	if err != nil {
		return Plan{}, fmt.Errorf("payout: psbt: %w", err)
	}
	plan := Plan{Network: string(w.Network), TxID: p.UnsignedTx.TxHash().String(), Fee: fee, VSize: vsize, PSBT: encoded}
	for i, in := range p.UnsignedTx.TxIn {
		utxo := p.Inputs[i].WitnessUtxo
		plan.Inputs = append(plan.Inputs, PlanInput{TxID: in.PreviousOutPoint.Hash.String(), Vout: in.PreviousOutPoint.Index,
			Value: utxo.Value, Script: hex.EncodeToString(utxo.PkScript)})
	}
	// BIP69 put the outputs in another order: follow it, matching each
	// transaction output to the first unused output of the same script
	// and amount (two payouts may be alike).
	used := make([]bool, len(outs))
	for _, txOut := range p.UnsignedTx.TxOut {
		for j, o := range outs {
			if !used[j] && o.Amount == txOut.Value && bytes.Equal(o.script, txOut.PkScript) {
				used[j] = true
				plan.Outputs = append(plan.Outputs, o.PlanOutput)
				break
			}
		}
	}
	return plan, nil
}
