package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/mailverify"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/secrets"
)

// clock is a movable time for Deps.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// outbox lists the templates queued for an account, oldest first.
func (h *harness) outbox(accountID int64) []string {
	h.t.Helper()
	var out []string
	require.NoError(h.t, h.db.Select(&out, `SELECT template FROM mail_outbox WHERE account_id = $1 ORDER BY id`, accountID))
	return out
}

func (h *harness) me(a auth) map[string]any {
	h.t.Helper()
	r := h.do("GET", "/v1/me", nil, a)
	require.Equal(h.t, http.StatusOK, r.Code, r.Body.String())
	return r.obj("account")
}

// Until its address is confirmed, a new account has the confirmation mail
// queued and nothing else, and one unpaid order at most (409
// email_unverified, in French, nothing written); the link confirms it, and
// then orders and their mails flow. /v1/me says where it stands.
func TestUnverifiedAccountOneMailOneUnpaidOrder(t *testing.T) {
	h := newHarness(t)
	c := h.registerUnverified("new@example.com")
	require.Equal(t, []string{postgres.MailEmailVerification}, h.outbox(c.id))
	require.Equal(t, false, h.me(c.auth)["email_verified"])

	first := h.order(c)
	r := h.do("POST", "/v1/orders", map[string]any{
		"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"}, c.auth)
	require.Equal(t, http.StatusConflict, r.Code, r.Body.String())
	require.Equal(t, domain.ECodeEmailUnverified, r.errCode())
	msg := r.body["error"].(map[string]any)["message"].(string)
	require.Contains(t, msg, "Confirmez d'abord votre adresse email")
	require.Equal(t, 1, h.count("orders"), "the refused order is not written")
	require.Len(t, h.wf.callsOf("StartRental"), 1)
	r = h.do("POST", "/v1/topups", map[string]any{"amount_cents": 10000}, c.auth)
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	require.Equal(t, []string{postgres.MailEmailVerification}, h.outbox(c.id), "no order or top-up mail")

	signer := &mailverify.Signer{Keyring: h.ring}
	tok, _ := signer.Token(c.id, "new@example.com")
	r = h.do("POST", "/v1/auth/verify-email", map[string]any{"token": tok}, auth{})
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Equal(t, false, r.body["already_verified"])
	require.Equal(t, true, h.me(c.auth)["email_verified"])
	r = h.do("POST", "/v1/auth/verify-email", map[string]any{"token": tok}, auth{})
	require.Equal(t, http.StatusOK, r.Code)
	require.Equal(t, true, r.body["already_verified"])

	second := h.order(c)
	h.order(c)
	require.NotEqual(t, first, second)
	require.Equal(t, []string{postgres.MailEmailVerification, postgres.MailOrderCreated, postgres.MailOrderCreated},
		h.outbox(c.id))
}

// A forged, altered, foreign or expired link confirms nothing.
func TestVerificationLinkForgedOrExpiredRefused(t *testing.T) {
	clk := &clock{t: time.Now()}
	h := newHarness(t, func(_ *api.Config, d *api.Deps) { d.Now = clk.now })
	c := h.registerUnverified("link@example.com")
	other := h.registerUnverified("other@example.com")
	signer := &mailverify.Signer{Keyring: h.ring, Now: clk.now, TTL: time.Hour}
	good, _ := signer.Token(c.id, "link@example.com")

	stranger, err := secrets.Parse(secrets.Generate("test")) // same key id, another key
	require.NoError(t, err)
	forged, _ := (&mailverify.Signer{Keyring: stranger}).Token(c.id, "link@example.com")
	wrongAddress, _ := signer.Token(c.id, "other@example.com")
	wrongAccount, _ := signer.Token(other.id, "link@example.com")
	altered := []byte(good)
	altered[len(altered)/2] ^= 1
	for name, tok := range map[string]string{
		"forged with another key": forged, "altered": string(altered), "another address": wrongAddress,
		"another account": wrongAccount, "not a token": "hello", "empty": "",
	} {
		r := h.do("POST", "/v1/auth/verify-email", map[string]any{"token": tok}, auth{})
		require.Equal(t, http.StatusBadRequest, r.Code, name)
		require.Equal(t, domain.ECodeVerificationInvalid, r.errCode(), name)
	}

	clk.add(time.Hour)
	r := h.do("POST", "/v1/auth/verify-email", map[string]any{"token": good}, auth{})
	require.Equal(t, http.StatusBadRequest, r.Code)
	require.Equal(t, domain.ECodeVerificationExpired, r.errCode())
	require.Contains(t, r.body["error"].(map[string]any)["message"], "a expiré")

	var verified int
	require.NoError(t, h.db.Get(&verified, `SELECT count(*) FROM accounts WHERE email_verified_at IS NOT NULL`))
	require.Zero(t, verified)
}

