package devnodes

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/txscript"
	"github.com/btcsuite/btcd/wire"
)

// ReplaceableBitcoin is a payment broadcast by SendBitcoinReplaceable: it
// signals replaceability (BIP125), and Replace spends its coin again.
type ReplaceableBitcoin struct {
	TxID string
	Sats int64 // paid to the address
	Fee  int64 // the payment's fee
	url  string
	op   wire.OutPoint
	coin int64 // the coin's value
}

// SendBitcoinReplaceable pays sats to address on the btcd at url from one
// mature coinbase of the development payer, in a transaction that signals
// replaceability (BIP125), and broadcasts it without mining.
func SendBitcoinReplaceable(ctx context.Context, url, address string, sats int64) (*ReplaceableBitcoin, error) {
	p, err := devPayer()
	if err != nil {
		return nil, err
	}
	op, value, err := spendableCoin(ctx, url, p, sats+4*devFee)
	if err != nil {
		return nil, err
	}
	r := &ReplaceableBitcoin{Sats: sats, Fee: devFee, url: url, op: op, coin: value}
	if r.TxID, err = r.send(ctx, p, address, sats, devFee); err != nil {
		return nil, err
	}
	return r, nil
}

// Replace broadcasts a transaction spending the same coin with three times
// the fee, paying the same amount to address (another one) instead: the
// first payment leaves every mempool. It returns the replacement's id and
// fee.
func (r *ReplaceableBitcoin) Replace(ctx context.Context, address string) (txid string, fee int64, err error) {
	p, err := devPayer()
	if err != nil {
		return "", 0, err
	}
	fee = 3 * r.Fee
	txid, err = r.send(ctx, p, address, r.Sats, fee)
	return txid, fee, err
}

func (r *ReplaceableBitcoin) send(ctx context.Context, p payer, address string, sats, fee int64) (string, error) {
	to, err := btcutil.DecodeAddress(address, &chaincfg.RegressionNetParams)
	if err != nil {
		return "", fmt.Errorf("address %s: %w", address, err)
	}
	script, err := txscript.PayToAddrScript(to)
	if err != nil {
		return "", err
	}
	tx := wire.NewMsgTx(2)
	in := wire.NewTxIn(&r.op, nil, nil)
	in.Sequence = wire.MaxTxInSequenceNum - 2 // replaceable (BIP125)
	tx.AddTxIn(in)
	tx.AddTxOut(wire.NewTxOut(sats, script))
	tx.AddTxOut(wire.NewTxOut(r.coin-sats-fee, p.script))
	fetcher := txscript.NewCannedPrevOutputFetcher(p.script, r.coin)
	wit, err := txscript.WitnessSignature(tx, txscript.NewTxSigHashes(tx, fetcher), 0, r.coin, p.script, txscript.SigHashAll, p.key, true)
	if err != nil {
		return "", err
	}
	tx.TxIn[0].Witness = wit
	var buf bytes.Buffer
	if err := tx.Serialize(&buf); err != nil {
		return "", err
	}
	var txid string
	if err := RPC(ctx, r.url, "sendrawtransaction", []any{hex.EncodeToString(buf.Bytes())}, &txid); err != nil {
		return "", err
	}
	return txid, nil
}
