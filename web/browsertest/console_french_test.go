package browsertest

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/domain"
)

// consoleEnglish are words a person must not read on the console: English
// labels and raw codes (outcomes, states, kinds, networks, presets). Whole
// words, case-insensitive; none is a French word or a proper noun the
// console shows (Bitcoin, Jupyter, Python are checked as raw codes below).
var consoleEnglish = []string{
	"done", "rejected", "acknowledged", "conflict", "txid", "address", "reference", "pending", "failed",
	"success", "error", "none", "true", "false", "null", "undefined", "N/A", "OK", "yes", "no", "paid",
	"order", "orders", "payment", "refund", "refunded", "topup", "top-up", "queued", "waiting", "seen",
	"confirmed", "answered", "open", "credited", "cancelled", "expired", "ended", "late", "over", "extra",
	"partial", "reverted", "dust", "available", "reserved", "in_use", "draining", "broken", "released",
	"remined", "declined", "approved", "awaiting", "host", "hosts", "customer", "amount",
	"search", "submit", "loading", "back", "next", "previous", "unknown", "attribute", "count",
}

// consoleRaw are patterns of values shown unformatted: an amount as the
// JSON writes it, a number of 4 digits or more before USD (a rate), a
// model code, a network or preset code, "(s)" plurals and date styles
// other than the customer pages' ("3 décembre 2026 à 15:05 (14:05 UTC)").
var consoleRaw = []*regexp.Regexp{
	regexp.MustCompile(`\d+\.\d{2} USD`),
	regexp.MustCompile(`\d{4,}(,\d+)? USD`),
	regexp.MustCompile(`\b(b200|rtx-a5000|h100-80g|a100-80g|mi210)\b`),
	regexp.MustCompile(`\b(bitcoin|litecoin|ethereum|tron|solana)\b`),
	regexp.MustCompile(`\b(python|pytorch|notebook|inference)\b`),
	regexp.MustCompile(`\(s\)`),
	regexp.MustCompile(`\d{1,2}/\d{1,2}/\d{4}`),
	regexp.MustCompile(`\d{4}-\d{2}-\d{2}`),
	regexp.MustCompile(` en(\s+sur\b|[\t ]*(\n|\t|$))`), // "Reçu 3 118,00 USD en" (no asset)
}

// pageText is the page's text as a person reads it (document.body's
// innerText), and the same without what <code> shows: commands, hosts,
// transaction ids, which are not words.
func pageText(t *testing.T, ctx context.Context) (body, words string) {
	t.Helper()
	body = eval[string](t, ctx, `document.body.innerText`)
	words = eval[string](t, ctx, `(() => { const b = document.body.cloneNode(true);
		b.querySelectorAll("code").forEach(c => c.textContent = "");
		document.body.after(b); const s = b.innerText; b.remove(); return s; })()`)
	return body, words
}

