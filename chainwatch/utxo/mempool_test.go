package utxo_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/txscript"
	"github.com/btcsuite/btcd/wire"

	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/chainwatch/utxo"
	"github.com/kernodeck/kernodeck/domain"
)

// TestMempoolPaymentDetectedThenReplaced: with the node's peer-to-peer
// announcements (and a poll of a minute, so nothing comes from polling), a
// broadcast payment makes the order payment_detected before any block; a
// replacement (RBF) of that transaction paying another address reverts it,
// and the order is back to awaiting payment. The hold the sighting extended
// to the request's deadline is released at the replacement (issue 35). The
// replacement, mined, pays nothing to the order.
func TestMempoolPaymentDetectedThenReplaced(t *testing.T) {
	skipShort(t)
	forEachNode(t, func(t *testing.T, n node) {
		f := newFixture(t, n, apptest.Options{Holds: &app.Holds{}})
		f.runWatcher("watcher", func(w *chainwatch.Watcher) {
			w.Notifier, w.Poll = n.notifier(), time.Minute
		})
		o, in := f.order()
		f.e.WaitFor("the watcher active", func() bool { return f.e.LeaseHolder(f.network) == "watcher" })
		tip, err := f.chain.Tip(f.e.Ctx)
		if err != nil {
			t.Fatal(err)
		}

		txid, replace := rbfPay(t, n, in.Address, amountOf(in))
		f.e.WaitOrderStatus(o.Ref, domain.StatusPaymentDetected)
		ps := f.waitPayments("mempool payment signalled", in.ID, onePayment(chainwatch.StateSeen))
		if ps[0].TxID != txid || !ps[0].Mempool {
			t.Fatalf("payment %+v", ps[0])
		}
		if now, err := f.chain.Tip(f.e.Ctx); err != nil || now != tip {
			t.Fatalf("a block was mined (tip %d, was %d): %v", now, tip, err)
		}
		// The sighting keeps the order's hold until the request's deadline.
		want := in.Deadline.Add(domain.HoldGrace)
		if h := f.hold(o.Ref); h.State != "held" || !h.Live || h.Until.Sub(want).Abs() > time.Millisecond {
			t.Fatalf("hold after the mempool payment %+v, want live until %s", h, want)
		}

		other := otherAddress(t, n)
		replacement := replace(other)
		if replacement == txid {
			t.Fatal("the replacement has the same txid")
		}
		f.waitPayments("replaced payment reverted", in.ID, onePayment(chainwatch.StateReverted))
		f.e.WaitOrderStatus(o.Ref, domain.StatusAwaitingPayment)
		// Replaced, the payment gives the hold back at once (issue 35): not
		// at the request's deadline.
		if h := f.hold(o.Ref); h.State != "released" || h.Live {
			t.Fatalf("hold after the replacement %+v, want released", h)
		}

		// The replacement is mined: nothing for the order.
		n.mine(int(n.policy()))
		f.e.WaitFor("the watcher at the new tip", func() bool {
			h, _, _, err := f.e.DB.LastBlock(f.e.Ctx, f.network)
			return err == nil && h == tip+n.policy()
		})
		if ps := f.e.ChainPayments(in.ID); len(ps) != 1 || ps[0].State != chainwatch.StateReverted {
			t.Fatalf("after the replacement was mined: %+v", ps)
		}
		if got := f.e.Order(o.Ref); got.Status != domain.StatusAwaitingPayment || got.PaidCents != 0 {
			t.Fatalf("order %s paid %d", got.Status, got.PaidCents)
		}
	})
}

