package utxo_test

import (
	"bytes"
	"encoding/hex"
	"math/big"
	"testing"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/txscript"
	"github.com/btcsuite/btcd/wire"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// TestDustOutputsSummarised: one btcd transaction with 3000 outputs of 300
// sat (below the 1000 sat dust threshold) to a request's address. Every
// output is stored once; the workflow receives one payment-dust summary
// (3000 outputs, 900 000 sat), not 3000 signals, so its history stays
// small; the order is then paid as usual and provisioned.
func TestDustOutputsSummarised(t *testing.T) {
	skipShort(t)
	n := startBtcd(t)
	f := newFixture(t, n, apptest.Options{})
	f.runWatcher("watcher", func(w *chainwatch.Watcher) { w.Dust = map[string]*big.Int{"BTC": big.NewInt(1000)} })
	o, in := f.order()

	const outputs, each = 3000, 300
	coin := n.matureCoin()
	to, err := btcutil.DecodeAddress(in.Address, &chaincfg.RegressionNetParams)
	if err != nil {
		t.Fatal(err)
	}
	script, err := txscript.PayToAddrScript(to)
	if err != nil {
		t.Fatal(err)
	}
	tx := wire.NewMsgTx(2)
	tx.AddTxIn(wire.NewTxIn(&coin.op, nil, nil))
	for range outputs {
		tx.AddTxOut(wire.NewTxOut(each, script))
	}
	const fee = 200_000 // ~95 kvB at 2 sat/vB
	tx.AddTxOut(wire.NewTxOut(coin.value-outputs*each-fee, n.pk))
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
		t.Fatalf("sendrawtransaction (%d bytes): %v", buf.Len(), err)
	}
	n.mine(int(n.policy()))

	f.e.WaitFor("the dust summary delivered", func() bool {
		var s struct {
			Outputs  int64  `db:"outputs"`
			Amount   string `db:"amount"`
			Version  int64  `db:"version"`
			Signaled *int64 `db:"signaled_version"`
		}
		err := f.e.DB.GetContext(f.e.Ctx, &s, `SELECT outputs, amount_base::text AS amount, version, signaled_version
			FROM chain_dust_summaries WHERE intent_id = $1`, in.ID)
		return err == nil && s.Outputs == outputs && s.Amount == "900000" && s.Signaled != nil && *s.Signaled == s.Version
	})
	var rows int
	if err := f.e.DB.GetContext(f.e.Ctx, &rows, `SELECT count(*) FROM chain_payments
		WHERE intent_id = $1 AND dust AND state = 'confirmed' AND signaled_state IS NULL`, in.ID); err != nil || rows != outputs {
		t.Fatalf("%d dust rows (%v), want %d", rows, err, outputs)
	}

	n.pay(in.Address, amountOf(in))
	n.mine(int(n.policy()))
	got := f.e.WaitOrderStatus(o.Ref, domain.StatusActive)
	if got.PaidCents != o.TotalCents {
		t.Fatalf("paid %d of %d", got.PaidCents, o.TotalCents)
	}

	signals, events := f.e.History(workflows.RentalWorkflowID(o.Ref))
	if signals[workflows.SignalPaymentDust] != 1 || signals[workflows.SignalPaymentConfirmed] != 1 {
		t.Fatalf("signals %v: want one payment-dust and one payment-confirmed", signals)
	}
	// 3000 outputs signalled one by one would be ~3000 x 14 events.
	if events > 300 {
		t.Fatalf("history of %d events after 3000 dust outputs", events)
	}
	t.Logf("rental history: %d events, signals %v", events, signals)
}