// The link can be mailed again once per 5 minutes and 5 times a day
// (the registration's mail counts), on the API's clock; not once confirmed.
func TestResendVerificationLimited(t *testing.T) {
	clk := &clock{t: time.Now()}
	h := newHarness(t, func(_ *api.Config, d *api.Deps) { d.Now = clk.now })
	c := h.registerUnverified("again@example.com")

	r := h.do("POST", "/v1/auth/verify-email/resend", nil, c.web)
	require.Equal(t, http.StatusTooManyRequests, r.Code, r.Body.String())
	require.Equal(t, domain.ECodeTooMany, r.errCode())
	retry := r.Header().Get("Retry-After")
	require.NotEmpty(t, retry)
	require.LessOrEqual(t, len(retry), 3) // at most 300 seconds
	require.Len(t, h.outbox(c.id), 1)
	r = h.do("POST", "/v1/auth/verify-email/resend", nil, auth{cookie: c.web.cookie})
	require.Equal(t, http.StatusForbidden, r.Code, "a cookie post needs the CSRF token")

	for i := 2; i <= 5; i++ {
		clk.add(5 * time.Minute)
		r = h.do("POST", "/v1/auth/verify-email/resend", nil, c.auth)
		require.Equal(t, http.StatusAccepted, r.Code, r.Body.String())
		require.Equal(t, "again@example.com", r.body["email"])
		require.Len(t, h.outbox(c.id), i)
	}
	clk.add(time.Hour)
	r = h.do("POST", "/v1/auth/verify-email/resend", nil, c.auth)
	require.Equal(t, http.StatusTooManyRequests, r.Code, "five a day")
	require.Len(t, h.outbox(c.id), 5)

	_, err := h.db.Exec(`UPDATE accounts SET email_verified_at = now() WHERE id = $1`, c.id)
	require.NoError(t, err)
	r = h.do("POST", "/v1/auth/verify-email/resend", nil, c.auth)
	require.Equal(t, http.StatusConflict, r.Code)
	require.Equal(t, domain.ECodeEmailAlreadyVerified, r.errCode())
}

// Failures on one account never lock its owner out, and only those from
// the login's own network slow it down: failures from 120 other networks
// cost the owner nothing; past 10 from one network, each login for that
// email from there waits a delay that grows with them (up to a maximum),
// then is checked.
func TestAccountFailuresSlowDownOnlyTheirNetwork(t *testing.T) {
	// Limits raised so that one network reaches the delay before its lock.
	h := newHarness(t, func(cfg *api.Config, _ *api.Deps) { cfg.MaxFailuresPerEmail, cfg.MaxFailuresPerIP = 1000, 1000 })
	h.register("owner@example.com")
	login := func(ip, password string) int {
		return h.do("POST", "/v1/auth/login", map[string]any{"email": "owner@example.com", "password": password},
			auth{ip: ip}).Code
	}
	for i := range 120 {
		require.Equal(t, http.StatusUnauthorized, login(fmt.Sprintf("203.0.113.%d", i+1), "not the password"), "failure %d", i)
	}
	require.Empty(t, h.sleeps.all(), "one failure per network: no delay")
	require.Equal(t, http.StatusOK, login("198.51.100.7", testPassword))
	require.Empty(t, h.sleeps.all(), "the owner, from a network of their own, is not slowed")

	for range 20 {
		require.Equal(t, http.StatusUnauthorized, login("192.0.2.50", "not the password"))
	}
	delays := h.sleeps.all()
	require.Len(t, delays, 10, "from the 11th failure of that network")
	require.Equal(t, 500*time.Millisecond, delays[0], "the 11th attempt waits the base delay")
	require.Equal(t, time.Second, delays[1])
	for i := 1; i < len(delays); i++ {
		require.GreaterOrEqual(t, delays[i], delays[i-1], "never shrinks while failures grow")
	}
	require.Equal(t, 10*time.Second, delays[len(delays)-1], "capped")
	// From that network, the owner gets in too: after the delay.
	require.Equal(t, http.StatusOK, login("192.0.2.50", testPassword))
	require.Equal(t, 10*time.Second, h.sleeps.all()[10])
	// From elsewhere, at once.
	require.Equal(t, http.StatusOK, login("198.51.100.9", testPassword))
	require.Len(t, h.sleeps.all(), 11)
}

// Each network's own limits lock: 5 failures for the email from one
// network lock that pair, 20 over any emails lock the network.
func TestLoginNetworkLimitsLock(t *testing.T) {
	h := newHarness(t)
	h.register("owner@example.com")
	fail := func(ip string) int {
		return h.do("POST", "/v1/auth/login", map[string]any{"email": "owner@example.com", "password": "not the password"},
			auth{ip: ip}).Code
	}
	for range 5 {
		require.Equal(t, http.StatusUnauthorized, fail("192.0.2.98"))
	}
	require.Equal(t, http.StatusTooManyRequests, fail("192.0.2.98"))
	for i := range 20 {
		r := h.do("POST", "/v1/auth/login", map[string]any{"email": fmt.Sprintf("spray%d@example.com", i), "password": "x"},
			auth{ip: "192.0.2.99"})
		require.Equal(t, http.StatusUnauthorized, r.Code)
	}
	require.Equal(t, http.StatusTooManyRequests, fail("192.0.2.99"))
}

