package browsertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// The pages are readable and usable without JavaScript: the configurator's
// summary follows a plain form submission, registering and ordering are
// plain posts, and the order page shows its state.
func TestPagesWorkWithoutJavaScript(t *testing.T) {
	s := newShop(t, shopOptions{})
	ctx := browser(t)
	run(t, ctx, "disable scripts", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}))
	run(t, ctx, "configure without scripts",
		chromedp.Navigate(s.srv.URL+"/"),
		visible("#resume"),
		click("#m-b200"),
		click("#d-7"),
		chromedp.SetValue(chromedp.CSS("#lots"), "2"),
	)
	// The submission navigates: until the new page has loaded, #resume is
	// the old page's ("1 GPU"), so wait for the navigation's load.
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := chromedp.RunResponse(sctx, click(`#configurateur button.nojs-only`)); err != nil {
		failPage(t, ctx, "plain submission", err)
	}
	run(t, ctx, "summary after the submission", visible("#resume"))
	if got := text(t, ctx, "#resume .total-gpus"); got != "4 GPU" {
		t.Fatalf("summary after the plain submission: %q", got)
	}
	if got := eval[bool](t, ctx, `document.documentElement.classList.contains("js")`); got {
		t.Fatal("site.js ran: scripts are not disabled")
	}
	s.register(t, ctx, "Nora", "nora@example.com")
	ref := s.orderThroughSite(t, ctx, "b200", 2, 7)
	if got := text(t, ctx, ".status"); !strings.Contains(got, "En attente de paiement") {
		t.Fatalf("order page status: %q", got)
	}
	if got := text(t, ctx, "h1"); got != "Commande "+ref {
		t.Fatalf("order page: %q", got)
	}
	run(t, ctx, "orders list", chromedp.Navigate(s.srv.URL+"/orders"), visible("table"))
	if got := text(t, ctx, "table"); !strings.Contains(got, ref) || !strings.Contains(got, "3\u202f118,00 USD") {
		t.Fatalf("orders: %q", got)
	}
}
