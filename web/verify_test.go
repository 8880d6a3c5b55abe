package web

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/mailverify"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/secrets"
	"github.com/kernodeck/kernodeck/workflows"
)

func TestSafeNextRefusesControlCharactersAndHosts(t *testing.T) {
	for _, bad := range []string{
		"/\t/evil.example", "/\n/evil.example", "/\r/evil.example", "/ok\x00", "/ok\x7f", "/ok\u0085",
		"/%2F%2Fevil.example", "//evil.example", "/\\evil.example", "http://evil.example/x",
		"http:/evil.example", "evil.example/orders", "/" + strings.Repeat("a", 3000),
	} {
		if got := safeNext(bad); got != "/orders" {
			t.Errorf("safeNext(%q) = %q, want /orders", bad, got)
		}
	}
	for _, ok := range []string{"/", "/orders/KD-ABC", "/order?gpu_model=b200&lots=2", "/topups/TU-1#x"} {
		if got := safeNext(ok); got != ok {
			t.Errorf("safeNext(%q) = %q, want it kept", ok, got)
		}
	}
}

// siteHarness is the site on the API over a fresh database (workflows
// faked: starting one does nothing).
type siteHarness struct {
	t    testing.TB
	db   *postgres.DB
	h    http.Handler
	site *Site
	ring *secrets.Keyring
	mu   sync.Mutex
	now  time.Time
}

type startNothing struct{ api.Workflows }

func (startNothing) StartRental(context.Context, workflows.RentalInput) error { return nil }
func (startNothing) StartTopUp(context.Context, workflows.TopUpInput) error   { return nil }

// newSiteHarness starts the site; wf, if given, replaces startNothing.
func newSiteHarness(t testing.TB, wf ...api.Workflows) *siteHarness {
	t.Helper()
	return newSiteHarnessWith(t, nil, wf...)
}

// newSiteHarnessWith is newSiteHarness with more of the API's dependencies
// (more, if not nil, completes them on the harness's database).
func newSiteHarnessWith(t testing.TB, more func(*api.Deps, *postgres.DB), wf ...api.Workflows) *siteHarness {
	t.Helper()
	ring, err := secrets.Parse(secrets.Generate("web"))
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.TestMode)
	sh := &siteHarness{t: t, db: pgtest.NewDB(t), ring: ring, now: time.Now()}
	site, err := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	deps := api.Deps{Stores: app.APIStores(postgres.NewStore(sh.db, nil, "")), Workflows: append(wf, startNothing{})[0], Site: site, Keyring: ring, Now: sh.clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if more != nil {
		more(&deps, sh.db)
	}
	srv := api.New(api.Config{CookieSecure: true, Argon2: api.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}}, deps)
	sh.h, sh.site = srv.Handler(), site
	return sh
}

func (sh *siteHarness) clock() time.Time {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.now
}

func (sh *siteHarness) advance(d time.Duration) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.now = sh.now.Add(d)
}

// browser keeps the session cookie between requests.
type browser struct {
	sh     *siteHarness
	cookie *http.Cookie
}

func (b *browser) do(method, path string, form url.Values) *httptest.ResponseRecorder {
	b.sh.t.Helper()
	var req *http.Request
	if form != nil {
		req = httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, path, nil)
	}
	if b.cookie != nil {
		req.AddCookie(b.cookie)
	}
	rec := httptest.NewRecorder()
	b.sh.h.ServeHTTP(rec, req)
	for _, c := range rec.Result().Cookies() {
		if c.Name == api.SessionCookie {
			b.cookie = c
		}
	}
	return rec
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) csrf(page string) string {
	b.sh.t.Helper()
	m := csrfInput.FindStringSubmatch(page)
	if m == nil {
		b.sh.t.Fatalf("no CSRF token in the page")
	}
	return m[1]
}

func (sh *siteHarness) verified(email string) bool {
	sh.t.Helper()
	var v bool
	if err := sh.db.Get(&v, `SELECT email_verified_at IS NOT NULL FROM accounts WHERE email = $1`, email); err != nil {
		sh.t.Fatal(err)
	}
	return v
}

func checkPageHeaders(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	csp := rec.Header().Get("Content-Security-Policy")
	if csp == "" || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	if strings.Contains(rec.Body.String(), "<script>") || strings.Contains(rec.Body.String(), " onclick=") {
		t.Error("inline script in the page")
	}
}

