package browsertest

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/btcsuite/btcd/wire"
	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp/totp"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/payout/payouttest"
)

// A payout in LTC end to end on a Litecoin Core regtest node, through the
// PSBT path (issue 39, item 1). The customer, 2FA on, with 100 USD topped
// up in LTC on the node, asks for 80 USD in Chromium: the confirmation
// shows the amount, the LTC at the locked rate and the network fee, and
// takes a TOTP code. Above the four-eyes threshold, agent A's approval
// leaves it waiting and B's (a senior) approves it; B opens the batch. The
// operator signs its PSBT off the server with a Litecoin Core wallet
// holding the account's keys. A forged transaction pasted in the console
// is refused in French and changes nothing; the real one is accepted and
// the watcher broadcasts it. Mined and confirmed, the payout is done, its
// page shows its timeline, the customer's wallet received exactly the
// quote, and payouts_sent is debited once. A reorganisation taking the
// block out puts it back to waiting; mined again, it is done again, still
// debited once.
func TestPayoutLTCThroughPSBTEndToEnd(t *testing.T) {
	s := newShop(t, payoutShop(shopOptions{litecoin: true}))
	nctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dev := s.ltcURL + "/wallet/" + devnodes.LitecoinWallet
	node := func(url, method string, out any, params ...any) {
		t.Helper()
		if err := devnodes.RPC(nctx, url, method, params, out); err != nil {
			t.Fatal(err)
		}
	}
	mine := func(blocks int) {
		t.Helper()
		if err := devnodes.MineLitecoin(nctx, dev, blocks); err != nil {
			t.Fatal(err)
		}
	}

	// A customer with 2FA on and 100 USD topped up in LTC on the node.
	ctx := browser(t)
	const email = "payout-ltc@example.com"
	s.register(t, ctx, "Paul", email)
	secret := s.enableTOTP(t, ctx)
	tuRef := s.topUp100(t, ctx)
	run(t, ctx, "pay the top-up in LTC", click(`#pm-LTC-litecoin`), click(`#paiement form.methods button[type=submit]`), visible(`#pay-address`))
	intents, err := s.env.DB.IntentsFor(s.env.Ctx, tuRef)
	if err != nil || len(intents) != 1 {
		t.Fatalf("intents of %s: %v %v", tuRef, intents, err)
	}
	if _, err := devnodes.PayLitecoin(nctx, dev, intents[0], ltcConfirmations); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the top-up credited", `document.querySelector("[data-status]").dataset.status === "credited"`)

	// The customer's own wallet, and the operator's signing wallet.
	node(s.ltcURL, "createwallet", nil, "client")
	var to, thief string
	node(s.ltcURL+"/wallet/client", "getnewaddress", &to, "", "bech32")
	node(s.ltcURL+"/wallet/client", "getnewaddress", &thief, "", "bech32")
	if _, err := payouttest.ImportLitecoinSigner(nctx, s.ltcURL, "signer"); err != nil {
		t.Fatal(err)
	}

	// The quote: 80 USD of the balance, 0.10 USD of network fee, 79.90 USD
	// of LTC at 100 USD.
	ltc := domain.FormatUnits(big.NewInt(79_900_000), 8)
	poRef := s.askPayout(t, ctx, secret, "LTC/litecoin", to, "80", "0,10 USD", ltc+" LTC sur le réseau Litecoin", "100 USD par LTC")
	run(t, ctx, "the payouts' list", chromedp.Navigate(s.srv.URL+"/compte/retraits"), visible("table.payouts"))
	if got := text(t, ctx, ".held"); got != "80,00 USD" {
		t.Fatalf("held for payouts: %q", got)
	}
	screenshots(t, ctx, "payouts")
	s.balanceIs(t, ctx, "20,00 USD")

	// Agent A approves: above the threshold, it waits for B, a senior, who
	// approves it and opens the batch.
	bob := s.approveByTwo(t, poRef)
	run(t, bob, "open the LTC batch", setSelect("#batch-method", "LTC/litecoin"),
		click(`form.batch-open button[type=submit]`), visible("textarea.psbt"))
	batch := strings.TrimPrefix(eval[string](t, bob, `location.pathname`), "/support/payout-batches/")
	psbt := eval[string](t, bob, `document.querySelector("textarea.psbt").value`)
	screenshots(t, bob, "payout-batch")

	// Signed off the server by the operator's wallet.
	signed, err := payouttest.SignLitecoinPSBT(nctx, s.ltcURL, "signer", psbt)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := hex.DecodeString(signed)
	var tx wire.MsgTx
	if err := tx.Deserialize(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	txid := tx.TxHash().String()

	// A forged one (the payout's output sent elsewhere) is refused, in
	// French, and nothing changes.
	mineScript, _ := hdwallet.OutputScript(hdwallet.LitecoinRegtest, to)
	thiefScript, _ := hdwallet.OutputScript(hdwallet.LitecoinRegtest, thief)
	forged := tx.Copy()
	for _, out := range forged.TxOut {
		if bytes.Equal(out.PkScript, mineScript) {
			out.PkScript = thiefScript
		}
	}
	s.pasteSigned(t, bob, hexOf(t, forged))
	if got := text(t, bob, ".alert.error"); !strings.Contains(got, "ni un retrait approuvé du lot ni sa monnaie : la transaction n'est pas diffusée") {
		t.Fatalf("forged transaction: %q", got)
	}
	if got := text(t, bob, ".batch-status"); got != "à signer" {
		t.Fatalf("batch after the forged transaction: %q", got)
	}
	b, ps, err := s.env.DB.Batch(s.env.Ctx, batch)
	if err != nil || b.Status != domain.BatchOpen || b.RawTx != nil || len(ps) != 1 || ps[0].Status != domain.PayoutBatched {
		t.Fatalf("after the forged transaction: batch %+v, payouts %+v (%v)", b, ps, err)
	}
	if n := s.count(t, `SELECT count(*) FROM payment_intents WHERE target_kind = 'payout'`); n != 0 {
		t.Fatalf("%d payout watches after the forged transaction", n)
	}

	// The real one: accepted, and the watcher broadcasts it.
	s.pasteSigned(t, bob, signed)
	if got := text(t, bob, ".batch-status"); got != "signé, en attente de la blockchain" {
		t.Fatalf("batch after the signed transaction: %q", got)
	}
	if got := text(t, bob, ".batch-txid"); got != txid {
		t.Fatalf("batch txid %q, want %s", got, txid)
	}
	s.env.WaitFor("the watcher to broadcast the payout transaction", func() bool {
		return devnodes.RPC(nctx, s.ltcURL, "getmempoolentry", []any{txid}, nil) == nil
	})

	// Mined, then confirmed: done, debited once.
	mine(1)
	s.waitPayout(t, poRef, domain.PayoutSeen)
	mine(ltcConfirmations - 1)
	s.waitPayout(t, poRef, domain.PayoutDone)
	var received json.Number
	node(s.ltcURL+"/wallet/client", "getreceivedbyaddress", &received, to, 1)
	if received.String() != ltc {
		t.Fatalf("the customer's wallet received %s LTC, want %s", received, ltc)
	}
	s.debitedOnce(t, poRef, 80_00)
	run(t, ctx, "the payout's page", chromedp.Navigate(s.srv.URL+"/compte/retraits/"+poRef), visible(".payout-timeline"))
	if got := text(t, ctx, ".payout-status"); got != domain.PayoutDone.Label() {
		t.Fatalf("payout page: %q", got)
	}
	if got := text(t, ctx, ".payout-txid"); got != txid {
		t.Fatalf("payout page's transaction: %q", got)
	}
	timeline := eval[[]string](t, ctx, `[...document.querySelectorAll(".payout-timeline li")].map(li => li.textContent)`)
	inOrder(t, timeline, "Retrait demandé : 80,00 USD", "Première validation du support", "Retrait validé par le support",
		"ajouté à un lot", "signé et diffusé (transaction "+txid+")", "vu sur la blockchain", "Retrait confirmé : "+ltc+" LTC")
	screenshots(t, ctx, "payout-done")
	s.balanceIs(t, ctx, "20,00 USD")

	// A reorganisation takes the block out: the payout waits again.
	var where struct{ Blockhash string }
	node(s.ltcURL, "getrawtransaction", &where, txid, true)
	node(s.ltcURL, "invalidateblock", nil, where.Blockhash)
	s.waitPayout(t, poRef, domain.PayoutSigned)
	run(t, ctx, "the payout's page after the reorganisation", chromedp.Navigate(s.srv.URL+"/compte/retraits/"+poRef), visible(".payout-timeline"))
	if got := text(t, ctx, ".payout-status"); got != domain.PayoutSigned.Label() {
		t.Fatalf("payout page after the reorganisation: %q", got)
	}
	waitText(t, ctx, ".payout-timeline", "réorganisation")
	s.debitedOnce(t, poRef, 80_00)
	// Back in the mempool (the node's own, or the watcher's broadcast
	// again), mined again: done again, debited once.
	s.env.WaitFor("the payout transaction back in the mempool", func() bool {
		return devnodes.RPC(nctx, s.ltcURL, "getmempoolentry", []any{txid}, nil) == nil
	})
	mine(ltcConfirmations)
	s.waitPayout(t, poRef, domain.PayoutDone)
	s.debitedOnce(t, poRef, 80_00)
	s.balanceIs(t, ctx, "20,00 USD")
	if b, _, err := s.env.DB.Batch(s.env.Ctx, batch); err != nil || b.Status != domain.BatchDone {
		t.Fatalf("batch at the end: %+v (%v)", b, err)
	}
}

// payoutShop is o with payouts on, agent bob a senior beside apptest's
// agent, and a four-eyes threshold of 50 USD.
func payoutShop(o shopOptions) shopOptions {
	o.payouts = true
	o.agents = map[string]string{bobToken: "bob"}
	o.roles = map[string]domain.SupportRoles{"bob": {domain.RoleSenior}}
	o.limits = domain.SupportLimits{FourEyesCents: 50_00, AgentDailyCapCents: 1_000_00}
	return o
}

// askPayout asks on /compte/retraits for a payout of usd to address by
// method, checks the confirmation (the amount, fee, asset amount, address
// and locked rate), confirms it with a TOTP code of the secret and returns
// its reference.
func (s *shop) askPayout(t *testing.T, ctx context.Context, secret, method, address, usd, fee, asset, rate string) string {
	t.Helper()
	run(t, ctx, "ask for a payout", chromedp.Navigate(s.srv.URL+"/compte/retraits"), visible("form.payout-ask"),
		setSelect("#method", method), typeIn("#address", address), typeIn("#amount", usd),
		click(`form.payout-ask button[type=submit]`), visible("section.payout-confirm"))
	for sel, want := range map[string]string{".quote-amount": usd + ",00 USD", ".quote-fee": fee,
		".quote-asset": asset, ".quote-address": address} {
		if got := text(t, ctx, sel); got != want {
			t.Fatalf("quote %s: %q, want %q", sel, got, want)
		}
	}
	if got := text(t, ctx, "section.payout-confirm"); !strings.Contains(got, rate) {
		t.Fatalf("quote without its locked rate %q: %q", rate, got)
	}
	screenshots(t, ctx, "payout-quote-"+strings.ToLower(strings.Split(method, "/")[0]))
	// A step after the one that turned 2FA on (a code is used once).
	code, err := totp.GenerateCode(secret, time.Now().Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "confirm with the code", typeIn("#totp_code", code))
	submitted(t, ctx, `section.payout-confirm button[type=submit]`)
	ref := strings.TrimPrefix(eval[string](t, ctx, `location.pathname`), "/compte/retraits/")
	if got := text(t, ctx, ".payout-status"); got != domain.PayoutRequested.Label() {
		t.Fatalf("new payout %s: %q", ref, got)
	}
	return ref
}

// approveByTwo: agent A approves the payout in the console, which then
// waits for a second agent (above the four-eyes threshold); bob, a
// senior, approves it. It returns bob's browser, on the payouts' page.
func (s *shop) approveByTwo(t *testing.T, ref string) context.Context {
	t.Helper()
	alice := browser(t)
	s.consoleApprove(t, alice, apptest.AgentToken, ref)
	if got := text(t, alice, ".alert.notice"); got != "Retrait "+ref+" : "+domain.PayoutRequested.Label()+"." {
		t.Fatalf("after A's approval: %q", got)
	}
	if p := s.payout(t, ref); p.Status != domain.PayoutRequested || p.ApprovedBy == nil || *p.ApprovedBy != apptest.AgentName {
		t.Fatalf("after A's approval: %+v", p)
	}
	bob := browser(t)
	s.consoleApprove(t, bob, bobToken, ref)
	if got := text(t, bob, ".alert.notice"); got != "Retrait "+ref+" : "+domain.PayoutApproved.Label()+"." {
		t.Fatalf("after B's approval: %q", got)
	}
	if p := s.payout(t, ref); p.Status != domain.PayoutApproved || p.SecondBy == nil || *p.SecondBy != "bob" {
		t.Fatalf("after B's approval: %+v", p)
	}
	return bob
}

// enableTOTP turns the second factor on from /compte with a first code
// and returns its secret.
func (s *shop) enableTOTP(t *testing.T, ctx context.Context) string {
	t.Helper()
	run(t, ctx, "start the 2FA setup", chromedp.Navigate(s.srv.URL+"/compte"), click(`form.totp-setup button`), visible("#totp-secret"))
	secret := text(t, ctx, "#totp-secret")
	code, err := totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "confirm the first code", typeIn("#totp_code", code), click(`form.totp-confirm button`), visible("ol.recovery-codes"))
	return secret
}

