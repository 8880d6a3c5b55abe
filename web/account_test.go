package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/workflows"
)

const testPassword = "correct horse battery staple"

var endSessionForm = regexp.MustCompile(`action="/compte/sessions/(\d+)/end"`)

// signedIn registers email (first browser) or logs it in (a new browser).
func (sh *siteHarness) signedIn(email string, register bool) *browser {
	sh.t.Helper()
	b := &browser{sh: sh}
	form := url.Values{"email": {email}, "password": {testPassword}, "next": {"/compte"}}
	path := "/login"
	if register {
		form.Set("first_name", "Ada")
		form.Set("last_name", "Lovelace")
		path = "/register"
	}
	if rec := b.do("POST", path, form); rec.Code != http.StatusSeeOther {
		sh.t.Fatalf("%s %s: %d %s", path, email, rec.Code, rec.Body.String())
	}
	if register {
		sh.confirm(email) // so that it also signs in from another browser
	}
	return b
}

// confirm confirms email's address as if the mailed link were opened.
func (sh *siteHarness) confirm(email string) {
	sh.t.Helper()
	if _, err := sh.db.Exec(`UPDATE accounts SET email_verified_at = now() WHERE lower(email) = lower($1)`, email); err != nil {
		sh.t.Fatal(err)
	}
}

// postFrom posts form with b's cookie and an Origin header.
func (b *browser) postFrom(origin, path string, form url.Values) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	req.AddCookie(b.cookie)
	rec := httptest.NewRecorder()
	b.sh.h.ServeHTTP(rec, req)
	return rec
}

func (sh *siteHarness) count(query string, args ...any) int {
	sh.t.Helper()
	var n int
	if err := sh.db.Get(&n, query, args...); err != nil {
		sh.t.Fatal(err)
	}
	return n
}

