package browsertest

import (
	"context"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/kernodeck/kernodeck/domain"
)

// One service for the checkout's buttons and the accessibility of every
// page: payment requests in LTC on Litecoin, no node (nothing is paid on
// chain; support attributes payments where an active order is needed).
func TestCheckoutButtonsAndAccessibility(t *testing.T) {
	s := newShop(t, shopOptions{ltcRequests: true})
	t.Run("JaiPayeRecordsAClaimAndConfirmsNothing", func(t *testing.T) { claimConfirmsNothing(t, s) })
	t.Run("CopyButtons", func(t *testing.T) { copyButtons(t, s) })
	t.Run("EveryPageType", func(t *testing.T) { everyPageType(t, s) })
	t.Run("KeyboardOnlyOrder", func(t *testing.T) { keyboardOnlyOrder(t, s) })
}

// requestLTC asks, on an order's or top-up's page, for LTC on Litecoin
// instructions.
func requestLTC(t *testing.T, ctx context.Context) {
	t.Helper()
	run(t, ctx, "LTC instructions",
		visible(`#paiement form.methods`),
		click(`#pm-LTC-litecoin`),
		click(`#paiement form.methods button[type=submit]`),
		visible(`#pay-address`),
	)
}

// "J'ai payé" records a claim on the order's timeline, says it confirms
// nothing, and changes neither the order's status nor what it received.
func claimConfirmsNothing(t *testing.T, s *shop) {
	ctx := browser(t)
	s.register(t, ctx, "Jules", "jules@example.com")
	ref := s.orderThroughSite(t, ctx, "rtx-a5000", 1, 3)
	requestLTC(t, ctx)
	if got := text(t, ctx, "#claim-hint"); !strings.Contains(got, "ne confirme rien") {
		t.Fatalf("hint next to the button: %q", got)
	}
	run(t, ctx, "J'ai payé", click(`form.claim button[type=submit]`), visible(`#paiement .claimed`))
	if got := text(t, ctx, `main > .alert.notice[role=status]`); !strings.Contains(got, "ne confirme pas la réception du paiement") {
		t.Fatalf("notice after the claim: %q", got)
	}
	if got := text(t, ctx, "#paiement .claimed"); !strings.Contains(got, "Vous avez signalé un paiement le") {
		t.Fatalf("claim on the checkout: %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector("[data-status]").dataset.status`); got != domain.StatusAwaitingPayment {
		t.Fatalf("status shown after the claim: %q", got)
	}
	if got := text(t, ctx, "#paiement .received"); got != "0,00 USD" {
		t.Fatalf("received after the claim: %q", got)
	}
	// The claim is on the page's tracking and on the order's timeline.
	if n := eval[int](t, ctx, `document.querySelectorAll('.timeline li[data-kind="`+domain.EventPaymentClaimed+`"]').length`); n != 1 {
		t.Fatalf("%d claim(s) on the page's tracking", n)
	}
	tl, err := s.env.DB.Timeline(context.Background(), ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	claims := 0
	for _, ev := range tl {
		if ev.Kind == domain.EventPaymentClaimed {
			claims++
		}
	}
	if claims != 1 {
		t.Fatalf("%d %s event(s) on the timeline", claims, domain.EventPaymentClaimed)
	}
	o, err := s.env.DB.GetOrder(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != domain.StatusAwaitingPayment || o.PaidCents != 0 {
		t.Fatalf("after the claim the order is %s with %d cents paid", o.Status, o.PaidCents)
	}
}

// The copy buttons put the amount, the address and the SSH command in the
// clipboard, and say "Copié".
func copyButtons(t *testing.T, s *shop) {
	ctx := browser(t)
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSettingGranted, Origin: s.srv.URL,
		}); err != nil {
			t.Fatalf("grant %s: %v", name, err)
		}
	}
	s.register(t, ctx, "Lea", "lea@example.com")
	ref := s.orderThroughSite(t, ctx, "rtx-a5000", 1, 3)
	requestLTC(t, ctx)
	copied := func(id string) {
		t.Helper()
		want := text(t, ctx, "#"+id)
		if want == "" {
			t.Fatalf("#%s is empty", id)
		}
		run(t, ctx, "copy "+id, click(`button[data-copy="`+id+`"]`))
		waitJS(t, ctx, "Copié on the button of "+id, `document.querySelector('button[data-copy="`+id+`"]').textContent === "Copié"`)
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		got, err := chromedp.Run(sctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
		if err != nil {
			failPage(t, ctx, "read the clipboard", err)
		}
		if got != want {
			t.Fatalf("clipboard after copying #%s: %q, want %q", id, got, want)
		}
	}
	copied("pay-amount")
	copied("pay-address")
	s.support(t, "POST", "/v1/support/orders/"+ref+"/attribute-payment", map[string]any{"reason": "paiement vérifié, ticket 12"})
	waitJS(t, ctx, "the order active", `document.querySelector("[data-status]").dataset.status === "active" && !!document.querySelector("#ssh-cmd")`)
	copied("ssh-cmd")
}

// A payment request left to expire shows the expired state with the FAQ's
// advice and the form for a new request; the new request has its own
// address, and the amount the service computed for it.
func TestExpiredPaymentRequestThenANewOne(t *testing.T) {
	// Requests last 4 s (a request is never shorter than the configured
	// deadline or 5 minutes, whichever is smaller).
	s := newShop(t, shopOptions{ltcRequests: true, deadline: 4 * time.Second})
	ctx := browser(t)
	s.register(t, ctx, "Max", "max@example.com")
	ref := s.orderThroughSite(t, ctx, "rtx-a5000", 1, 3)
	requestLTC(t, ctx)
	oldAddress := text(t, ctx, "#pay-address")

	// The open page counts down to the deadline, then says not to pay.
	waitText(t, ctx, "#paiement .countdown", "échéance passée : ne payez plus cette demande")
	// The server agrees once its clock passed the deadline too.
	deadline := time.Now().Add(30 * time.Second)
	for {
		run(t, ctx, "order page", chromedp.Navigate(s.srv.URL+"/orders/"+ref), visible("#paiement"))
		if eval[bool](t, ctx, `!!document.querySelector("#paiement .expired")`) {
			break
		}
		if time.Now().After(deadline) {
			failPage(t, ctx, "expired state", context.DeadlineExceeded)
		}
	}
	expired := text(t, ctx, "#paiement .expired")
	for _, advice := range []string{"a expiré le", "Ne réutilisez ni son adresse ni son montant",
		"n'en envoyez pas un second au hasard", "contactez le support avec la référence " + ref} {
		if !strings.Contains(expired, advice) {
			t.Fatalf("expired state lacks %q: %q", advice, expired)
		}
	}
	if eval[bool](t, ctx, `!!document.querySelector("#pay-address, #pay-amount, form.claim")`) {
		t.Fatal("the expired request's address, amount or claim button is still offered")
	}
	if got := eval[string](t, ctx, `document.querySelector("[data-status]").dataset.status`); got != domain.StatusAwaitingPayment {
		t.Fatalf("order status after the request expired: %q", got)
	}

	requestLTC(t, ctx)
	newAddress, newAmount := text(t, ctx, "#pay-address"), text(t, ctx, "#pay-amount")
	intents, err := s.env.DB.IntentsFor(context.Background(), ref)
	if err != nil || len(intents) != 2 {
		t.Fatalf("requests of %s: %v %v", ref, intents, err)
	}
	var newest domain.Intent
	for _, in := range intents {
		if in.Address == newAddress {
			newest = in
		}
	}
	if newest.ID == "" || newAddress == oldAddress {
		t.Fatalf("new request shows %s (old one %s), requests %+v", newAddress, oldAddress, intents)
	}
	if newAmount != domain.FormatUnits(&newest.AmountBase.Int, newest.Decimals) {
		t.Fatalf("new request shows %s LTC, it is %s", newAmount, newest.Amount)
	}
}