// consoleApprove signs an agent in to the console and approves a payout
// from the list of those waiting.
func (s *shop) consoleApprove(t *testing.T, ctx context.Context, token, ref string) {
	t.Helper()
	s.consoleSignIn(t, ctx, token)
	run(t, ctx, "approve "+ref, chromedp.Navigate(s.srv.URL+"/support/payouts?status=requested"),
		click(fmt.Sprintf(`form[action="/support/payouts/%s/approve"] button`, ref)), visible(".alert.notice"))
}

// pasteSigned pastes a signed transaction in the batch page's form and
// sends it.
func (s *shop) pasteSigned(t *testing.T, ctx context.Context, signed string) {
	t.Helper()
	eval[bool](t, ctx, fmt.Sprintf(`document.querySelector("#transaction").value = %q; true`, signed))
	submitted(t, ctx, `form[action$="/signed"] button[type=submit]`)
}

func (s *shop) payout(t *testing.T, ref string) domain.Payout {
	t.Helper()
	p, _, err := s.env.DB.Payout(s.env.Ctx, 0, ref)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitPayout waits until the payout has status.
func (s *shop) waitPayout(t *testing.T, ref string, status domain.PayoutStatus) {
	t.Helper()
	s.env.WaitFor(fmt.Sprintf("payout %s %s", ref, status), func() bool { return s.payout(t, ref).Status == status })
}

func (s *shop) count(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := s.env.DB.GetContext(s.env.Ctx, &n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

// debitedOnce: the payout's amount left the shop once (payouts_sent),
// nothing is held any more, and the ledger balances.
func (s *shop) debitedOnce(t *testing.T, ref string, cents int64) {
	t.Helper()
	sum := func(account string) int64 {
		return s.count(t, `SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entries WHERE ledger_account = $1`, account)
	}
	if sent, held, all := sum("payouts_sent"), sum("payouts_held"), s.count(t, `SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entries`); sent != cents || held != 0 || all != 0 {
		t.Fatalf("ledger: payouts_sent %d (want %d), payouts_held %d, total %d", sent, cents, held, all)
	}
	if n := s.count(t, `SELECT count(*) FROM ledger_transactions WHERE ref = $1 AND starts_with(idempotency_key, $2)`,
		ref, domain.PayoutKey("sent", "")); n != 1 {
		t.Fatalf("payout %s debited %d times", ref, n)
	}
}

// inOrder checks that each want is in a line of lines, in this order.
func inOrder(t *testing.T, lines []string, want ...string) {
	t.Helper()
	i := 0
	for _, l := range lines {
		if i < len(want) && strings.Contains(l, want[i]) {
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("%q not found in order in %q", want[i], lines)
	}
}

func hexOf(t *testing.T, tx *wire.MsgTx) string {
	t.Helper()
	var buf bytes.Buffer
	if err := tx.Serialize(&buf); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(buf.Bytes())
}