// The account page lists the sessions and ends another; refusals (no
// CSRF token, another site, another account's session, a wrong current
// password) change nothing and say why in French; a password change ends
// the other sessions and the old password stops working.
func TestAccountPage(t *testing.T) {
	sh := newSiteHarness(t)
	ada := sh.signedIn("ada@example.com", true)
	phone := sh.signedIn("ada@example.com", false)
	mallory := sh.signedIn("mallory@example.com", true)

	rec := ada.do("GET", "/compte", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("account page: %d %s", rec.Code, rec.Body.String())
	}
	checkPageHeaders(t, rec)
	page := rec.Body.String()
	for _, want := range []string{"Ada Lovelace", "ada@example.com", "cette session", "<code>192.0.2.1</code>",
		`for="current_password"`, `for="new_password"`, "Aucune tentative de connexion échouée"} {
		if !strings.Contains(page, want) {
			t.Errorf("account page lacks %q", want)
		}
	}
	forms := endSessionForm.FindAllStringSubmatch(page, -1)
	if len(forms) != 1 {
		t.Fatalf("%d sessions to end, want 1 (the other browser)", len(forms))
	}
	phoneSession, csrf := forms[0][1], ada.csrf(page)
	malloryPage := mallory.do("GET", "/compte", nil).Body.String()
	var malloryID string
	if err := sh.db.Get(&malloryID, `SELECT s.id::text FROM sessions s JOIN accounts a ON a.id = s.account_id
		WHERE a.email = 'mallory@example.com'`); err != nil {
		t.Fatal(err)
	}
	sessions := sh.count(`SELECT count(*) FROM sessions`)

	refusals := []struct {
		name   string
		rec    *httptest.ResponseRecorder
		status int
		says   string
	}{
		{"no CSRF token", ada.do("POST", "/compte/sessions/"+phoneSession+"/end", url.Values{}),
			http.StatusForbidden, "jeton anti-CSRF manquant ou périmé"},
		{"another site", ada.postFrom("https://evil.example", "/compte/sessions/"+phoneSession+"/end", url.Values{"csrf": {csrf}}),
			http.StatusForbidden, "autre site"},
		{"another account's session", ada.do("POST", "/compte/sessions/"+malloryID+"/end", url.Values{"csrf": {csrf}}),
			http.StatusNotFound, "n&#39;est pas une session ouverte de votre compte : rien n&#39;a été changé."},
		{"end others without CSRF", ada.do("POST", "/compte/sessions/end-others", url.Values{"csrf": {mallory.csrf(malloryPage)}}),
			http.StatusForbidden, "jeton anti-CSRF"},
		{"wrong current password", ada.do("POST", "/compte/password", url.Values{"csrf": {csrf},
			"current_password": {"pas le bon mot de passe"}, "new_password": {"un tout nouveau mot de passe"}}),
			http.StatusForbidden, `<p class="field-error" id="current_password-error">Le mot de passe actuel est incorrect : rien n&#39;a été changé.</p>`},
		{"password from another site", ada.postFrom("https://evil.example", "/compte/password", url.Values{"csrf": {csrf},
			"current_password": {testPassword}, "new_password": {"un tout nouveau mot de passe"}}),
			http.StatusForbidden, "autre site"},
	}
	for _, r := range refusals {
		if r.rec.Code != r.status || !strings.Contains(r.rec.Body.String(), r.says) {
			t.Errorf("%s: %d, want %d saying %q:\n%s", r.name, r.rec.Code, r.status, r.says, r.rec.Body.String())
		}
	}
	if n := sh.count(`SELECT count(*) FROM sessions`); n != sessions {
		t.Fatalf("refusals ended sessions: %d, were %d", n, sessions)
	}
	if rec := phone.do("GET", "/orders", nil); rec.Code != http.StatusOK {
		t.Fatalf("the other session after refusals: %d", rec.Code)
	}

	// The other browser's session ended: its next page asks for login.
	rec = ada.do("POST", "/compte/sessions/"+phoneSession+"/end", url.Values{"csrf": {csrf}})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/compte?info=session" {
		t.Fatalf("end session: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	if rec := phone.do("GET", "/orders", nil); rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/login") {
		t.Fatalf("ended session's next page: %d %s", rec.Code, rec.Header().Get("Location"))
	}

	// A password change ends the other sessions; the old password is refused.
	tablet := sh.signedIn("ada@example.com", false)
	rec = ada.do("POST", "/compte/password", url.Values{"csrf": {csrf},
		"current_password": {testPassword}, "new_password": {"un tout nouveau mot de passe"}})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/compte?info=password" {
		t.Fatalf("password change: %d %s", rec.Code, rec.Body.String())
	}
	if rec := tablet.do("GET", "/compte", nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("another session after the change: %d", rec.Code)
	}
	if rec := (&browser{sh: sh}).do("POST", "/login", url.Values{"email": {"ada@example.com"}, "password": {testPassword}}); rec.Code != http.StatusUnauthorized {
		t.Fatalf("old password: %d", rec.Code)
	}
	page = ada.do("GET", "/compte?info=password", nil).Body.String()
	for _, want := range []string{"l&#39;ancien mot de passe ne fonctionne plus", "1 tentative de connexion échouée",
		`data-network="192.0.2.1"`, `data-kind="password_changed"`, `data-kind="session_ended"`} {
		if !strings.Contains(page, want) {
			t.Errorf("after the change, the page lacks %q", want)
		}
	}
}

// cancelWorkflows records cancellations.
type cancelWorkflows struct {
	startNothing
	mu   sync.Mutex
	refs []string
}

func (w *cancelWorkflows) CancelOrder(_ context.Context, ref string, r workflows.CancelRequest) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.By != "customer" {
		return domain.Errorf(domain.ECodeInternal, "cancel by %q", r.By)
	}
	w.refs = append(w.refs, ref)
	return nil
}

func (w *cancelWorkflows) cancelled() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.refs...)
}