// 225 failed logins from 45 networks (5 each, under every lock) leave the
// owner's successful login in its activity: failures are counted apart,
// one group per network and day.
func TestFailedLoginsKeptApartFromActivity(t *testing.T) {
	h := newHarness(t)
	c := h.register("target@example.com")
	h.loginWeb(c.email, testPassword) // the thief's, from 192.0.2.1
	for n := range 45 {
		for range 5 {
			r := h.do("POST", "/v1/auth/login", map[string]any{"email": c.email, "password": "not the password"},
				auth{ip: fmt.Sprintf("198.51.100.%d", n+1)})
			require.Equal(t, http.StatusUnauthorized, r.Code)
		}
	}
	r := h.do("GET", "/v1/me/activity", nil, c.web)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	kinds := []string{}
	for _, e := range r.body["activity"].([]any) {
		kinds = append(kinds, e.(map[string]any)["kind"].(string))
	}
	require.Equal(t, []string{"login", "login"}, kinds, "the thief's login and the harness's own")
	require.EqualValues(t, 225, r.body["failed_logins_30_days"])
	groups := r.body["login_failures"].([]any)
	require.Len(t, groups, 45)
	for _, g := range groups {
		m := g.(map[string]any)
		require.EqualValues(t, 5, m["count"], m["network"])
		require.Equal(t, time.Now().UTC().Format(time.DateOnly), m["day"])
	}
}

// serve sends a request as built.
func (h *harness) serve(req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.h.ServeHTTP(rec, req)
	return rec
}

// The session cookie is __Host-kd_session (Secure, Path=/, no Domain); a
// plain kd_session cookie is not read then. With Secure cookies off (local
// development) it is kd_session, the only name read.
func TestSessionCookieHostPrefix(t *testing.T) {
	h := newHarness(t)
	h.register("cookie@example.com")
	r := h.do("POST", "/v1/auth/login", map[string]any{"email": "cookie@example.com", "password": testPassword}, auth{})
	require.Equal(t, http.StatusOK, r.Code)
	ck := sessionCookie(r.ResponseRecorder)
	require.NotNil(t, ck)
	require.Equal(t, "__Host-kd_session", ck.Name)
	require.True(t, ck.Secure)
	require.True(t, ck.HttpOnly)
	require.Equal(t, "/", ck.Path)
	require.Empty(t, ck.Domain)
	raw := r.Header().Get("Set-Cookie")
	require.True(t, strings.HasPrefix(raw, "__Host-kd_session="), raw)
	require.NotContains(t, strings.ToLower(raw), "domain=")

	plain := httptest.NewRequest("GET", "/v1/me", nil)
	plain.AddCookie(&http.Cookie{Name: api.DevSessionCookie, Value: ck.Value})
	require.Equal(t, http.StatusUnauthorized, h.serve(plain).Code, "kd_session is not read when Secure is on")

	dev := newHarness(t, func(c *api.Config, _ *api.Deps) { c.CookieSecure = false })
	r = dev.do("POST", "/v1/auth/register", map[string]any{"first_name": "D", "last_name": "E",
		"email": "dev@example.com", "password": testPassword}, auth{})
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	var devCookie *http.Cookie
	for _, c := range r.Result().Cookies() {
		devCookie = c
	}
	require.NotNil(t, devCookie)
	require.Equal(t, "kd_session", devCookie.Name)
	require.False(t, devCookie.Secure)
	ok := httptest.NewRequest("GET", "/v1/me", nil)
	ok.AddCookie(devCookie)
	require.Equal(t, http.StatusOK, dev.serve(ok).Code)
	hostOnDev := httptest.NewRequest("GET", "/v1/me", nil)
	hostOnDev.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: devCookie.Value})
	require.Equal(t, http.StatusUnauthorized, dev.serve(hostOnDev).Code)
}

// A session unused for Config.SessionIdle ends (401, cookie cleared), even
// well before its 30 days; one in use goes on.
func TestSessionIdleTimeoutThroughAPI(t *testing.T) {
	h := newHarness(t, func(c *api.Config, _ *api.Deps) { c.SessionIdle = 2 * time.Hour })
	c := h.register("idle@example.com")
	var idle time.Duration
	var secs float64
	require.NoError(t, h.db.Get(&secs, `SELECT extract(epoch FROM idle_timeout) FROM sessions LIMIT 1`))
	idle = time.Duration(secs) * time.Second
	require.Equal(t, 2*time.Hour, idle)

	require.Equal(t, http.StatusOK, h.do("GET", "/v1/me", nil, c.web).Code)
	_, err := h.db.Exec(`UPDATE sessions SET last_used_at = now() - interval '2 hours 1 second'`)
	require.NoError(t, err)
	r := h.do("GET", "/v1/me", nil, c.web)
	require.Equal(t, http.StatusUnauthorized, r.Code)
	ck := sessionCookie(r.ResponseRecorder)
	require.NotNil(t, ck)
	require.Less(t, ck.MaxAge, 0, "the idle session's cookie is cleared")
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/v1/me", nil, c.auth).Code, "bearer sessions idle out too")
}
