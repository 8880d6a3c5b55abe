package browsertest

import (
	"context"
	"encoding/csv"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/domain"
)

// A payout in ETH end to end on geth --dev, through the transfer-list path
// (issue 39, item 1). The customer, 2FA on, tops up 100 USD paid in ETH on
// the node and asks for 80 USD in Chromium: the confirmation shows the
// amount, the ETH at the locked rate and the network fee, and takes a TOTP
// code. Agent A's approval leaves it waiting (above the four-eyes
// threshold); B, a senior, approves it and opens the ETH batch, whose
// transfer list (page and CSV) names the customer's address and the exact
// wei. B locks the batch before sending: the customer's cancel from a page
// opened earlier is refused in French. Someone else pays the customer's
// address another amount: not the payout. The operator sends the list's
// transfer from geth's dev account (the payout wallet): seen, confirmed,
// done, the timeline on the customer's page, debited once.
func TestPayoutETHThroughTransferListEndToEnd(t *testing.T) {
	s := newShop(t, payoutShop(shopOptions{ethereum: true}))
	nctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A customer with 2FA on and 100 USD topped up in ETH on the node.
	ctx := browser(t)
	const email = "payout-eth@example.com"
	s.register(t, ctx, "Eva", email)
	secret := s.enableTOTP(t, ctx)
	tuRef := s.topUp100(t, ctx)
	run(t, ctx, "pay the top-up in ETH", click(`#pm-ETH-ethereum`), click(`#paiement form.methods button[type=submit]`), visible(`#pay-address`))
	intents, err := s.env.DB.IntentsFor(s.env.Ctx, tuRef)
	if err != nil || len(intents) != 1 {
		t.Fatalf("intents of %s: %v %v", tuRef, intents, err)
	}
	if _, err := devnodes.SendEther(nctx, s.gethURL, intents[0].Address, &intents[0].AmountBase.Int); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the top-up credited", `document.querySelector("[data-status]").dataset.status === "credited"`)

	// The customer's wallet: a fresh key, its address in EIP-55.
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	to := crypto.PubkeyToAddress(key.PublicKey).Hex()

	// The quote: 80 USD of the balance, 2 USD of network fee, 78 USD of
	// ETH at 2,500 USD: 0.0312 ETH.
	wei := big.NewInt(31_200_000_000_000_000)
	eth := domain.FormatUnits(wei, 18)
	poRef := s.askPayout(t, ctx, secret, "ETH/ethereum", to, "80", "2,00 USD", eth+" ETH sur le réseau Ethereum", "2\u202f500 USD par ETH")
	s.balanceIs(t, ctx, "20,00 USD")

	// A approves; above the threshold it waits for B, a senior, who
	// approves it and opens the ETH batch.
	bob := s.approveByTwo(t, poRef)
	run(t, bob, "open the ETH batch", setSelect("#batch-method", "ETH/ethereum"),
		click(`form.batch-open button[type=submit]`), visible("ul.transfer-uris"))
	batch := strings.TrimPrefix(eval[string](t, bob, `location.pathname`), "/support/payout-batches/")
	uri := "ethereum:" + to + "@1337?value=" + wei.String()
	if got := eval[[]string](t, bob, `[...document.querySelectorAll("ul.transfer-uris li")].map(li => li.textContent)`); len(got) != 1 || got[0] != uri {
		t.Fatalf("the batch's transfers: %q, want %q", got, uri)
	}
	screenshots(t, bob, "payout-batch-eth")
	dir := download(t, bob, "the transfer list", click(`a[href="/support/payout-batches/`+batch+`/export"]`))
	raw, err := os.ReadFile(filepath.Join(dir, batch+".csv"))
	if err != nil {
		entries, _ := os.ReadDir(dir)
		t.Fatalf("the transfer list: %v (folder: %v)", err, entries)
	}
	rows, err := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
	if err != nil || len(rows) != 2 || len(rows[1]) != 8 {
		t.Fatalf("transfer list: %q (%v)", raw, err)
	}
	line := rows[1]
	if line[0] != poRef || line[4] != to || line[6] != wei.String() || line[7] != uri {
		t.Fatalf("transfer list's line: %q", line)
	}

	// The customer's page, opened while the payout can still be cancelled.
	run(t, ctx, "the payout's page, batched", chromedp.Navigate(s.srv.URL+"/compte/retraits/"+poRef),
		visible(`form[action$="/annuler"]`))
	// B locks the batch before sending: from now on it is watched, and the
	// cancel from that page is refused.
	submitted(t, bob, `form[action$="/signed"] button[type=submit]`)
	if got := text(t, bob, ".batch-status"); got != "signé, en attente de la blockchain" {
		t.Fatalf("batch once locked: %q", got)
	}
	submitted(t, ctx, `form[action$="/annuler"] button[type=submit]`)
	if got := text(t, ctx, ".alert.error"); got != domain.ErrPayoutNotCancellable(domain.PayoutSigned).Message {
		t.Fatalf("cancel once locked: %q", got)
	}
	if got := text(t, ctx, ".payout-status"); got != domain.PayoutSigned.Label() {
		t.Fatalf("payout after the refused cancel: %q", got)
	}

	// Someone else pays the customer's address another amount; then the
	// operator sends the list's transfer from the payout wallet.
	other, err := devnodes.SendEther(nctx, s.gethURL, to, big.NewInt(1_000_000_000_000_000))
	if err != nil {
		t.Fatal(err)
	}
	amount, _ := new(big.Int).SetString(line[6], 10)
	hash, err := devnodes.SendEther(nctx, s.gethURL, line[4], amount)
	if err != nil {
		t.Fatal(err)
	}
	s.waitPayout(t, poRef, domain.PayoutDone)
	var paid []struct {
		TxID  string `db:"txid"`
		State string `db:"state"`
	}
	if err := s.env.DB.SelectContext(s.env.Ctx, &paid, `SELECT c.txid, c.state FROM chain_payments c
		JOIN payment_intents i ON i.id = c.intent_id WHERE i.target_kind = 'payout' AND i.request_key = $1`, poRef); err != nil {
		t.Fatal(err)
	}
	if len(paid) != 1 || !strings.EqualFold(paid[0].TxID, hash) || paid[0].State != "confirmed" {
		t.Fatalf("the payout's transfers: %+v, want %s only (not %s)", paid, hash, other)
	}
	s.debitedOnce(t, poRef, 80_00)
	run(t, ctx, "the payout's page, done", chromedp.Navigate(s.srv.URL+"/compte/retraits/"+poRef), visible(".payout-timeline"))
	if got := text(t, ctx, ".payout-status"); got != domain.PayoutDone.Label() {
		t.Fatalf("payout page: %q", got)
	}
	if got := text(t, ctx, ".payout-txid"); !strings.EqualFold(got, hash) {
		t.Fatalf("payout page's transaction: %q, want %s", got, hash)
	}
	timeline := eval[[]string](t, ctx, `[...document.querySelectorAll(".payout-timeline li")].map(li => li.textContent)`)
	inOrder(t, timeline, "Retrait demandé : 80,00 USD", "Première validation du support", "Retrait validé par le support",
		"ajouté à un lot", "vu sur la blockchain", "Retrait confirmé : "+eth+" ETH")
	screenshots(t, ctx, "payout-done-eth")
	s.balanceIs(t, ctx, "20,00 USD")
	if b, _, err := s.env.DB.Batch(s.env.Ctx, batch); err != nil || b.Status != domain.BatchDone {
		t.Fatalf("batch at the end: %+v (%v)", b, err)
	}
}