// An unpaid order's page links to a confirmation page whose form posts the
// API's cancel; without the CSRF token, or for another customer's order,
// nothing is cancelled.
func TestCancelUnpaidOrderFromItsPage(t *testing.T) {
	wf := &cancelWorkflows{}
	sh := newSiteHarness(t, wf)
	ada := sh.signedIn("ada@example.com", true)
	rec := ada.do("POST", "/orders", url.Values{"csrf": {ada.csrf(ada.do("GET", "/compte", nil).Body.String())},
		"gpu_model": {"b200"}, "lots": {"1"}, "duration_days": {"7"}, "preset": {"python"}})
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("order: %d %s", rec.Code, rec.Body.String())
	}
	orderPath, _, _ := strings.Cut(rec.Header().Get("Location"), "#")
	page := ada.do("GET", orderPath, nil).Body.String()
	if !strings.Contains(page, `href="`+orderPath+`/cancel"`) {
		t.Fatalf("no cancel link on the unpaid order's page")
	}
	// The model and amounts as customers read them (one formatter each).
	for _, want := range []string{"NVIDIA B200 · 1 lot", "1\u202f559,00 USD"} {
		if !strings.Contains(page, want) {
			t.Errorf("order page lacks %q", want)
		}
	}
	if strings.Contains(page, "1559.00") || strings.Contains(page, ">b200") {
		t.Errorf("order page spells the raw amount or model code")
	}

	rec = ada.do("GET", orderPath+"/cancel", nil)
	checkPageHeaders(t, rec)
	confirm := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(confirm, "Confirmer l'annulation") {
		t.Fatalf("confirmation page: %d %s", rec.Code, confirm)
	}
	mallory := sh.signedIn("mallory@example.com", true)
	malloryCSRF := mallory.csrf(mallory.do("GET", "/compte", nil).Body.String())
	for name, r := range map[string]*httptest.ResponseRecorder{
		"no CSRF":        ada.do("POST", orderPath+"/cancel", url.Values{}),
		"another site":   ada.postFrom("https://evil.example", orderPath+"/cancel", url.Values{"csrf": {ada.csrf(confirm)}}),
		"another's page": mallory.do("GET", orderPath+"/cancel", nil),
		"another's post": mallory.do("POST", orderPath+"/cancel", url.Values{"csrf": {malloryCSRF}}),
	} {
		if r.Code != http.StatusForbidden && r.Code != http.StatusNotFound {
			t.Errorf("%s: %d", name, r.Code)
		}
	}
	if got := wf.cancelled(); len(got) != 0 {
		t.Fatalf("cancelled by a refused request: %v", got)
	}
	rec = ada.do("POST", orderPath+"/cancel", url.Values{"csrf": {ada.csrf(confirm)}})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != orderPath+"?info=cancelled" {
		t.Fatalf("cancel: %d %s", rec.Code, rec.Body.String())
	}
	if got := wf.cancelled(); len(got) != 1 || "/orders/"+got[0] != orderPath {
		t.Fatalf("cancelled %v", got)
	}
}

// Where customers read about their balance they read about payouts: the
// balance page's section gives the configured minimum, daily limit and
// network fees with the rules (second factor, locked rate, cancel until
// sent, the chain's confirmation, a refusal back on the balance) and links
// to /compte/retraits, as the account page does; the payouts page repeats
// the terms. A server without payouts shows none of it.
func TestPayoutTermsWhereTheBalanceIs(t *testing.T) {
	limits := domain.PayoutLimits{MinCents: 2500, DailyCents: 50000, FeeCents: map[string]int64{domain.NetworkLitecoin: 25}}
	sh := newSiteHarnessWith(t, func(d *api.Deps, db *postgres.DB) {
		d.Payouts = &api.PayoutDeps{Store: db, Limits: limits}
	})
	ada := sh.signedIn("ada@example.com", true)
	terms := []string{`<span class="payout-min">25,00 USD</span>`, `<span class="payout-daily">500,00 USD</span>`,
		"réseau Litecoin 0,25 USD", "réseau Bitcoin 3,00 USD", "double authentification doit être activée",
		"cours garanti pendant 10 minutes", "annuler le retrait tant que l'envoi n'est pas signé",
		"terminé quand la blockchain le confirme", "Un retrait refusé par le support revient sur votre solde"}
	pages := map[string][]string{
		"/balance":         append([]string{`id="retraits"`, `<a href="/compte/retraits">Mes retraits</a>`}, terms...),
		"/compte":          {`<a href="/compte/retraits">Mes retraits</a>`, `<a href="/balance#retraits">Mon solde</a>`},
		"/compte/retraits": append([]string{"Bon à savoir"}, terms...),
	}
	for path, wants := range pages {
		rec := ada.do("GET", path, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
		}
		checkPageHeaders(t, rec)
		for _, want := range wants {
			if !strings.Contains(rec.Body.String(), want) {
				t.Errorf("%s lacks %q", path, want)
			}
		}
	}

	plain := newSiteHarness(t).signedIn("bob@example.com", true)
	for _, path := range []string{"/balance", "/compte"} {
		page := plain.do("GET", path, nil).Body.String()
		if strings.Contains(page, "/compte/retraits") || strings.Contains(page, "payout-min") {
			t.Errorf("%s offers payouts on a server without them", path)
		}
	}
}
