package browsertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp/totp"

	"github.com/kernodeck/kernodeck/apptest"
)

// logout signs out through the header's form.
func logout(t *testing.T, ctx context.Context) {
	t.Helper()
	run(t, ctx, "logout", click(`form[action="/logout"] button`), visible(`a[href^="/login"]`))
}

// loginPassword gives the email and password; with 2FA on, the code step
// follows (no session yet).
func (s *shop) loginPassword(t *testing.T, ctx context.Context, email string) {
	t.Helper()
	run(t, ctx, "login "+email,
		chromedp.Navigate(s.srv.URL+"/login?next=/compte"),
		typeIn("#email", email),
		typeIn("#password", "correct horse battery staple"),
		click(`form[action="/login"] button[type=submit]`),
		visible(`form[action="/login/2fa"]`),
	)
}

// giveCode types a code in the login's code step and sends it.
func giveCode(t *testing.T, ctx context.Context, code string) {
	t.Helper()
	run(t, ctx, "code step", typeIn(`form[action="/login/2fa"] #totp_code`, code))
	submitted(t, ctx, `form[action="/login/2fa"] button[type=submit]`)
}

// submitted clicks sel and waits for the next page to be loaded (a mark
// left on the current one is gone).
func submitted(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	eval[bool](t, ctx, `window.kdBefore = true`)
	run(t, ctx, "submit "+sel, click(sel))
	deadline := time.Now().Add(30 * time.Second)
	for {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		done, err := chromedp.Run(sctx, chromedp.Evaluate[bool](`!window.kdBefore && document.readyState === "complete"`))
		cancel()
		if err == nil && done {
			return
		}
		if time.Now().After(deadline) {
			failPage(t, ctx, "the page after "+sel, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The second factor in Chromium: turned on from /compte (QR code served
// from the site, the secret read from the page, a first code confirmed,
// the recovery codes shown), then a login needs the code after the
// password; a recovery code signs in once; too many wrong codes are
// refused with the rate limit's message.
func TestTOTPLoginRecoveryCodeAndRateLimit(t *testing.T) {
	s := newShop(t, shopOptions{})
	ctx := browser(t)
	const email = "totp-browser@example.com"
	s.register(t, ctx, "Inès", email)

	run(t, ctx, "account page", chromedp.Navigate(s.srv.URL+"/compte"), visible("#double-authentification"))
	if got := text(t, ctx, "#double-authentification .totp-state"); !strings.Contains(got, "désactivée") {
		t.Fatalf("2FA state before: %q", got)
	}
	run(t, ctx, "start the setup", click(`form.totp-setup button`), visible("#totp-secret"))
	// The QR code is an image from the site itself (img-src 'self').
	waitJS(t, ctx, "the QR code loaded", `(() => { const i = document.querySelector("img.totp-qr");
		return !!i && i.complete && i.naturalWidth > 0 && new URL(i.src).origin === location.origin; })()`)
	screenshots(t, ctx, "totp-setup")
	secret := text(t, ctx, "#totp-secret")
	code, err := totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	confirmed := time.Now().Unix() / 30
	run(t, ctx, "confirm the first code", typeIn("#totp_code", code), click(`form.totp-confirm button`),
		visible("ol.recovery-codes"))
	codes := eval[[]string](t, ctx, `[...document.querySelectorAll("code.recovery-code")].map(e => e.textContent)`)
	if len(codes) != 10 {
		t.Fatalf("%d recovery codes shown, want 10", len(codes))
	}
	screenshots(t, ctx, "totp-enabled")
	run(t, ctx, "account page, 2FA on", chromedp.Navigate(s.srv.URL+"/compte"), visible(`.totp-state[data-enabled="true"]`))
	logout(t, ctx)

	// Support's customer file says 2FA is on, and shows no secret.
	var accountID int64
	if err := s.env.DB.QueryRowContext(s.env.Ctx, `SELECT id FROM accounts WHERE email = $1`, email).Scan(&accountID); err != nil {
		t.Fatal(err)
	}
	agent := browser(t)
	run(t, agent, "console sign in", chromedp.Navigate(s.srv.URL+"/support"), typeIn("#token", apptest.AgentToken),
		click(`form[action="/support/login"] button[type=submit]`), visible(".lead"),
		chromedp.Navigate(fmt.Sprintf("%s/support/customers/%d", s.srv.URL, accountID)), visible("dd.two-factor"))
	if got := text(t, agent, "dd.two-factor"); got != "2FA activée" {
		t.Fatalf("console's customer file: %q", got)
	}
	if html := eval[string](t, agent, `document.documentElement.outerHTML`); strings.Contains(html, secret) {
		t.Fatal("the console shows the secret")
	}

	// The password alone opens no session: the code step follows.
	s.loginPassword(t, ctx, email)
	screenshots(t, ctx, "login-totp")
	s.asksLoginElsewhere(t, email)
	for time.Now().Unix()/30 == confirmed { // the confirmed code's step is used
		time.Sleep(time.Second)
	}
	code, err = totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	giveCode(t, ctx, code)
	run(t, ctx, "signed in with the code", visible("#sessions"))
	logout(t, ctx)

	// A recovery code signs in once.
	s.loginPassword(t, ctx, email)
	giveCode(t, ctx, codes[0])
	run(t, ctx, "signed in with a recovery code", visible("#sessions"))
	logout(t, ctx)
	s.loginPassword(t, ctx, email)
	giveCode(t, ctx, codes[0])
	waitText(t, ctx, "#totp_code-error", "déjà utilisé")

	// Wrong codes, until the rate limit refuses.
	for i := 0; ; i++ {
		if i == 8 {
			t.Fatal("no rate limit after 8 wrong codes")
		}
		giveCode(t, ctx, "000000")
		if strings.Contains(eval[string](t, ctx, `document.body.innerText`), "Trop de codes de double authentification incorrects") {
			break
		}
	}
	waitText(t, ctx, "main", "Réessayez dans")
	screenshots(t, ctx, "totp-rate-limit")
	// Locked: even an unused recovery code waits.
	giveCode(t, ctx, codes[1])
	waitText(t, ctx, "main", "Trop de codes de double authentification incorrects")
	if got := eval[string](t, ctx, `location.pathname`); got != "/login/2fa" {
		t.Fatalf("on %s while locked", got)
	}
}

// asksLoginElsewhere: in another browser the password step leaves no
// session either (the account page asks to sign in).
func (s *shop) asksLoginElsewhere(t *testing.T, email string) {
	t.Helper()
	other := browser(t)
	s.loginPassword(t, other, email)
	s.asksLogin(t, other, "after the password step only")
}
