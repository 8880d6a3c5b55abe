package browsertest

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// login signs in through the site's form.
func (s *shop) login(t *testing.T, ctx context.Context, email, password string) {
	t.Helper()
	run(t, ctx, "login "+email,
		chromedp.Navigate(s.srv.URL+"/login?next=/compte"),
		typeIn("#email", email),
		typeIn("#password", password),
		click(`form[action="/login"] button[type=submit]`),
		visible("#sessions"),
	)
}

// twoBrowsers registers email in one browser and signs in to it in
// another (two sessions of one account).
func (s *shop) twoBrowsers(t *testing.T, first, email string) (context.Context, context.Context) {
	t.Helper()
	one := browser(t)
	s.register(t, one, first, email)
	two := browser(t)
	s.login(t, two, email, "correct horse battery staple")
	return one, two
}

// sessionsShown counts the sessions the account page lists.
func sessionsShown(t *testing.T, ctx context.Context) int {
	t.Helper()
	return eval[int](t, ctx, `document.querySelectorAll("#sessions li.session").length`)
}

// asksLogin: the browser's next private page is the login form.
func (s *shop) asksLogin(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	run(t, ctx, what, chromedp.Navigate(s.srv.URL+"/orders"), visible(`form[action="/login"]`))
	if got := eval[string](t, ctx, `location.pathname`); got != "/login" {
		t.Fatalf("%s: on %s, not the login page", what, got)
	}
}

// Two browsers signed in to one account: the first sees both sessions on
// its account page and ends the other, whose next page asks for login.
func TestAccountPageEndsAnotherSession(t *testing.T) {
	s := newShop(t, shopOptions{})
	laptop, phone := s.twoBrowsers(t, "Léa", "lea@example.com")

	run(t, laptop, "account page", chromedp.Navigate(s.srv.URL+"/compte"), visible("#sessions"))
	if n := sessionsShown(t, laptop); n != 2 {
		t.Fatalf("%d sessions listed, want 2", n)
	}
	if got := text(t, laptop, "#sessions li[data-current] .current-session"); got != "cette session" {
		t.Fatalf("current session marked %q", got)
	}
	if got := text(t, laptop, ".account-email"); !strings.HasPrefix(got, "lea@example.com") {
		t.Fatalf("email shown %q", got)
	}
	screenshots(t, laptop, "account")

	run(t, laptop, "end the phone's session", click("#sessions form.end-session button"), visible("main .alert.notice"))
	waitText(t, laptop, "main .alert.notice", "La session est terminée")
	if n := sessionsShown(t, laptop); n != 1 {
		t.Fatalf("%d sessions listed after ending one, want 1", n)
	}
	if got := text(t, laptop, "#activite"); !strings.Contains(got, "Une autre session terminée") {
		t.Fatalf("activity: %q", got)
	}
	s.asksLogin(t, phone, "the ended session's next page")
	run(t, laptop, "the laptop goes on", chromedp.Navigate(s.srv.URL+"/orders"), visible(`form[action="/logout"]`))
}

// Changing the password from the account page ends the other browser's
// session, and the old password no longer signs in; the new one does.
func TestPasswordChangeEndsOtherSessions(t *testing.T) {
	s := newShop(t, shopOptions{})
	laptop, phone := s.twoBrowsers(t, "Marc", "marc@example.com")

	run(t, laptop, "wrong current password",
		chromedp.Navigate(s.srv.URL+"/compte"),
		typeIn("#current_password", "pas le bon mot de passe du tout"),
		typeIn("#new_password", "un tout nouveau mot de passe"),
		click(`form[action="/compte/password"] button[type=submit]`),
		visible("#current_password-error"),
	)
	if got := text(t, laptop, "#current_password-error"); got != "Le mot de passe actuel est incorrect : rien n'a été changé." {
		t.Fatalf("refusal: %q", got)
	}
	if got := eval[string](t, laptop, `document.querySelector("#current_password").getAttribute("aria-invalid")`); got != "true" {
		t.Fatalf("aria-invalid %q", got)
	}
	checkPage(t, laptop, "account-password-refused")
	run(t, phone, "the phone is still signed in", chromedp.Navigate(s.srv.URL+"/orders"), visible(`form[action="/logout"]`))

	run(t, laptop, "change the password",
		typeIn("#current_password", "correct horse battery staple"),
		typeIn("#new_password", "un tout nouveau mot de passe"),
		click(`form[action="/compte/password"] button[type=submit]`),
		visible("main .alert.notice"),
	)
	waitText(t, laptop, "main .alert.notice", "Votre mot de passe est changé")
	if n := sessionsShown(t, laptop); n != 1 {
		t.Fatalf("%d sessions after the change, want 1", n)
	}
	s.asksLogin(t, phone, "the other session after the change")

	run(t, phone, "old password",
		chromedp.Navigate(s.srv.URL+"/login"),
		typeIn("#email", "marc@example.com"),
		typeIn("#password", "correct horse battery staple"),
		click(`form[action="/login"] button[type=submit]`),
		visible(".alert.error, .field-error"),
	)
	if got := eval[string](t, phone, `document.querySelector("main").innerText`); !strings.Contains(got, "Email ou mot de passe incorrect") {
		t.Fatalf("old password: %q", got)
	}
	s.login(t, phone, "marc@example.com", "un tout nouveau mot de passe")
	if got := text(t, phone, "#activite .failed-logins"); !strings.Contains(got, "1 tentative de connexion échouée") {
		t.Fatalf("failed logins: %q", got)
	}
}