// checkConsoleFrench fails when the page's text holds an English word
// (outside <code>) or a raw value.
func checkConsoleFrench(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	body, words := pageText(t, ctx)
	var bad []string
	for _, w := range consoleEnglish {
		re := regexp.MustCompile(`(?i)(^|[^\p{L}\p{N}_/-])` + regexp.QuoteMeta(w) + `($|[^\p{L}\p{N}_/-])`)
		if m := re.FindString(words); m != "" {
			bad = append(bad, fmt.Sprintf("English word %q", strings.TrimSpace(m)))
		}
	}
	for _, re := range consoleRaw {
		if m := re.FindString(body); m != "" {
			bad = append(bad, fmt.Sprintf("raw value %q (%s)", m, re))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%s: %s\npage text:\n%s", page, strings.Join(bad, "; "), body)
	}
}

// Every console page, in Chromium, reads in French with the customer
// pages' formatting: an order of 2 lots of B200 for 7 days (3 118,00 USD)
// with a payment request at 65 000 USD per BTC, a late payment queued then
// counted, the rest attributed, provisioned, extended by a day and
// partly refunded, plus a reverted payment's flag without an asset; a
// top-up credited by support; the customer's file, the hosts, the
// machine queue, the approvals, the back office's lists, the queue and
// search results.
func TestSupportConsoleReadsFrench(t *testing.T) {
	// An operator (the hosts page) and a senior (the review forms).
	s := newShop(t, shopOptions{roles: map[string]domain.SupportRoles{apptest.AgentName: {domain.RoleSenior, domain.RoleOperator}}})
	customer := browser(t)
	s.register(t, customer, "Zoé", "zoe@example.com")
	ref := s.orderThroughSite(t, customer, "b200", 2, 7)
	if o := s.env.Order(ref); o.TotalCents != 311800 {
		t.Fatalf("total %d", o.TotalCents)
	}
	// A late payment in LTC (its own request) queued for support, then a
	// payment request in BTC at 65 000 USD, the LTC one superseded.
	const txid = "late-tx-fr01"
	s.latePayment(t, ref, txid)
	s.execSQL(t, `UPDATE payment_intents SET status = 'superseded' WHERE target_ref = $1`, ref)
	s.execSQL(t, `INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals, amount_base,
			usd_cents, rate, rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until, request_key)
		SELECT 'PB-'||ref, 'order', ref, account_id, 'BTC', 'bitcoin', 8, 4796923,
			total_cents, 65000, 'test', now(), 'bcrt1q'||lower(ref), 900, 'bitcoin:bcrt1q'||lower(ref),
			now() + interval '1 hour', now() + interval '2 hours', 'PB-'||ref
		FROM orders WHERE ref = $1`, ref)
	var lateID int64
	if err := s.env.DB.QueryRowContext(s.env.Ctx, `SELECT id FROM payment_exceptions WHERE txid = $1`, txid).Scan(&lateID); err != nil {
		t.Fatal(err)
	}
	s.support(t, "POST", fmt.Sprintf("/v1/support/exceptions/%d/count", lateID), map[string]any{"reason": "paiement en retard accepté"})
	s.support(t, "POST", "/v1/support/orders/"+ref+"/attribute-payment", map[string]any{"reason": "virement reçu, ticket 12"})
	s.env.WaitOrderStatus(ref, domain.StatusActive)
	s.support(t, "POST", "/v1/support/orders/"+ref+"/extend", map[string]any{"reason": "geste commercial", "days": 1})
	s.support(t, "POST", "/v1/support/orders/"+ref+"/refund", map[string]any{"reason": "panne d'une heure", "amount_cents": 2000})
	s.env.WaitFor("refund and extension in the timeline", func() bool {
		kinds := strings.Join(s.env.Kinds(ref), " ")
		return strings.Contains(kinds, domain.EventRefunded) && strings.Contains(kinds, domain.EventExtended)
	})
	// A reverted payment's flag whose asset is not known.
	s.execSQL(t, `INSERT INTO payment_exceptions (target_kind, target_ref, account_id, reason, payment_key, network, txid, amount_cents)
		SELECT 'order', ref, account_id, 'reverted', 'bitcoin:rev-tx-fr01:0', 'bitcoin', 'rev-tx-fr01', 311800 FROM orders WHERE ref = $1`, ref)

	// A top-up credited by support.
	tuRef := s.topUp100(t, customer)
	s.support(t, "POST", "/v1/support/topups/"+tuRef+"/attribute-payment", map[string]any{"reason": "virement reçu, ticket 13"})
	var accountID int64
	if err := s.env.DB.QueryRowContext(s.env.Ctx, `SELECT id FROM accounts WHERE email = 'zoe@example.com'`).Scan(&accountID); err != nil {
		t.Fatal(err)
	}

	agent := browser(t)
	run(t, agent, "sign in",
		chromedp.Navigate(s.srv.URL+"/support"),
		typeIn("#token", apptest.AgentToken),
		click(`form[action="/support/login"] button[type=submit]`),
		visible(".lead"),
	)
	pages := []struct{ name, path, ready string }{
		{"queue", "/support", ".lead"},
		{"search form", "/support/find", "#q"},
		{"search by txid", "/support/find?q=" + txid, "table.results"},
		{"search by reference", "/support/find?q=" + ref, "table.results"},
		{"search by address", "/support/find?q=bcrt1q" + strings.ToLower(ref), "table.results"},
		{"order's file", "/support/orders/" + ref, "section.timeline"},
		{"top-up's file", "/support/topups/" + tuRef, "section.timeline"},
		{"customer's file", fmt.Sprintf("/support/customers/%d", accountID), "table.orders"},
		{"hosts", "/support/hosts", "h1"},
		{"machine queue", "/support/machine-queue", "h1"},
		{"approvals", "/support/approvals", "h1"},
		{"list of orders", "/support/list", "table.cases"},
		{"list of top-ups", "/support/list?type=topup", "table.cases"},
		{"list of payouts", "/support/list?type=payout", "h1"},
		{"list refused", "/support/list?min=5&max=4", "#max-error"},
	}
	for _, p := range pages {
		run(t, agent, p.name, chromedp.Navigate(s.srv.URL+p.path), visible(p.ready))
		cspWatch(t, agent)
		checkConsoleFrench(t, agent, p.name)
		body := eval[string](t, agent, `document.body.innerText`)
		if p.name == "order's file" {
			history := text(t, agent, "section.timeline")
			for _, want := range []string{"3\u202f118,00 USD", "NVIDIA B200"} {
				if !strings.Contains(history, want) {
					t.Errorf("order's history lacks %q:\n%s", want, history)
				}
			}
			for _, want := range []string{"NVIDIA B200", "65\u202f000 USD", "Prise en compte d'un montant reçu", "Bitcoin"} {
				if !strings.Contains(body, want) {
					t.Errorf("order's file lacks %q", want)
				}
			}
			// A live swap (the reverted flag closed meanwhile) reads the
			// same, and breaks no rule of the CSP.
			markUnreloaded(t, agent)
			// A script's style (set through the CSSOM, which the CSP allows)
			// on an element the swap keeps: htmx must not copy it back as
			// a style attribute, which the CSP blocks.
			eval[bool](t, agent, `(() => { document.getElementById("historique-titre").style.outline = "1px solid"; return true; })()`)
			var revID int64
			if err := s.env.DB.QueryRowContext(s.env.Ctx, `SELECT id FROM payment_exceptions WHERE txid = 'rev-tx-fr01'`).Scan(&revID); err != nil {
				t.Fatal(err)
			}
			s.support(t, "POST", fmt.Sprintf("/v1/support/exceptions/%d/resolve", revID), map[string]any{"reason": "revu avec le client"})
			waitText(t, agent, fmt.Sprintf(`[data-exception="%d"] h3`, revID), "réglé")
			checkUnreloaded(t, agent)
			checkConsoleFrench(t, agent, "order's file after a live swap")
		}
		if v := eval[[]string](t, agent, `window.kdCSP || []`); len(v) > 0 {
			t.Errorf("%s: the CSP blocked %q", p.name, v)
		}
	}
}

// cspWatch records the page's CSP violations from now on in window.kdCSP.
func cspWatch(t *testing.T, ctx context.Context) {
	t.Helper()
	eval[bool](t, ctx, `(() => { window.kdCSP = [];
		document.addEventListener("securitypolicyviolation", e =>
			window.kdCSP.push(e.violatedDirective + " " + e.blockedURI + " " + (e.sample || "") + " " + (e.sourceFile || "") + ":" + e.lineNumber));
		return true; })()`)
}

// topUp100 asks for a 100 USD top-up through the balance page and returns
// its reference (the browser is on its page).
func (s *shop) topUp100(t *testing.T, ctx context.Context) string {
	t.Helper()
	run(t, ctx, "top up 100 USD",
		chromedp.Navigate(s.srv.URL+"/balance"),
		click("#tu-10000"),
		click(`form[action="/topups"] button[type=submit]`),
		visible("#paiement"),
	)
	return strings.TrimPrefix(eval[string](t, ctx, `location.pathname`), "/topups/")
}