// TestMempoolReadOnTakeover: a payment broadcast while no watcher leads
// (the active one died, the standby has not taken the lease yet) is in the
// node's mempool, and no peer will announce it again; the watcher that
// takes the lease reads the mempool at once and the order is
// payment_detected before any block.
func TestMempoolReadOnTakeover(t *testing.T) {
	skipShort(t)
	forEachNode(t, func(t *testing.T, n node) {
		f := newFixture(t, n, apptest.Options{})
		o, in := f.order()
		tip, err := f.chain.Tip(f.e.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		txid, _ := rbfPay(t, n, in.Address, amountOf(in))

		f.runWatcher("standby", func(w *chainwatch.Watcher) {
			w.Notifier, w.Poll = n.notifier(), time.Minute
		})
		f.e.WaitOrderStatus(o.Ref, domain.StatusPaymentDetected)
		ps := f.waitPayments("mempool payment signalled", in.ID, onePayment(chainwatch.StateSeen))
		if ps[0].TxID != txid || !ps[0].Mempool {
			t.Fatalf("payment %+v", ps[0])
		}
		if now, err := f.chain.Tip(f.e.Ctx); err != nil || now != tip {
			t.Fatalf("a block was mined (tip %d, was %d): %v", now, tip, err)
		}
	})
}

// heldFor is an order's capacity hold: its state, end, and whether it
// still counts (live_capacity_holds).
type heldFor struct {
	State string    `db:"state"`
	Until time.Time `db:"held_until"`
	Live  bool      `db:"live"`
}

// hold reads the order's latest capacity hold.
func (f *fixture) hold(ref string) heldFor {
	f.t.Helper()
	var h heldFor
	if err := f.e.DB.GetContext(f.e.Ctx, &h, `SELECT h.state, h.held_until,
			EXISTS (SELECT 1 FROM live_capacity_holds l WHERE l.id = h.id) AS live
		FROM capacity_holds h WHERE h.order_ref = $1 ORDER BY h.id DESC LIMIT 1`, ref); err != nil {
		f.t.Fatalf("hold of %s: %v", ref, err)
	}
	return h
}

// otherAddress is an address of the same network that no request has.
func otherAddress(t *testing.T, n node) string {
	t.Helper()
	params, err := utxo.Params(n.cfg().Network, "regtest")
	if err != nil {
		t.Fatal(err)
	}
	a, err := btcutil.NewAddressWitnessPubKeyHash(bytes.Repeat([]byte{7}, 20), params)
	if err != nil {
		t.Fatal(err)
	}
	return a.EncodeAddress()
}

// rbfPay broadcasts a payment that signals replaceability (BIP125) and
// returns replace, which broadcasts a conflicting transaction with a
// higher fee paying the same amount to another address.
func rbfPay(t *testing.T, n node, addr string, amount int64) (txid string, replace func(to string) string) {
	t.Helper()
	switch n := n.(type) {
	case *btcdNode:
		coin := n.matureCoin()
		build := func(to string, fee int64) string {
			a, err := btcutil.DecodeAddress(to, &chaincfg.RegressionNetParams)
			if err != nil {
				t.Fatal(err)
			}
			script, err := txscript.PayToAddrScript(a)
			if err != nil {
				t.Fatal(err)
			}
			tx := wire.NewMsgTx(2)
			in := wire.NewTxIn(&coin.op, nil, nil)
			in.Sequence = wire.MaxTxInSequenceNum - 2 // replaceable
			tx.AddTxIn(in)
			tx.AddTxOut(wire.NewTxOut(amount, script))
			tx.AddTxOut(wire.NewTxOut(coin.value-amount-fee, n.pk))
			fetcher := txscript.NewCannedPrevOutputFetcher(n.pk, coin.value)
			wit, err := txscript.WitnessSignature(tx, txscript.NewTxSigHashes(tx, fetcher), 0, coin.value, n.pk, txscript.SigHashAll, n.key, true)
			if err != nil {
				t.Fatal(err)
			}
			tx.TxIn[0].Witness = wit
			var buf bytes.Buffer
			if err := tx.Serialize(&buf); err != nil {
				t.Fatal(err)
			}
			if _, err := n.call("sendrawtransaction", hex.EncodeToString(buf.Bytes())); err != nil {
				t.Fatalf("btcd sendrawtransaction: %v", err)
			}
			return tx.TxHash().String()
		}
		return build(addr, 10_000), func(to string) string { return build(to, 50_000) }
	case *litecoinNode:
		raw, err := n.call("sendtoaddress", addr, domain.FormatUnits(big.NewInt(amount), 8), "", "", false, true)
		if err != nil {
			t.Fatalf("litecoind sendtoaddress: %v", err)
		}
		if err := json.Unmarshal(raw, &txid); err != nil {
			t.Fatal(err)
		}
		return txid, func(to string) string { return replaceLitecoin(t, n, txid, addr, to) }
	}
	t.Fatalf("node %T", n)
	return "", nil
}

// replaceLitecoin spends the inputs of txid again: the payment to from goes
// to to instead, and the change pays 0.001 LTC more fee.
func replaceLitecoin(t *testing.T, n *litecoinNode, txid, from, to string) string {
	t.Helper()
	raw, err := n.call("getrawtransaction", txid, true)
	if err != nil {
		t.Fatal(err)
	}
	var tx struct {
		Vin []struct {
			TxID string `json:"txid"`
			Vout int    `json:"vout"`
		} `json:"vin"`
		Vout []struct {
			Value        json.Number `json:"value"`
			ScriptPubKey struct {
				Addresses []string `json:"addresses"`
				Address   string   `json:"address"`
			} `json:"scriptPubKey"`
		} `json:"vout"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&tx); err != nil {
		t.Fatal(err)
	}
	var inputs []map[string]any
	for _, in := range tx.Vin {
		inputs = append(inputs, map[string]any{"txid": in.TxID, "vout": in.Vout, "sequence": 0xfffffffd})
	}
	outputs := map[string]string{}
	for _, o := range tx.Vout {
		a := o.ScriptPubKey.Address
		if a == "" && len(o.ScriptPubKey.Addresses) == 1 {
			a = o.ScriptPubKey.Addresses[0]
		}
		v, err := utxo.ParseAmount(o.Value)
		if err != nil {
			t.Fatal(err)
		}
		if a == from {
			outputs[to] = domain.FormatUnits(v, 8)
		} else {
			outputs[a] = domain.FormatUnits(v.Sub(v, big.NewInt(100_000)), 8)
		}
	}
	if raw, err = n.call("createrawtransaction", inputs, outputs); err != nil {
		t.Fatalf("createrawtransaction: %v", err)
	}
	var unsigned string
	if err := json.Unmarshal(raw, &unsigned); err != nil {
		t.Fatal(err)
	}
	if raw, err = n.call("signrawtransactionwithwallet", unsigned); err != nil {
		t.Fatalf("signrawtransactionwithwallet: %v", err)
	}
	var signed struct {
		Hex      string `json:"hex"`
		Complete bool   `json:"complete"`
	}
	if err := json.Unmarshal(raw, &signed); err != nil || !signed.Complete {
		t.Fatalf("signed %s: %v", raw, err)
	}
	if raw, err = n.call("sendrawtransaction", signed.Hex); err != nil {
		t.Fatalf("sendrawtransaction (replacement): %v", err)
	}
	var replacement string
	if err := json.Unmarshal(raw, &replacement); err != nil {
		t.Fatal(err)
	}
	return replacement
}