// The site says why an unconfirmed account gets no mail and one unpaid
// order, on every page, with a button that sends the link again (limited:
// the API's French refusal shown); the link's page asks for a click and
// confirms nothing by itself; the click confirms; a forged link is refused
// in French.
func TestConfirmationThroughTheSite(t *testing.T) {
	sh := newSiteHarness(t)
	b := &browser{sh: sh}
	rec := b.do("POST", "/register", url.Values{"first_name": {"Ada"}, "last_name": {"Lovelace"},
		"email": {"ada@example.com"}, "password": {"correct horse battery staple"}, "next": {"/orders"}})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/orders" {
		t.Fatalf("register: %d %s %s", rec.Code, rec.Header().Get("Location"), rec.Body.String())
	}
	if b.cookie == nil {
		t.Fatal("no __Host-kd_session cookie")
	}

	rec = b.do("GET", "/orders", nil)
	page := rec.Body.String()
	checkPageHeaders(t, rec)
	for _, want := range []string{"Confirmez votre adresse email", "ada@example.com", `action="/verify-email/resend"`,
		"une commande en attente de règlement"} {
		if !strings.Contains(page, want) {
			t.Errorf("orders page lacks %q", want)
		}
	}

	// A second unpaid order: the API's refusal, in French, on the site.
	order := url.Values{"gpu_model": {"rtx-a5000"}, "lots": {"1"}, "duration_days": {"3"}, "preset": {"python"}, "csrf": {b.csrf(page)}}
	if rec = b.do("POST", "/orders", order); rec.Code != http.StatusSeeOther {
		t.Fatalf("first order: %d %s", rec.Code, rec.Body.String())
	}
	rec = b.do("POST", "/orders", order)
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "Confirmez d&#39;abord votre adresse email") {
		t.Fatalf("second order: %d %s", rec.Code, rec.Body.String())
	}

	// Resend: too soon after the registration's mail, then allowed.
	rec = b.do("POST", "/verify-email/resend", url.Values{"csrf": {b.csrf(page)}})
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "Réessayez dans") {
		t.Fatalf("resend too soon: %d %s", rec.Code, rec.Body.String())
	}
	sh.advance(5 * time.Minute)
	rec = b.do("POST", "/verify-email/resend", url.Values{"csrf": {b.csrf(page)}})
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "Un nouveau lien de confirmation vient d'être envoyé à ada@example.com") {
		t.Fatalf("resend: %d %s", rec.Code, rec.Body.String())
	}
	checkPageHeaders(t, rec)

	var id int64
	if err := sh.db.Get(&id, `SELECT id FROM accounts WHERE email = 'ada@example.com'`); err != nil {
		t.Fatal(err)
	}
	token, _ := (&mailverify.Signer{Keyring: sh.ring}).Token(id, "ada@example.com")

	// The link, opened signed out (another device): a form, nothing confirmed.
	other := &browser{sh: sh}
	rec = other.do("GET", "/verify-email?token="+url.QueryEscape(token), nil)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `<input type="hidden" name="token" value="`+token+`">`) ||
		!strings.Contains(rec.Body.String(), "Confirmer mon adresse") {
		t.Fatalf("link page: %d %s", rec.Code, rec.Body.String())
	}
	checkPageHeaders(t, rec)
	if sh.verified("ada@example.com") {
		t.Fatal("opening the link confirmed the address without the click")
	}

	forged := []byte(token)
	forged[len(forged)-3] ^= 2
	rec = other.do("POST", "/verify-email", url.Values{"token": {string(forged)}})
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "n&#39;est pas valide") {
		t.Fatalf("forged: %d %s", rec.Code, rec.Body.String())
	}
	if sh.verified("ada@example.com") {
		t.Fatal("a forged link confirmed the address")
	}

	rec = other.do("POST", "/verify-email", url.Values{"token": {token}})
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "votre adresse email est confirmée") {
		t.Fatalf("confirm: %d %s", rec.Code, rec.Body.String())
	}
	if !sh.verified("ada@example.com") {
		t.Fatal("not confirmed")
	}
	rec = b.do("GET", "/orders", nil)
	if strings.Contains(rec.Body.String(), "Confirmez votre adresse email") {
		t.Error("the banner stays after confirmation")
	}
	if rec = b.do("POST", "/orders", order); rec.Code != http.StatusSeeOther {
		t.Fatalf("order after confirmation: %d %s", rec.Code, rec.Body.String())
	}
}

// After login, the site goes only to a path of its own: "/\t/evil.example"
// (a browser would drop the tab and leave "//evil.example") goes to
// /orders.
func TestLoginNextThroughTheSite(t *testing.T) {
	sh := newSiteHarness(t)
	b := &browser{sh: sh}
	b.do("POST", "/register", url.Values{"first_name": {"Ada"}, "last_name": {"L"},
		"email": {"next@example.com"}, "password": {"correct horse battery staple"}})
	sh.confirm("next@example.com")
	for next, want := range map[string]string{
		"/\t/evil.example": "/orders", "//evil.example": "/orders", "/balance": "/balance",
	} {
		rec := (&browser{sh: sh}).do("POST", "/login", url.Values{"email": {"next@example.com"},
			"password": {"correct horse battery staple"}, "next": {next}})
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != want {
			t.Errorf("next %q: %d to %q, want %q", next, rec.Code, rec.Header().Get("Location"), want)
		}
	}
	// A login link carrying it is refused before the site (a control
	// character in the URL, even encoded), and one with another host gets
	// a form that goes to /orders.
	rec := (&browser{sh: sh}).do("GET", "/login?next="+url.QueryEscape("/\t/evil.example"), nil)
	if rec.Code != http.StatusBadRequest || strings.Contains(rec.Body.String(), "evil.example") {
		t.Errorf("login page with a tab in next: %d %s", rec.Code, rec.Body.String())
	}
	rec = (&browser{sh: sh}).do("GET", "/login?next="+url.QueryEscape("https://evil.example/"), nil)
	if !strings.Contains(rec.Body.String(), `name="next" value="/orders"`) {
		t.Errorf("the login form keeps a bad next: %s", rec.Body.String())
	}
}