// An unpaid order is cancelled from its page through a confirmation page
// (no script needed); the order's page then says it is cancelled.
func TestCancelUnpaidOrderFromItsPage(t *testing.T) {
	s := newShop(t, shopOptions{})
	ctx := browser(t)
	s.register(t, ctx, "Noé", "noe@example.com")
	ref := s.orderThroughSite(t, ctx, "b200", 1, 7)
	if got := text(t, ctx, ".gpu-model"); !strings.HasPrefix(got, "NVIDIA B200") {
		t.Fatalf("order page names the model %q", got)
	}
	if got := text(t, ctx, ".timeline"); !strings.Contains(got, "1\u202f559,00 USD") || strings.Contains(got, "1559.00") {
		t.Fatalf("timeline amount: %q", got)
	}
	run(t, ctx, "cancel link", click("a.cancel-order"), visible(`form.cancel-order`))
	if got := text(t, ctx, "h1"); got != "Annuler la commande "+ref+" ?" {
		t.Fatalf("confirmation page: %q", got)
	}
	screenshots(t, ctx, "order-cancel")
	run(t, ctx, "keep it", click(`form.cancel-order a.button`), visible("#paiement"))
	run(t, ctx, "cancel again", click("a.cancel-order"), visible(`form.cancel-order`),
		click(`form.cancel-order button[type=submit]`), visible("main > .alert.notice"))
	waitText(t, ctx, "main > .alert.notice", "Votre commande est annulée")
	waitJS(t, ctx, "the order cancelled", `document.querySelector("[data-status]").dataset.status === "cancelled"`)
	if eval[bool](t, ctx, `!!document.querySelector("a.cancel-order") || !!document.querySelector("#paiement form.methods")`) {
		t.Fatal("a cancelled order still offers to cancel or to pay")
	}
	var status string
	if err := s.env.DB.Get(&status, `SELECT status FROM orders WHERE ref = $1`, ref); err != nil {
		t.Fatal(err)
	}
	if status != "cancelled" {
		t.Fatalf("order %s is %s", ref, status)
	}
}

// The configurator prices each model for the chosen duration (the lot, and
// per GPU and per day) and follows a change of duration without a reload;
// a model with nothing free now says so beside it.
func TestConfiguratorPricesEachModel(t *testing.T) {
	s := newShop(t, shopOptions{})
	s.execSQL(t, `UPDATE gpu_inventory SET total_gpus = 0 WHERE gpu_model = 'l40s'`)
	ctx := browser(t)
	run(t, ctx, "configurator", chromedp.Navigate(s.srv.URL+"/"), visible("#resume"))
	if got := text(t, ctx, "#prix-rtx-a5000"); got != "55,00 USD le lot pour 7 jours · 7,86 USD par GPU et par jour" {
		t.Fatalf("rtx-a5000 for 7 days: %q", got)
	}
	if got := text(t, ctx, "#prix-b200 .gpu-day-price"); got != "111,36 USD par GPU et par jour" {
		t.Fatalf("b200 per GPU and day (2 GPUs a lot): %q", got)
	}
	if got := text(t, ctx, "#prix-l40s .none-free"); got != "aucune machine libre en ce moment" {
		t.Fatalf("l40s with nothing free: %q", got)
	}
	if eval[bool](t, ctx, `!!document.querySelector("#prix-rtx-a5000 .none-free")`) {
		t.Fatal("a model with GPUs free says none is")
	}
	markUnreloaded(t, ctx)
	run(t, ctx, "3 days", click("#d-3"))
	waitText(t, ctx, "#prix-rtx-a5000", "23,57 USD le lot pour 3 jours")
	waitText(t, ctx, "#resume .total", "23,57 USD")
	checkUnreloaded(t, ctx)
	if got := eval[string](t, ctx, `document.activeElement.id`); got != "d-3" {
		t.Fatalf("focus moved to %q after the prices changed", got)
	}
}
