package browsertest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// A 14-character password is refused with the API's French message, next
// to the field, and no account is created.
func TestShortPasswordRefusedInFrench(t *testing.T) {
	s := newShop(t, shopOptions{})
	ctx := browser(t)
	run(t, ctx, "register with 14 characters",
		chromedp.Navigate(s.srv.URL+"/register"),
		typeIn("#first_name", "Bob"),
		typeIn("#last_name", "Court"),
		typeIn("#email", "bob@example.com"),
		typeIn("#password", "quatorze-carac"), // 14 characters
		click(`form[action="/register"] button[type=submit]`),
		visible("#password-error"),
	)
	if got := text(t, ctx, "#password-error"); got != "Le mot de passe doit comporter de 15 à 128 caractères." {
		t.Fatalf("error next to the field: %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector("#password").getAttribute("aria-invalid")`); got != "true" {
		t.Fatalf("password field aria-invalid=%q", got)
	}
	// The rule was said before submitting, and the other fields are kept.
	if got := text(t, ctx, "#password-rule"); !strings.Contains(got, "De 15 à 128 caractères") {
		t.Fatalf("rule before submit: %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector("#email").value`); got != "bob@example.com" {
		t.Fatalf("email field lost: %q", got)
	}
	var n int
	if err := s.env.DB.GetContext(s.env.Ctx, &n, `SELECT count(*) FROM accounts WHERE email = 'bob@example.com'`); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d account(s) created", n)
	}
	// No session either: a private page still asks to log in.
	run(t, ctx, "orders need login", chromedp.Navigate(s.srv.URL+"/orders"), visible(`form[action="/login"]`))
}

// Another customer opening an order's URL gets the not-found page and
// nothing of the order; its owner, through the email link signed out,
// reaches it after logging in.
func TestAnotherCustomersOrderIsNotFound(t *testing.T) {
	s := newShop(t, shopOptions{})
	alice := browser(t)
	s.register(t, alice, "Alice", "alice@example.com")
	ref := s.orderThroughSite(t, alice, "rtx-a5000", 3, 7)

	mallory := browser(t)
	s.register(t, mallory, "Mallory", "mallory@example.com")
	resp, err := chromedp.Run(mallory, chromedp.NavigateResponse(s.srv.URL+"/orders/"+ref))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusNotFound {
		t.Fatalf("status %d", resp.Status)
	}
	html := eval[string](t, mallory, `document.documentElement.outerHTML`)
	if !strings.Contains(html, "Page introuvable") {
		t.Fatalf("not the not-found page: %s", html)
	}
	for _, leak := range []string{"rtx-a5000", "165,00", "Paiement", "alice", "Alice", "sse-connect"} {
		if strings.Contains(html, leak) {
			t.Fatalf("the not-found page shows %q", leak)
		}
	}
	// Its live parts and actions are refused too.
	for _, path := range []string{"/orders/" + ref + "/live", "/orders/" + ref + "/support"} {
		resp, err := chromedp.Run(mallory, chromedp.NavigateResponse(s.srv.URL+path))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != http.StatusNotFound {
			t.Fatalf("%s: status %d", path, resp.Status)
		}
	}

	// The customer email's link, opened signed out, goes through login.
	owner := browser(t)
	run(t, owner, "email link",
		chromedp.Navigate(s.srv.URL+"/orders/"+ref),
		visible(`form[action="/login"]`),
		typeIn("#email", "alice@example.com"),
		typeIn("#password", "correct horse battery staple"),
		click(`form[action="/login"] button[type=submit]`),
		visible("#paiement"),
	)
	if got := text(t, owner, "h1"); got != "Commande "+ref {
		t.Fatalf("after login: %q", got)
	}
}

// After logout, the back button shows no private data.
func TestBackAfterLogoutShowsNothingPrivate(t *testing.T) {
	s := newShop(t, shopOptions{})
	ctx := browser(t)
	s.register(t, ctx, "Carol", "carol@example.com")
	ref := s.orderThroughSite(t, ctx, "l40s", 1, 3)
	run(t, ctx, "balance then logout",
		chromedp.Navigate(s.srv.URL+"/balance"),
		visible(".available"),
		chromedp.Navigate(s.srv.URL+"/orders/"+ref),
		visible("#paiement"),
		click(`form[action="/logout"] button`),
		visible(`a[href^="/login"]`),
	)
	for i := 0; i < 2; i++ {
		run(t, ctx, "back", chromedp.NavigateBack(), visible("main"))
		body := eval[string](t, ctx, `document.body.innerText`)
		for _, private := range []string{ref, "Carol", "62,90", "Solde disponible", "Se déconnecter"} {
			if strings.Contains(body, private) {
				t.Fatalf("back #%d shows %q:\n%s", i+1, private, body)
			}
		}
		if !strings.Contains(body, "Se connecter") {
			t.Fatalf("back #%d: not the login page:\n%s", i+1, body)
		}
	}
}
