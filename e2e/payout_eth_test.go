package e2e

import (
	"context"
	"encoding/csv"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/pquerna/otp/totp"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch/evm"
	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/domain"
)

// A payout in ETH end to end through the transfer-list path (issue 39,
// item 1), on geth --dev, through the API: a customer with 100 USD
// credited and 2FA on asks for 30 USD in ETH (2 USD of network fee, 28 USD
// at 2,500 USD: 0.0112 ETH); support approves it, a senior opens the ETH
// batch, whose transfer list names the customer's address and the exact
// wei, and locks it for sending; the operator sends the list's line from
// geth's dev account (the payout wallet). A transfer of another amount
// to the same address, from someone else, is not the payout; the
// payout's is: seen, confirmed, done, and debited once.
func TestPayoutETHThroughTransferListEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: needs geth, the Temporal CLI and PostgreSQL (scripts/ensure-tools.sh)")
	}
	port, err := devnodes.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	nctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, err := devnodes.StartGethOn(nctx, t.TempDir(), port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	gethURL := devnodes.GethURLOn(port)

	w := apptest.New(t, apptest.Options{Payouts: apptest.RegtestPayouts(t)})
	chain, err := evm.New(w.Ctx, evm.Config{RPCURL: gethURL, ChainID: 1337})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	const confirmations = 2
	watcher := w.WatcherWith(chain, app.WatcherOptions{Confirmations: confirmations})
	chain.SetWatched(evm.IndexFilter(watcher.Index()))
	wctx, stop := context.WithCancel(w.Ctx)
	done := make(chan struct{})
	t.Cleanup(func() { stop(); <-done })
	go func() { defer close(done); _ = watcher.Run(wctx) }()
	e := &env{t: t, db: w.DB, tc: w.Temporal, logger: w.Logger,
		api: w.ServeAPI(api.Config{AgentRoles: map[string]domain.SupportRoles{apptest.AgentName: {domain.RoleSenior}}}, nil)}

	// A customer with 100 USD on the balance and 2FA on.
	tok := register(e, "Eth", "payout-eth@example.com")
	tu := e.must(http.StatusCreated, "POST", "/v1/topups", tok, map[string]any{"amount_cents": 100_00})
	tuRef := str(tu["topup"].(map[string]any)["reference"])
	e.must(http.StatusOK, "POST", "/v1/support/topups/"+tuRef+"/attribute-payment", apptest.AgentToken,
		map[string]any{"reason": "virement vérifié, ticket 39"})
	e.waitFor("top-up credited", func() bool {
		b := e.must(http.StatusOK, "GET", "/v1/balance", tok, nil)
		return str(b["available_cents"]) == "10000"
	})
	secret := str(e.must(http.StatusOK, "POST", "/v1/me/2fa/setup", tok, nil)["secret"])
	e.must(http.StatusOK, "POST", "/v1/me/2fa/confirm", tok, map[string]any{"code": totpCode(t, secret, time.Now())})

	// The quote and the request.
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	to := crypto.PubkeyToAddress(key.PublicKey).Hex()
	q := e.must(http.StatusOK, "POST", "/v1/payouts/quote", tok, map[string]any{
		"asset": "ETH", "network": "ethereum", "address": to, "amount_cents": 30_00})
	const wei = "11200000000000000" // 28 USD at 2,500 USD
	if str(q["fee_cents"]) != "200" || str(q["amount_base_units"]) != wei || str(q["amount"]) != "0.011200000000000000" ||
		str(q["rate_usd_per_unit"]) != "2500" || str(q["address"]) != to {
		t.Fatalf("quote: %v", q)
	}
	// A step after the one that turned 2FA on (a code is used once).
	po := e.must(http.StatusCreated, "POST", "/v1/payouts", tok, map[string]any{
		"quote": str(q["quote"]), "code": totpCode(t, secret, time.Now().Add(30*time.Second))})
	ref := str(po["reference"])
	if str(po["status"]) != "requested" {
		t.Fatalf("payout: %v", po)
	}

	// Approved, batched, its transfer list read.
	e.must(http.StatusOK, "POST", "/v1/support/payouts/"+ref+"/approve", apptest.AgentToken, map[string]any{})
	b := e.must(http.StatusCreated, "POST", "/v1/support/payout-batches", apptest.AgentToken,
		map[string]any{"network": "ethereum", "asset": "ETH"})
	batch := str(b["reference"])
	export := b["export"].(map[string]any)
	rows, err := csv.NewReader(strings.NewReader(str(export["csv"]))).ReadAll()
	if err != nil || len(rows) != 2 || len(rows[1]) != 8 {
		t.Fatalf("transfer list: %v (%v)", export["csv"], err)
	}
	line := rows[1]
	if line[0] != ref || line[4] != to || line[6] != wei || line[7] != fmt.Sprintf("ethereum:%s@1337?value=%s", to, wei) {
		t.Fatalf("transfer list's line: %q", line)
	}

	// Locked for sending (the payouts are watched from now on), then sent
	// from the payout wallet; before it, someone else pays the customer's
	// address another amount.
	e.must(http.StatusOK, "POST", "/v1/support/payout-batches/"+batch+"/signed", apptest.AgentToken, map[string]any{})
	if st, out := e.call("POST", "/v1/payouts/"+ref+"/cancel", tok, nil); st != http.StatusConflict {
		t.Fatalf("cancel once locked for sending: %d %v", st, out)
	}
	other, err := devnodes.SendEther(nctx, gethURL, to, big.NewInt(1_000_000_000_000_000))
	if err != nil {
		t.Fatal(err)
	}
	amount, _ := new(big.Int).SetString(line[6], 10)
	hash, err := devnodes.SendEther(nctx, gethURL, line[4], amount)
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the payout done", func() bool {
		return str(e.must(http.StatusOK, "GET", "/v1/payouts/"+ref, tok, nil)["status"]) == "done"
	})
	var paid []struct {
		TxID  string `db:"txid"`
		State string `db:"state"`
	}
	if err := e.db.Select(&paid, `SELECT c.txid, c.state FROM chain_payments c JOIN payment_intents i ON i.id = c.intent_id
		WHERE i.target_kind = 'payout' AND i.request_key = $1`, ref); err != nil {
		t.Fatal(err)
	}
	if len(paid) != 1 || !strings.EqualFold(paid[0].TxID, hash) || paid[0].State != "confirmed" {
		t.Fatalf("the payout's transfers: %+v, want %s only (not %s)", paid, hash, other)
	}
	v := e.must(http.StatusOK, "GET", "/v1/payouts/"+ref, tok, nil)
	var msgs []string
	for _, ev := range asList(v["events"]) {
		msgs = append(msgs, str(ev.(map[string]any)["message"]))
	}
	if len(msgs) != 6 || !strings.Contains(msgs[4], "vu sur la blockchain") || !strings.Contains(msgs[5], "Retrait confirmé : 0.011200000000000000 ETH") {
		t.Fatalf("timeline: %q", msgs)
	}
	if bal := e.must(http.StatusOK, "GET", "/v1/balance", tok, nil); str(bal["available_cents"]) != "7000" {
		t.Fatalf("balance after the payout: %v", bal)
	}
	var sent, debits int64
	if err := e.db.Get(&sent, `SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entries WHERE ledger_account = 'payouts_sent'`); err != nil {
		t.Fatal(err)
	}
	if err := e.db.Get(&debits, `SELECT count(*) FROM ledger_transactions WHERE idempotency_key = $1`, domain.PayoutKey("sent", ref)); err != nil {
		t.Fatal(err)
	}
	if sent != 30_00 || debits != 1 {
		t.Fatalf("payouts_sent %d cents in %d debits, want 3000 in 1", sent, debits)
	}
	e.ledgerBalances()
}

func totpCode(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	code, err := totp.GenerateCode(secret, at)
	if err != nil {
		t.Fatal(err)
	}
	return code
}
