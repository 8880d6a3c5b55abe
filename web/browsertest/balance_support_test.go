package browsertest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/kernodeck/kernodeck/domain"
)

// A 100 USD top-up, attributed by support, shows on its open page without
// a reload and in the balance (pending, then available, and in the
// history); a rental is then paid from the balance and the open order page
// follows it to active.
func TestTopUpAttributedBySupportThenRentalPaidFromBalance(t *testing.T) {
	s := newShop(t, shopOptions{})
	ctx := browser(t)
	s.register(t, ctx, "Dana", "dana@example.com")
	tuRef := s.topUp100(t, ctx)
	if !strings.HasPrefix(tuRef, "TU-") {
		t.Fatalf("top-up page %q", tuRef)
	}
	// The top-up's email link, opened signed out, goes through login.
	other := browser(t)
	run(t, other, "top-up email link",
		chromedp.Navigate(s.srv.URL+"/topups/"+tuRef),
		visible(`form[action="/login"]`),
		typeIn("#email", "dana@example.com"),
		typeIn("#password", "correct horse battery staple"),
		click(`form[action="/login"] button[type=submit]`),
		visible("#paiement"),
	)
	if got := text(t, other, "h1"); got != "Recharge "+tuRef {
		t.Fatalf("after login: %q", got)
	}
	run(t, ctx, "balance before", chromedp.Navigate(s.srv.URL+"/balance"), visible(".pending"))
	if got := text(t, ctx, ".pending"); got != "100,00 USD" {
		t.Fatalf("pending before attribution: %q", got)
	}
	if got := text(t, ctx, ".available"); got != "0,00 USD" {
		t.Fatalf("available before attribution: %q", got)
	}

	// The top-up's page, left open, shows it credited without a reload.
	run(t, ctx, "top-up page", chromedp.Navigate(s.srv.URL+"/topups/"+tuRef), visible("#paiement"))
	eval[bool](t, ctx, `window.kdMarker = "same page"; true`)
	s.support(t, "POST", "/v1/support/topups/"+tuRef+"/attribute-payment", map[string]any{"reason": "virement reçu, ticket 7"})
	waitJS(t, ctx, "top-up credited on the open page", `document.querySelector("[data-status]").dataset.status === "`+domain.TopUpCredited+`"`)
	if got := eval[string](t, ctx, `window.kdMarker || ""`); got != "same page" {
		t.Fatal("the top-up page was reloaded")
	}
	run(t, ctx, "balance after", chromedp.Navigate(s.srv.URL+"/balance"), visible(".available"))
	if got := text(t, ctx, ".available"); got != "100,00 USD" {
		t.Fatalf("available after attribution: %q", got)
	}
	if got := text(t, ctx, ".pending"); got != "0,00 USD" {
		t.Fatalf("pending after attribution: %q", got)
	}
	if got := text(t, ctx, "table.history tbody"); !strings.Contains(got, "Recharge créditée") || !strings.Contains(got, "+100,00 USD") {
		t.Fatalf("history: %q", got)
	}

	// RTX A5000 for 3 days: 23,57 USD, covered by the balance.
	ref := s.orderThroughSite(t, ctx, "rtx-a5000", 1, 3)
	if got := text(t, ctx, "form.balance-pay button"); got != "Payer 23,57 USD avec mon solde" {
		t.Fatalf("pay from balance offer: %q", got)
	}
	run(t, ctx, "pay from balance", click("form.balance-pay button"), visible(".notice"))
	waitJS(t, ctx, "order active", `document.querySelector("[data-status]").dataset.status === "active" && !!document.querySelector("#ssh-cmd")`)
	if o := s.env.Order(ref); o.PaymentMethod == nil || *o.PaymentMethod != "balance" {
		t.Fatalf("order paid by %v", o.PaymentMethod)
	}
	run(t, ctx, "balance after the rental", chromedp.Navigate(s.srv.URL+"/balance"), visible(".available"))
	if got := text(t, ctx, ".available"); got != "76,43 USD" {
		t.Fatalf("available after the rental: %q", got)
	}
	if got := text(t, ctx, "table.history tbody"); !strings.Contains(got, "Location réglée par le solde") || !strings.Contains(got, "-23,57 USD") {
		t.Fatalf("history: %q", got)
	}
}

// A support request sent from the form appears in `kernodeck support
// requests`; the agent's answer (`kernodeck support answer`) appears on the
// open order page without a reload, after its event stream was dropped and
// reconnected.
func TestSupportRequestAnsweredLive(t *testing.T) {
	s := newShop(t, shopOptions{})
	ctx := browser(t)
	s.register(t, ctx, "Eve", "eve@example.com")
	ref := s.orderThroughSite(t, ctx, "rtx-4090", 1, 7)
	run(t, ctx, "support form",
		click(`a[href="/orders/`+ref+`/support"]`),
		visible(`form[action="/orders/`+ref+`/support"]`),
		typeIn("#when", "au premier calcul"),
		typeIn("#message", "CUDA out of memory au premier batch"),
		typeIn("#launch_command", "python train.py --batch 64"),
		typeIn("#versions", "torch 2.5, CUDA 12.4"),
		typeIn("#first_error", "RuntimeError: CUDA out of memory"),
		click(`form[action="/orders/`+ref+`/support"] button[type=submit]`),
		visible("#support .thread"),
	)
	if got := text(t, ctx, "#support .thread"); !strings.Contains(got, "CUDA out of memory au premier batch") ||
		!strings.Contains(got, "au premier calcul") || !strings.Contains(got, "en attente de réponse") {
		t.Fatalf("request on the page: %q", got)
	}
	out := s.cli(t, "support", "requests")
	if !strings.Contains(out, ref) || !strings.Contains(out, "CUDA out of memory au premier batch") {
		t.Fatalf("kernodeck support requests:\n%s", out)
	}
	reqs, err := s.env.DB.OpenSupportRequests(s.env.Ctx, 10)
	if err != nil || len(reqs) != 1 || reqs[0].LaunchCommand != "python train.py --batch 64" {
		t.Fatalf("stored request: %+v %v", reqs, err)
	}

	eval[bool](t, ctx, `window.kdMarker = "same page"; window.kdOpens = 0;
		document.body.addEventListener("htmx:sseOpen", () => window.kdOpens++); true`)
	// The stream drops (the server closes every connection): the page
	// connects again by itself and still gets the answer.
	s.srv.CloseClientConnections()
	waitJS(t, ctx, "the event stream reconnected", `window.kdOpens >= 1`)
	s.cli(t, "support", "answer", fmt.Sprint(reqs[0].ID), "--message", "Réduisez le batch à 32 et relancez.")
	waitText(t, ctx, "#support .answer", "Réduisez le batch à 32 et relancez.")
	if got := eval[string](t, ctx, `window.kdMarker || ""`); got != "same page" {
		t.Fatal("the page was reloaded")
	}
	if got := text(t, ctx, "#support .thread h3"); !strings.Contains(got, "répondue") {
		t.Fatalf("request status: %q", got)
	}
}
