package browsertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/domain"
)

// A customer extends their active rental from its page (issue 39, item
// 2): the extension page shows each length's price and the new end before
// anything is asked; 7 days paid from the balance move the end at once
// (the balance debited once); then 3 days paid in LTC on a real Litecoin
// regtest node, through the extension's top-up: once its payment is
// confirmed, the order's open page shows the new end, and the balance,
// credited then debited, is where it was.
func TestExtensionFromThePageByBalanceAndByLTC(t *testing.T) {
	s := newShop(t, shopOptions{litecoin: true})
	ctx := browser(t)
	s.register(t, ctx, "Eva", "eva@example.com")
	tuRef := s.topUp100(t, ctx)
	s.support(t, "POST", "/v1/support/topups/"+tuRef+"/attribute-payment", map[string]any{"reason": "virement reçu, ticket 9"})
	ref := s.orderThroughSite(t, ctx, "rtx-a5000", 1, 3)
	run(t, ctx, "pay from balance", click("form.balance-pay button"), visible(".notice"))
	waitJS(t, ctx, "order active", `document.querySelector("[data-status]").dataset.status === "active" && !!document.querySelector("a.extend-rental")`)
	end := *s.env.Order(ref).PeriodEnd

	// The extension page: each length priced, with its new end.
	run(t, ctx, "extension page", click("a.extend-rental"), visible("form.extend"))
	if got := text(t, ctx, "h1"); got != "Prolonger la location "+ref {
		t.Fatalf("extension page: %q", got)
	}
	if got := text(t, ctx, "label[for=extend-7]"); !strings.Contains(got, "55,00 USD") ||
		!strings.Contains(got, "nouvelle fin le "+domain.FrenchDate(end.Add(7*24*time.Hour))) {
		t.Fatalf("7 days offered as %q (end now %v)", got, end)
	}
	if got := text(t, ctx, "label[for=extend-3]"); !strings.Contains(got, "23,57 USD") {
		t.Fatalf("3 days offered as %q", got)
	}
	if got := text(t, ctx, "label[for=extend-balance]"); !strings.Contains(got, "76,43 USD") {
		t.Fatalf("balance offered as %q", got)
	}
	screenshots(t, ctx, "extension")

	// 7 days from the balance: the open order page shows the new end.
	run(t, ctx, "extend 7 days from the balance",
		click("#extend-7"), click("#extend-balance"), click("form.extend button[type=submit]"), visible(".notice"))
	if got := eval[string](t, ctx, `location.pathname`); got != "/orders/"+ref {
		t.Fatalf("after the extension: %s", got)
	}
	newEnd := end.Add(7 * 24 * time.Hour)
	waitText(t, ctx, ".period-end", domain.FrenchDate(newEnd))
	if o := s.env.Order(ref); !o.PeriodEnd.Equal(newEnd) {
		t.Fatalf("order ends %v, want %v", o.PeriodEnd, newEnd)
	}
	waitJS(t, ctx, "the extension on the timeline", `[...document.querySelectorAll(".timeline li")].some(li => li.dataset.kind === "extension_paid")`)
	s.balanceIs(t, ctx, "21,43 USD")
	if got := text(t, ctx, "table.history tbody"); !strings.Contains(got, "Prolongation réglée par le solde") || !strings.Contains(got, "-55,00 USD") {
		t.Fatalf("history: %q", got)
	}

	// 3 days in LTC: the days reserved with the extension's top-up, paid
	// like any top-up.
	run(t, ctx, "extend 3 days in LTC",
		chromedp.Navigate(s.srv.URL+"/orders/"+ref+"/extend"), visible("form.extend"),
		click("#extend-3"), click("#extend-crypto"), click("form.extend button[type=submit]"),
		visible(".topup-extension"),
		click(`#pm-LTC-litecoin`),
		click(`#paiement form.methods button[type=submit]`),
		visible(`#pay-address`),
	)
	xRef := strings.TrimPrefix(eval[string](t, ctx, `location.pathname`), "/topups/")
	if got := text(t, ctx, "h1"); got != "Recharge "+xRef {
		t.Fatalf("extension top-up page: %q", got)
	}
	if got := text(t, ctx, ".topup-extension"); !strings.Contains(got, ref) {
		t.Fatalf("the top-up does not say which rental it extends: %q", got)
	}
	if got := text(t, ctx, "main dl.facts"); !strings.Contains(got, "23,57 USD") {
		t.Fatalf("extension top-up amount: %q", got)
	}
	screenshots(t, ctx, "extension-ltc")
	intents, err := s.env.DB.IntentsFor(s.env.Ctx, xRef)
	if err != nil || len(intents) != 1 {
		t.Fatalf("intents of %s: %v %v", xRef, intents, err)
	}
	pctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := devnodes.PayLitecoin(pctx, s.ltcURL, intents[0], ltcConfirmations); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the extension's top-up credited", `document.querySelector("[data-status]").dataset.status === "credited"`)

	// The order's page follows: the end moved by 3 more days.
	run(t, ctx, "order page", chromedp.Navigate(s.srv.URL+"/orders/"+ref), visible(".period-end"))
	waitText(t, ctx, ".period-end", domain.FrenchDate(newEnd.Add(3*24*time.Hour)))
	var states []string
	if err := s.env.DB.Select(&states, `SELECT state FROM rental_extensions WHERE order_ref = $1 ORDER BY created_at`, ref); err != nil {
		t.Fatal(err)
	}
	if strings.Join(states, ",") != "paid,paid" {
		t.Fatalf("extensions: %v", states)
	}
	s.balanceIs(t, ctx, "21,43 USD")
}

// balanceIs waits for the balance page to show available.
func (s *shop) balanceIs(t *testing.T, ctx context.Context, available string) {
	t.Helper()
	run(t, ctx, "balance", chromedp.Navigate(s.srv.URL+"/balance"), visible(".available"))
	if got := text(t, ctx, ".available"); got != available {
		t.Fatalf("available balance %q, want %q", got, available)
	}
}
