package browsertest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/domain"
)

// The support console, on the whole service (real workflows): an agent
// signs in with the token, finds a late payment in the queue and by its
// txid and the customer's email, opens the order's file, refunds the
// amount to the balance with a reason through the confirmation page: the
// settlement workflow carries it out, the queue shrinks and the customer's
// balance grows. The same confirmation posted again runs nothing and shows the first result. A customer's session opens no console page.
func TestSupportConsoleRefundsALatePayment(t *testing.T) {
	s := newShop(t, shopOptions{})
	customer := browser(t)
	s.register(t, customer, "Eve", "eve@example.com")
	ref := s.orderThroughSite(t, customer, "rtx-a5000", 1, 3)

	const txid = "late-tx-0001"
	s.latePayment(t, ref, txid)

	agent := browser(t)
	run(t, agent, "sign in",
		chromedp.Navigate(s.srv.URL+"/support"),
		visible(`form[action="/support/login"]`),
		typeIn("#token", apptest.AgentToken),
		click(`form[action="/support/login"] button[type=submit]`),
		visible("table.queue"),
	)
	if got := text(t, agent, ".who"); !strings.HasPrefix(got, "Agent connecté : watchtest-agent · rôle agent · session jusqu'au ") {
		t.Fatalf("signed in as %q", got)
	}
	if got := text(t, agent, "table.queue tbody"); !strings.Contains(got, ref) || !strings.Contains(got, "eve@example.com") ||
		!strings.Contains(got, "Confirmé après l'échéance") || !strings.Contains(got, "23,57 USD") {
		t.Fatalf("queue: %q", got)
	}
	screenshots(t, agent, "console-queue")
	// A second agent's browser keeps the queue open: it follows the queue's
	// event stream, and shrinks without a reload when the refund is done.
	queueTab := browser(t)
	run(t, queueTab, "queue open elsewhere",
		chromedp.Navigate(s.srv.URL+"/support"),
		typeIn("#token", apptest.AgentToken),
		click(`form[action="/support/login"] button[type=submit]`),
		visible("table.queue"),
	)
	if got := eval[string](t, queueTab, `document.querySelector("[sse-connect]").getAttribute("sse-connect")`); got != "/v1/support/events" {
		t.Fatalf("queue stream: %q", got)
	}
	markUnreloaded(t, queueTab)

	// Found by its txid (the form) and by the customer's email.
	run(t, agent, "find by txid",
		chromedp.Navigate(s.srv.URL+"/support/find"),
		typeIn("#q", txid),
		click(`form[action="/support/find"] button[type=submit]`),
		visible("table.results"),
		click(`table.results a[href="/support/orders/`+ref+`"]`),
		visible("section.exceptions"),
	)
	if got := text(t, agent, "h1"); got != "Commande "+ref {
		t.Fatalf("file: %q", got)
	}
	run(t, agent, "find by email", chromedp.Navigate(s.srv.URL+"/support/find?q=eve%40example.com"), visible("table.results"))
	if got := text(t, agent, "table.results tbody"); !strings.Contains(got, ref) {
		t.Fatalf("find by email: %q", got)
	}

	// The file, then the refund's form and its confirmation page.
	run(t, agent, "file", chromedp.Navigate(s.srv.URL+"/support/orders/"+ref), visible("section.exceptions"))
	if got := text(t, agent, "tr.chain-payment"); !strings.Contains(got, txid) || !strings.Contains(got, "1 sur 2") {
		t.Fatalf("chain payment: %q", got)
	}
	screenshots(t, agent, "console-order")
	run(t, agent, "refund form",
		click(`section.file-actions details.action summary`),
		typeIn(`section.file-actions details.action textarea`, "paiement arrivé après l'échéance, client prévenu"),
		click(`section.file-actions details.action button[type=submit]`),
		visible("ul.changes"),
	)
	if got := text(t, agent, "ul.changes"); !strings.Contains(got, "23,57 USD du montant en attente") ||
		!strings.Contains(got, "remboursés au solde de Eve Testeur (eve@example.com)") {
		t.Fatalf("confirmation: %q", got)
	}
	screenshots(t, agent, "console-confirm")
	// What the confirmation posts, to post it again later (as a browser's
	// resubmission would).
	confirmed := eval[map[string]string](t, agent, `Object.fromEntries(new FormData(document.querySelector("form.actions")))`)
	action := eval[string](t, agent, `document.querySelector("form.actions").getAttribute("action")`)
	run(t, agent, "confirm", click(`form.actions button[type=submit]`), visible(".alert.notice"))
	if got := text(t, agent, ".alert.notice"); !strings.Contains(got, "Remboursement d'un montant en attente") || !strings.Contains(got, "effectuée") {
		t.Fatalf("after the refund: %q", got)
	}
	if got := text(t, agent, "section.support-actions tbody"); !strings.Contains(got, "watchtest-agent") ||
		!strings.Contains(got, "paiement arrivé après l'échéance, client prévenu") {
		t.Fatalf("support actions: %q", got)
	}

	// The queue shrank (in the tab left open, without a reload); the
	// customer's balance grew.
	waitText(t, queueTab, ".lead", "0 montant ouvert")
	checkUnreloaded(t, queueTab)
	if got := text(t, queueTab, "#live"); strings.Contains(got, ref) {
		t.Fatalf("queue after the refund still lists %s: %q", ref, got)
	}
	run(t, customer, "balance", chromedp.Navigate(s.srv.URL+"/balance"), visible(".available"))
	if got := text(t, customer, ".available"); got != "23,57 USD" {
		t.Fatalf("balance after the refund: %q", got)
	}

	// The same confirmation posted again: not carried out again, its
	// first result shown.
	run(t, agent, "a console page", chromedp.Navigate(s.srv.URL+"/support"), visible(".lead"))
	js, err := json.Marshal(confirmed)
	if err != nil {
		t.Fatal(err)
	}
	eval[bool](t, agent, fmt.Sprintf(`(() => {
		const f = document.createElement("form");
		f.method = "post"; f.action = %q;
		for (const [k, v] of Object.entries(%s)) {
			const i = document.createElement("input"); i.type = "hidden"; i.name = k; i.value = v; f.append(i);
		}
		document.body.append(f); f.submit(); return true;
	})()`, action, js))
	run(t, agent, "confirmed again", visible(".alert.notice"))
	if got := text(t, agent, ".alert.notice"); !strings.HasPrefix(got, "Cette confirmation avait déjà été envoyée : l'action n'a pas été refaite") ||
		!strings.Contains(got, "effectuée") {
		t.Fatalf("second refund: %q", got)
	}
	run(t, customer, "balance again", chromedp.Navigate(s.srv.URL+"/balance"), visible(".available"))
	if got := text(t, customer, ".available"); got != "23,57 USD" {
		t.Fatalf("balance after the confirmation posted again: %q", got)
	}

	// The file, left open, shows a support request the customer writes
	// meanwhile, without a reload (the file's event stream says so).
	run(t, agent, "file open", chromedp.Navigate(s.srv.URL+"/support/orders/"+ref), visible("section.support-requests"))
	markUnreloaded(t, agent)
	run(t, customer, "support request",
		chromedp.Navigate(s.srv.URL+"/orders/"+ref+"/support"),
		typeIn("#message", "J'ai payé après l'échéance, où est mon argent ?"),
		click(`form[action="/orders/`+ref+`/support"] button[type=submit]`),
		visible("#support .thread"),
	)
	waitText(t, agent, "section.support-requests", "J'ai payé après l'échéance, où est mon argent ?")
	checkUnreloaded(t, agent)

	// The agent answers from the request itself; the customer's order page,
	// open meanwhile, shows the answer without a reload.
	markUnreloaded(t, customer)
	run(t, agent, "answer",
		typeIn(`form.answer-form textarea[name=message]`, "Remboursé sur votre solde : 23,57 USD."),
		click(`form.answer-form button[type=submit]`),
		visible(".alert.notice"),
	)
	waitText(t, customer, "#support .answer", "Remboursé sur votre solde : 23,57 USD.")
	checkUnreloaded(t, customer)

	// A customer's session opens no console page; the agent's session is
	// no customer's.
	run(t, customer, "customer on the console", chromedp.Navigate(s.srv.URL+"/support"), visible(`form[action="/support/login"]`))
	run(t, agent, "agent on the customer pages", chromedp.Navigate(s.srv.URL+"/orders"), visible(`form[action="/login"]`))

	// Sign-out.
	run(t, agent, "sign out", chromedp.Navigate(s.srv.URL+"/support"), visible(".lead"), click(`form[action="/support/logout"] button`), visible(`form[action="/support/login"]`))
	run(t, agent, "signed out", chromedp.Navigate(s.srv.URL+"/support/orders/"+ref), visible(`form[action="/support/login"]`))
}

