package browsertest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/domain"
)

const bobToken = "agent-bob-token-0123456789abcdef"

// Four eyes in the console, on the whole service: agent A refunds a late
// payment above the threshold; the console says it waits for a second
// agent and nothing moves. A sees it on « À approuver » without the
// buttons, and A's approval forced through the confirmation page is
// refused in French. Agent B approves it: the settlement workflow
// (a senior) refunds the amount, the customer's balance grows, and the file's
// journal says who reviewed it.
func TestSupportConsoleFourEyes(t *testing.T) {
	s := newShop(t, shopOptions{agents: map[string]string{bobToken: "bob"},
		limits: domain.SupportLimits{FourEyesCents: 10_00, AgentDailyCapCents: 1_000_00},
		// Both seniors (approving is a senior's): what A is refused is the
		// four-eyes rule's.
		roles: map[string]domain.SupportRoles{apptest.AgentName: {domain.RoleSenior}, "bob": {domain.RoleSenior}}})
	customer := browser(t)
	s.register(t, customer, "Eve", "eve4@example.com")
	ref := s.orderThroughSite(t, customer, "rtx-a5000", 1, 3)
	s.latePayment(t, ref, "late-tx-4eyes")

	alice := browser(t)
	run(t, alice, "A signs in",
		chromedp.Navigate(s.srv.URL+"/support"),
		typeIn("#token", apptest.AgentToken),
		click(`form[action="/support/login"] button[type=submit]`),
		visible("table.queue"),
		chromedp.Navigate(s.srv.URL+"/support/orders/"+ref), visible("section.exceptions"),
		click(`section.file-actions details.action summary`),
		typeIn(`section.file-actions details.action textarea`, "paiement arrivé après l'échéance"),
		click(`section.file-actions details.action button[type=submit]`),
		visible("ul.changes"),
		click(`form.actions button[type=submit]`), visible(".alert.notice"),
	)
	if got := text(t, alice, ".alert.notice"); !strings.Contains(got, "en attente de l'accord d'un second agent") {
		t.Fatalf("after A's refund: %q", got)
	}
	if got := text(t, alice, "section.support-actions tbody"); !strings.Contains(got, "en attente d'un second agent") {
		t.Fatalf("A's journal: %q", got)
	}
	run(t, customer, "balance untouched", chromedp.Navigate(s.srv.URL+"/balance"), visible(".available"))
	if got := text(t, customer, ".available"); got != "0,00 USD" {
		t.Fatalf("balance before approval: %q", got)
	}

	// A's own action: listed, no buttons; forced through, refused.
	run(t, alice, "A's approvals", chromedp.Navigate(s.srv.URL+"/support/approvals"), visible("section.approval"))
	if got := text(t, alice, "section.approval"); !strings.Contains(got, ref) || !strings.Contains(got, "23,57 USD") ||
		!strings.Contains(got, "Vous avez demandé cette action") {
		t.Fatalf("A's approvals: %q", got)
	}
	if n := eval[int](t, alice, `document.querySelectorAll("section.approval form").length`); n != 0 {
		t.Fatalf("A is offered %d review form(s) on their own action", n)
	}
	id := eval[string](t, alice, `document.querySelector("section.approval").dataset.approval`)
	csrf := eval[string](t, alice, `document.querySelector('form[action="/support/logout"] input[name=csrf]').value`)
	eval[bool](t, alice, fmt.Sprintf(`(() => {
		const f = document.createElement("form");
		f.method = "post"; f.action = "/support/approvals/%s/confirm";
		for (const [k, v] of Object.entries({csrf: %q, action: "approve", reason: "je valide moi-même"})) {
			const i = document.createElement("input"); i.type = "hidden"; i.name = k; i.value = v; f.append(i);
		}
		document.body.append(f); f.submit(); return true;
	})()`, id, csrf))
	run(t, alice, "A confirms own approval", visible("ul.changes"), click(`form.actions button[type=submit]`), visible(".alert.error"))
	if got := text(t, alice, ".alert.error"); !strings.Contains(got, "un second agent doit l'approuver ou la refuser, pas vous") {
		t.Fatalf("A approving their own action: %q", got)
	}

	// B approves.
	bob := browser(t)
	run(t, bob, "B approves",
		chromedp.Navigate(s.srv.URL+"/support"),
		typeIn("#token", bobToken),
		click(`form[action="/support/login"] button[type=submit]`),
		visible("table.queue"),
		chromedp.Navigate(s.srv.URL+"/support/approvals"), visible("section.approval form"),
		typeIn("section.approval textarea", "retard vérifié sur la chaîne"),
		click(`section.approval button[value=approve]`),
		visible("ul.changes"),
		click(`form.actions button[type=submit]`), visible(".alert.notice"),
	)
	if got := text(t, bob, ".alert.notice"); !strings.Contains(got, "Action n° "+id+" revue") {
		t.Fatalf("after B's approval: %q", got)
	}
	run(t, customer, "balance after approval", chromedp.Navigate(s.srv.URL+"/balance"), visible(".available"))
	if got := text(t, customer, ".available"); got != "23,57 USD" {
		t.Fatalf("balance after approval: %q", got)
	}
	run(t, alice, "A's file", chromedp.Navigate(s.srv.URL+"/support/orders/"+ref), visible("section.support-actions"))
	if got := text(t, alice, "section.support-actions tbody"); !strings.Contains(got, "revue par bob") || !strings.Contains(got, "effectuée") {
		t.Fatalf("journal after approval: %q", got)
	}
	screenshots(t, bob, "console-approvals")
}
