package payout_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcutil/psbt"
	"github.com/btcsuite/btcd/wire"

	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/payout"
	"github.com/kernodeck/kernodeck/payout/payouttest"
)

// ltcNode is a Litecoin Core regtest node with two wallets: "dev", funded
// by devnodes, which pays the shop and holds the payees' addresses, and
// "signer", a descriptor wallet holding the test xprv, as the operator's.
type ltcNode struct {
	t   *testing.T
	ctx context.Context
	url string
}

func (n ltcNode) call(wallet, method string, out any, params ...any) {
	n.t.Helper()
	if err := n.try(wallet, method, out, params...); err != nil {
		n.t.Fatal(err)
	}
}

func (n ltcNode) try(wallet, method string, out any, params ...any) error {
	url := n.url
	if wallet != "" {
		url += "/wallet/" + wallet
	}
	return devnodes.RPC(n.ctx, url, method, params, out)
}

func ltc(base int64) json.Number {
	return json.Number(domain.FormatUnits(bigInt(base), 8))
}

func startLitecoinCore(t *testing.T) ltcNode {
	t.Helper()
	if _, err := os.Stat("/usr/lib/litecoin/litecoind"); err != nil {
		t.Fatalf("litecoind not installed: run scripts/ensure-tools.sh (apt-get install litecoind): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	port, err := devnodes.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	node, err := devnodes.StartLitecoinOn(ctx, t.TempDir(), port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	return ltcNode{t: t, ctx: ctx, url: devnodes.LitecoinURLOn(port)}
}

// importSigner makes the operator's wallet "signer": the account's tprv
// under the same origin as the server's configuration (payouttest).
func (n ltcNode) importSigner() {
	n.t.Helper()
	method, err := payouttest.ImportLitecoinSigner(n.ctx, n.url, "signer")
	if err != nil {
		n.t.Fatal(err)
	}
	if method == "importmulti" {
		n.t.Log("this litecoind has no descriptor wallets (built without SQLite): a legacy wallet imports the descriptors")
	}
}

func (n ltcNode) mine(blocks int) {
	n.t.Helper()
	if err := devnodes.MineLitecoin(n.ctx, n.url+"/wallet/dev", blocks); err != nil {
		n.t.Fatal(err)
	}
}

type verboseTx struct {
	TxID          string
	Confirmations int64
	Vout          []struct {
		Value        json.Number
		N            uint32
		ScriptPubKey struct{ Hex string }
	}
}

// fundShop pays value to the shop's deposit address at index from the dev
// wallet and returns the output as the server would know it.
func (n ltcNode) fundShop(w payout.Wallet, index uint32, value int64) payout.Coin {
	n.t.Helper()
	addr, _ := w.Account.Address(index)
	var txid string
	n.call("dev", "sendtoaddress", &txid, addr, ltc(value))
	var raw string
	n.call("", "getrawtransaction", &raw, txid, false)
	var tx verboseTx
	n.call("", "getrawtransaction", &tx, txid, true)
	script, _ := hdwallet.OutputScript(w.Network, addr)
	for _, o := range tx.Vout {
		if o.ScriptPubKey.Hex == hex.EncodeToString(script) {
			prev, _ := hex.DecodeString(raw)
			return payout.Coin{TxID: txid, Vout: o.N, Value: value, Address: addr, Index: index, PrevTx: prev}
		}
	}
	n.t.Fatalf("%s does not pay %s", txid, addr)
	return payout.Coin{}
}

// TestLitecoinCoreSigns is issue 39's PSBT path on a real node: the
// shop's deposit addresses, derived by hdwallet from the account tpub,
// are funded and mined; Build makes a PSBT of them; Litecoin Core's
// descriptor wallet holding the xprv signs it with walletprocesspsbt and
// nothing else; finalizepsbt; CheckSigned accepts it (and refuses it
// altered); sendrawtransaction; mined, the payees received exactly their
// amounts and the change went to the shop's internal address, which the
// signing wallet knows as its change.
func TestLitecoinCoreSigns(t *testing.T) {
	n := startLitecoinCore(t)
	n.importSigner()
	w := regtestWallet(t)

	// The dust rule Build applies is the node's: its wallet refuses an
	// output one litoshi under DustLimit and sends one at it.
	var dustAddr string
	n.call("dev", "getnewaddress", &dustAddr, "", "bech32")
	dustScript, _ := hdwallet.OutputScript(w.Network, dustAddr)
	limit := payout.DustLimit(dustScript, payout.DefaultDustRelayFee(w.Network))
	if err := n.try("dev", "sendtoaddress", nil, dustAddr, ltc(limit-1)); err == nil || !strings.Contains(err.Error(), "too small") {
		t.Fatalf("the node's wallet sent %d, one under Build's dust limit: %v", limit-1, err)
	}
	n.call("dev", "sendtoaddress", nil, dustAddr, ltc(limit))

	coins := []payout.Coin{n.fundShop(w, 0, 150_000_000), n.fundShop(w, 1, 80_000_000), n.fundShop(w, 2, 5_000_000)}
	n.mine(1)

	// Payees: addresses of the dev wallet (P2WPKH and P2SH), checked as a
	// customer's would be.
	own := payout.OwnAddressesFunc(func(_ context.Context, _, a string) (bool, error) {
		for i := uint32(0); i < 10; i++ {
			ext, _ := w.Account.Address(i)
			in, _ := w.Account.InternalAddress(i)
			if a == ext || a == in {
				return true, nil
			}
		}
		return false, nil
	})
	check := payout.Addresses{Networks: map[string]string{"litecoin": "litecoin-regtest"}, Own: own}
	var payees []payout.Payee
	for i, kind := range []string{"bech32", "p2sh-segwit"} {
		var addr string
		n.call("dev", "getnewaddress", &addr, "", kind)
		canonical, err := check.Check(n.ctx, method("LTC", "litecoin"), addr)
		if err != nil {
			t.Fatalf("Check(%s): %v", addr, err)
		}
		payees = append(payees, payout.Payee{ID: "PO-" + itoa(uint32(i)), Address: canonical, Amount: []int64{120_000_000, 33_333_333}[i]})
	}
	if _, err := check.Check(n.ctx, method("LTC", "litecoin"), coins[0].Address); !errors.Is(err, payout.ErrAddressOwn) {
		t.Fatalf("the shop's deposit address as a payout: %v", err)
	}

	const changeIndex = 3
	plan, err := w.Build(payout.Batch{Coins: coins, Payees: payees, FeeRate: 15, ChangeIndex: changeIndex})
	if err != nil {
		t.Fatal(err)
	}

	// The wallet's own view of its keys is the PSBT's: given the PSBT
	// without derivations, it fills in the same fingerprints, paths and
	// keys, for the inputs and for the change.
	stripped := decodePSBT(t, plan)
	for i := range stripped.Inputs {
		stripped.Inputs[i].Bip32Derivation = nil
	}
	for i := range stripped.Outputs {
		stripped.Outputs[i].Bip32Derivation = nil
	}
	strippedB64, err := stripped.B64Encode()
	if err != nil {
		t.Fatal(err)
	}
	var filled struct{ PSBT string }
	n.call("signer", "walletprocesspsbt", &filled, strippedB64, false, "ALL", true)
	ours, theirs := decodePSBT(t, plan), decodePSBT(t, payout.Plan{PSBT: filled.PSBT})
	for i := range ours.Inputs {
		if !reflect.DeepEqual(ours.Inputs[i].Bip32Derivation, theirs.Inputs[i].Bip32Derivation) {
			t.Errorf("input %d: our derivation %s, the wallet's %s", i, derivations(ours.Inputs[i].Bip32Derivation), derivations(theirs.Inputs[i].Bip32Derivation))
		}
	}
	for i := range ours.Outputs {
		if !reflect.DeepEqual(ours.Outputs[i].Bip32Derivation, theirs.Outputs[i].Bip32Derivation) {
			t.Errorf("output %d: our derivation %s, the wallet's %s", i, derivations(ours.Outputs[i].Bip32Derivation), derivations(theirs.Outputs[i].Bip32Derivation))
		}
	}

	// The operator's wallet signs from the PSBT alone.
	var processed struct {
		PSBT     string
		Complete bool
	}
	n.call("signer", "walletprocesspsbt", &processed, plan.PSBT, true, "ALL", true)
	if !processed.Complete {
		t.Fatal("walletprocesspsbt: not complete: the wallet did not find its keys from the PSBT's derivations")
	}
	var analysis struct {
		EstimatedVSize int64       `json:"estimated_vsize"`
		Fee            json.Number `json:"fee"`
	}
	n.call("", "analyzepsbt", &analysis, processed.PSBT)
	if analysis.Fee != ltc(plan.Fee) || analysis.EstimatedVSize > plan.VSize || analysis.EstimatedVSize < plan.VSize-2 {
		t.Errorf("node: fee %s vsize %d; plan: fee %d vsize %d", analysis.Fee, analysis.EstimatedVSize, plan.Fee, plan.VSize)
	}
	var final struct {
		PSBT     string
		Hex      string
		Complete bool
	}
	n.call("", "finalizepsbt", &final, processed.PSBT, false)
	finalPSBT := final.PSBT
	n.call("", "finalizepsbt", &final, processed.PSBT, true)
	if !final.Complete || finalPSBT == "" || final.Hex == "" {
		t.Fatalf("finalizepsbt: %+v", final)
	}

	// The checker accepts both forms, and refuses the transaction altered.
	signed, err := payout.CheckSigned(plan, finalPSBT)
	if err != nil {
		t.Fatalf("CheckSigned(finalized PSBT): %v", err)
	}
	if s, err := payout.CheckSigned(plan, final.Hex); err != nil || s != signed || s.Hex != final.Hex || s.TxID != plan.TxID {
		t.Fatalf("CheckSigned(hex) = %+v, %v; from the PSBT %+v", s, err, signed)
	}
	raw, _ := hex.DecodeString(final.Hex)
	var tx wire.MsgTx
	if err := tx.Deserialize(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	altered := tx.Copy()
	altered.TxOut[0].Value++
	if _, err := payout.CheckSigned(plan, hexTx(t, altered)); !errors.Is(err, payout.ErrAmountChanged) && !errors.Is(err, payout.ErrChangeChanged) {
		t.Errorf("an output altered: err = %v", err)
	}
	extra := tx.Copy()
	extra.AddTxOut(wire.NewTxOut(100_000, dustScript))
	if _, err := payout.CheckSigned(plan, hexTx(t, extra)); !errors.Is(err, payout.ErrExtraOutput) {
		t.Errorf("an extra output: err = %v", err)
	}

	// Broadcast, mine, look.
	var txid string
	n.call("", "sendrawtransaction", &txid, signed.Hex)
	if txid != plan.TxID {
		t.Fatalf("node txid %s, plan %s", txid, plan.TxID)
	}
	var entry struct{ Fees struct{ Base json.Number } }
	n.call("", "getmempoolentry", &entry, txid)
	if entry.Fees.Base != ltc(plan.Fee) {
		t.Errorf("mempool fee %s, plan %d", entry.Fees.Base, plan.Fee)
	}
	n.mine(1)
	var mined verboseTx
	n.call("", "getrawtransaction", &mined, txid, true)
	if mined.Confirmations < 1 {
		t.Fatalf("not mined: %+v", mined)
	}
	paid := map[string]json.Number{}
	for _, o := range mined.Vout {
		paid[o.ScriptPubKey.Hex] = o.Value
	}
	for _, p := range payees {
		script, _ := hdwallet.OutputScript(w.Network, p.Address)
		if got := paid[hex.EncodeToString(script)]; got != ltc(p.Amount) {
			t.Errorf("%s received %s, want %s", p.ID, got, ltc(p.Amount))
		}
		var received json.Number
		n.call("dev", "getreceivedbyaddress", &received, p.Address, 1)
		if received != ltc(p.Amount) {
			t.Errorf("%s: the payee's wallet received %s, want %s", p.ID, received, ltc(p.Amount))
		}
	}
	change, ok := plan.Change()
	wantChange, _ := w.Account.InternalAddress(changeIndex)
	if !ok || change.Address != wantChange || paid[change.Script] != ltc(change.Amount) || len(mined.Vout) != len(payees)+1 {
		t.Fatalf("change %+v, outputs %v", change, paid)
	}
	var info struct {
		IsMine    bool   `json:"ismine"`
		IsChange  bool   `json:"ischange"`
		HDKeyPath string `json:"hdkeypath"`
	}
	n.call("signer", "getaddressinfo", &info, wantChange)
	if !info.IsMine || !info.IsChange || info.HDKeyPath != "m/84'/1'/0'/1/3" {
		t.Errorf("the signing wallet sees the change as %+v", info)
	}
}

func bigInt(v int64) *big.Int { return big.NewInt(v) }

func derivations(ds []*psbt.Bip32Derivation) string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("[%08x %s %x]", d.MasterKeyFingerprint, hdwallet.FormatPath(d.Bip32Path), d.PubKey))
	}
	return "{" + strings.Join(out, " ") + "}"
}