// latePayment writes a payment of ref confirmed after its request's
// deadline: on chain (1 confirmation of 2) and in support's queue (23,57
// USD), as the watcher's store and the workflow's transition write them.
func (s *shop) latePayment(t *testing.T, ref, txid string) {
	t.Helper()
	intent := s.writeIntent(t, ref, "1 hour")
	s.execSQL(t, `INSERT INTO chain_blocks (network, height, hash) VALUES ('litecoin', 100, 'block-100') ON CONFLICT DO NOTHING`)
	s.execSQL(t, `INSERT INTO chain_payments (network, txid, output_index, asset, intent_id, address, amount_base, amount_cents, late, state, block_height, block_hash)
		SELECT network, $2, 0, asset, id, address, amount_base, usd_cents, true, 'confirmed', 100, 'block-100' FROM payment_intents WHERE id = $1`, intent, txid)
	if err := s.env.DB.RecordOrderEvent(s.env.Ctx, domain.OrderEvent{OrderRef: ref, Key: domain.KeyConfirmed("litecoin:" + txid + ":0"),
		Kind: domain.EventPaymentConfirmed, Message: "Paiement confirmé après l'échéance : transmis au support.", At: time.Now(),
		Exceptions: []domain.NewException{{Reason: domain.ExceptionLate, PaymentKey: "litecoin:" + txid + ":0", Network: domain.NetworkLitecoin,
			TxID: txid, Asset: "LTC", AmountBase: "2357000000", AmountCents: 2357}}}); err != nil {
		t.Fatal(err)
	}
}
