package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/postgres"
)

func registerBody(first, last, email, password string) map[string]any {
	return map[string]any{"first_name": first, "last_name": last, "email": email, "password": password}
}

func TestRegisterPasswordLengthInCharacters(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		name     string
		password string
		want     int
	}{
		{"14 ascii refused", strings.Repeat("a", 14), http.StatusBadRequest},
		{"15 ascii accepted", strings.Repeat("a", 15), http.StatusCreated},
		{"128 ascii accepted", strings.Repeat("b", 128), http.StatusCreated},
		{"129 ascii refused", strings.Repeat("c", 129), http.StatusBadRequest},
		// Characters, not bytes: 15 x "é" is 30 bytes, 128 x "é" is 256 bytes.
		{"14 accented refused", strings.Repeat("é", 14), http.StatusBadRequest},
		{"15 accented accepted", strings.Repeat("é", 15), http.StatusCreated},
		{"128 accented accepted", strings.Repeat("é", 128), http.StatusCreated},
		{"129 accented refused", strings.Repeat("é", 129), http.StatusBadRequest},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := h.count("accounts")
			email := "pw" + string(rune('a'+i)) + "@example.com"
			r := h.do("POST", "/v1/auth/register", registerBody("Ada", "Lovelace", email, tc.password), auth{})
			require.Equal(t, tc.want, r.Code, r.Body.String())
			if tc.want == http.StatusBadRequest {
				require.Equal(t, "invalid", r.errCode())
				require.Equal(t, "password", r.errField())
				require.Equal(t, before, h.count("accounts"))
				require.Nil(t, sessionCookie(r.ResponseRecorder))
			} else {
				require.Equal(t, before+1, h.count("accounts"))
				ck := sessionCookie(r.ResponseRecorder)
				require.NotNil(t, ck)
				require.True(t, ck.HttpOnly)
				require.True(t, ck.Secure)
				require.Equal(t, http.SameSiteLaxMode, ck.SameSite)
				require.Equal(t, "/", ck.Path)
				require.NotEmpty(t, r.body["csrf_token"])
				require.Nil(t, r.body["token"], "the token stays in the HttpOnly cookie")
			}
		})
	}
	var hash string
	require.NoError(t, h.db.Get(&hash, `SELECT password_hash FROM accounts ORDER BY id LIMIT 1`))
	require.True(t, strings.HasPrefix(hash, "$argon2id$v=19$m=64,t=1,p=1$"), hash)
}

func TestRegisterFieldValidation(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{registerBody("", "Lovelace", "a@example.com", testPassword), "first_name"},
		{registerBody("Ada", "  ", "a@example.com", testPassword), "last_name"},
		{registerBody("Ada", "Lovelace", "not-an-email", testPassword), "email"},
		{registerBody("Ada", "Lovelace", "Ada <a@example.com>", testPassword), "email"},
	} {
		r := h.do("POST", "/v1/auth/register", tc.body, auth{})
		require.Equal(t, http.StatusBadRequest, r.Code)
		require.Equal(t, tc.field, r.errField())
	}
	require.Zero(t, h.count("accounts"))
}

// shape is a JSON value with every leaf replaced by its type, but the
// leaves named in keep: what a client can tell apart between two answers.
func shape(v any, keep ...string) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if slices.Contains(keep, k) {
				out[k] = e
			} else {
				out[k] = shape(e, keep...)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = shape(e, keep...)
		}
		return out
	default:
		return fmt.Sprintf("%T", v)
	}
}

// A registration for an address a confirmed account holds answers as one
// for a new address (201, a session, the same body), does the same work
// (the password hashed, an unconfirmed account and its mail queued: the
// dispatcher makes it a notice to the owner), and leaves the owner's
// account as it was. Signing in with the password just registered fails
// alike in both cases.
func TestRegisterKnownAddressAnswersAsNew(t *testing.T) {
	h := newHarness(t)
	owner := h.register("ada@example.com")
	var ownerHash string
	require.NoError(t, h.db.Get(&ownerHash, `SELECT password_hash FROM accounts WHERE id = $1`, owner.id))
	ownerSessions := h.count("sessions WHERE account_id = " + fmt.Sprint(owner.id))
	ownerMails := h.outbox(owner.id)

	answer := func(email string, bearer bool) (resp, int64) {
		t.Helper()
		body := registerBody("Eve", "Intruder", email, "another password 123")
		body["bearer"] = bearer
		r := h.do("POST", "/v1/auth/register", body, auth{ip: "203.0.113.5"})
		require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
		return r, int64(r.obj("account")["id"].(float64))
	}
	for _, bearer := range []bool{false, true} {
		fresh, freshID := answer(fmt.Sprintf("new%v@example.com", bearer), bearer)
		known, knownID := answer("  ADA@Example.COM ", bearer)
		require.Equal(t, shape(fresh.body, "email_verified", "first_name", "last_name"),
			shape(known.body, "email_verified", "first_name", "last_name"), "bearer %v", bearer)
		require.Equal(t, false, known.obj("account")["email_verified"])
		require.Equal(t, sessionCookie(fresh.ResponseRecorder) != nil, sessionCookie(known.ResponseRecorder) != nil)
		require.Equal(t, len(fresh.Header().Values("Set-Cookie")), len(known.Header().Values("Set-Cookie")))
		require.NotContains(t, known.Body.String(), "Ada")
		// The same session either way: /me answers for the new account.
		tok, _ := known.body["token"].(string)
		a := auth{bearer: tok}
		if !bearer {
			a = auth{cookie: sessionCookie(known.ResponseRecorder).Value}
		}
		require.Equal(t, "ADA@Example.COM", h.me(a)["email"])
		for _, id := range []int64{freshID, knownID} {
			var hash string
			require.NoError(t, h.db.Get(&hash, `SELECT password_hash FROM accounts WHERE id = $1`, id))
			require.True(t, strings.HasPrefix(hash, "$argon2id$"), "hashed in both cases: %s", hash)
			require.Equal(t, []string{postgres.MailEmailVerification}, h.outbox(id), "a mail queued in both cases")
		}
	}

	// The owner's account is as it was, and still signs in.
	var hash string
	require.NoError(t, h.db.Get(&hash, `SELECT password_hash FROM accounts WHERE id = $1`, owner.id))
	require.Equal(t, ownerHash, hash)
	require.Equal(t, ownerSessions, h.count("sessions WHERE account_id = "+fmt.Sprint(owner.id)))
	require.Equal(t, ownerMails, h.outbox(owner.id))
	require.Equal(t, "ada@example.com", h.me(owner.auth)["email"])
	h.loginWeb("ada@example.com", testPassword)

	// Signing in with the registered password: refused alike for the new
	// address (unconfirmed) and the known one (not the owner's password).
	var bodies []string
	for _, email := range []string{"newtrue@example.com", "ada@example.com"} {
		r := h.do("POST", "/v1/auth/login", map[string]any{"email": email, "password": "another password 123"}, auth{ip: "198.51.100.8"})
		require.Equal(t, http.StatusUnauthorized, r.Code, email)
		bodies = append(bodies, r.Body.String())
	}
	require.Equal(t, bodies[0], bodies[1])
}

func TestLoginLogoutCookieAndBearer(t *testing.T) {
	h := newHarness(t)
	c := h.register("grace@example.com")

	// Browser session: cookie + CSRF.
	me := h.do("GET", "/v1/me", nil, auth{cookie: c.web.cookie})
	require.Equal(t, http.StatusOK, me.Code)
	require.Equal(t, "grace@example.com", me.obj("account")["email"])
	require.Equal(t, c.web.csrf, me.body["csrf_token"])

	r := h.do("POST", "/v1/auth/logout", nil, auth{cookie: c.web.cookie})
	require.Equal(t, http.StatusForbidden, r.Code, "logout by cookie needs the CSRF header")
	r = h.do("POST", "/v1/auth/logout", nil, c.web)
	require.Equal(t, http.StatusNoContent, r.Code)
	ck := sessionCookie(r.ResponseRecorder)
	require.NotNil(t, ck)
	require.True(t, ck.MaxAge < 0, "cookie cleared")
	r = h.do("GET", "/v1/me", nil, auth{cookie: c.web.cookie})
	require.Equal(t, http.StatusUnauthorized, r.Code, "session no longer accepted after logout")
	require.Equal(t, "unauthorized", r.errCode())

	// The bearer session is another session: still valid, until its own logout.
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/me", nil, c.auth).Code)
	require.Equal(t, http.StatusNoContent, h.do("POST", "/v1/auth/logout", nil, c.auth).Code)
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/v1/me", nil, c.auth).Code)

	// Bearer login for a CLI: token in the body, no cookie.
	r = h.do("POST", "/v1/auth/login", map[string]any{"email": "GRACE@example.com", "password": testPassword, "bearer": true}, auth{})
	require.Equal(t, http.StatusOK, r.Code)
	require.Nil(t, sessionCookie(r.ResponseRecorder))
	tok := r.body["token"].(string)
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/me", nil, auth{bearer: tok}).Code)

	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/v1/me", nil, auth{}).Code)
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/v1/me", nil, auth{bearer: "forged"}).Code)
}

func TestLoginWrongPasswordAndUnknownEmailLookAlike(t *testing.T) {
	h := newHarness(t)
	h.register("hopper@example.com")
	wrong := h.do("POST", "/v1/auth/login", map[string]any{"email": "hopper@example.com", "password": "not the password!"}, auth{})
	require.Equal(t, http.StatusUnauthorized, wrong.Code)
	require.Equal(t, "unauthorized", wrong.errCode())
	unknown := h.do("POST", "/v1/auth/login", map[string]any{"email": "nobody@example.com", "password": "not the password!"}, auth{})
	require.Equal(t, http.StatusUnauthorized, unknown.Code)
	require.Equal(t, wrong.Body.String(), unknown.Body.String())
	require.Nil(t, sessionCookie(wrong.ResponseRecorder))
	var failures int
	require.NoError(t, h.db.Get(&failures, `SELECT failures FROM auth_throttle WHERE key = sha256($1::bytea)`,
		[]byte("login:net:192.0.2.1")))
	require.Equal(t, 2, failures, "both counted against the network alike")
}

// TestLoginThrottledPerEmailAndNetwork: five failures for an email from one
// address lock that pair only: the owner, from another address, still logs
// in; IPv6 addresses count per /56; twenty failures from one network over
// many emails lock the network.
func TestLoginThrottledPerEmailAndNetwork(t *testing.T) {
	h := newHarness(t)
	h.register("target@example.com")
	attacker := auth{ip: "203.0.113.7"}
	for i := 0; i < 5; i++ {
		r := h.do("POST", "/v1/auth/login", map[string]any{"email": "target@example.com", "password": "guess number " + string(rune('a'+i))}, attacker)
		require.Equal(t, http.StatusUnauthorized, r.Code)
	}
	// Even the right password is refused from the attacker's address...
	r := h.do("POST", "/v1/auth/login", map[string]any{"email": "Target@example.com", "password": testPassword}, attacker)
	require.Equal(t, http.StatusTooManyRequests, r.Code)
	require.Equal(t, "too_many_attempts", r.errCode())
	require.Equal(t, "900", r.Header().Get("Retry-After"))
	require.Nil(t, sessionCookie(r.ResponseRecorder))
	// ...not from the owner's.
	r = h.do("POST", "/v1/auth/login", map[string]any{"email": "target@example.com", "password": testPassword}, auth{ip: "198.51.100.20"})
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())

	// IPv6: the whole /56 is one network (failures from five of its /64s
	// count together); the next /56 is another.
	for i := 1; i <= 5; i++ {
		r := h.do("POST", "/v1/auth/login", map[string]any{"email": "target@example.com", "password": "wrong password"},
			auth{ip: fmt.Sprintf("2001:db8:1:%x::1", i)})
		require.Equal(t, http.StatusUnauthorized, r.Code)
	}
	r = h.do("POST", "/v1/auth/login", map[string]any{"email": "target@example.com", "password": testPassword}, auth{ip: "2001:db8:1:ff:ffff::9"})
	require.Equal(t, http.StatusTooManyRequests, r.Code)
	r = h.do("POST", "/v1/auth/login", map[string]any{"email": "target@example.com", "password": testPassword}, auth{ip: "2001:db8:1:100::1"})
	require.Equal(t, http.StatusOK, r.Code)

	// Per network: 20 failures over many emails from the same address.
	spray := auth{ip: "192.0.2.50"}
	for i := 0; i < 20; i++ {
		r := h.do("POST", "/v1/auth/login", map[string]any{"email": fmt.Sprintf("spray%d@example.com", i), "password": "whatever"}, spray)
		require.Equal(t, http.StatusUnauthorized, r.Code)
	}
	r = h.do("POST", "/v1/auth/login", map[string]any{"email": "target@example.com", "password": testPassword}, spray)
	require.Equal(t, http.StatusTooManyRequests, r.Code)
}

// TestParallelWrongPasswordsCheckedAtMostTheLimit: 60 parallel wrong-password
// logins for one email from one address get at most 5 password checks
// (401), the rest 429; meanwhile the owner logs in from another address.
func TestParallelWrongPasswordsCheckedAtMostTheLimit(t *testing.T) {
	h := newHarness(t)
	h.register("victim@example.com")
	var checked, throttled, other atomic.Int64
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := h.doConcurrent("POST", "/v1/auth/login", map[string]any{"email": "victim@example.com", "password": fmt.Sprintf("wrong guess %02d", i)}, "203.0.113.9")
			switch r {
			case http.StatusUnauthorized:
				checked.Add(1)
			case http.StatusTooManyRequests:
				throttled.Add(1)
			default:
				other.Add(1)
			}
		}()
	}
	owner := make(chan int, 1)
	go func() {
		owner <- h.doConcurrent("POST", "/v1/auth/login", map[string]any{"email": "victim@example.com", "password": testPassword}, "198.51.100.77")
	}()
	wg.Wait()
	require.Equal(t, http.StatusOK, <-owner, "the owner logs in from another address meanwhile")
	t.Logf("60 parallel wrong passwords: %d checked, %d throttled", checked.Load(), throttled.Load())
	require.Zero(t, other.Load())
	require.LessOrEqual(t, checked.Load(), int64(5))
	require.EqualValues(t, 60, checked.Load()+throttled.Load())
}

// doConcurrent sends a JSON request from ip and returns the status (no
// require: it runs on other goroutines).
func (h *harness) doConcurrent(method, path string, body any, ip string) int {
	raw, _ := json.Marshal(body)
	req := httptest.NewRequest(method, path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = net.JoinHostPort(ip, "40000")
	rec := httptest.NewRecorder()
	h.h.ServeHTTP(rec, req)
	return rec.Code
}

// TestRegistrationThrottledPerNetwork: past the limit from one network, 429
// and no account; another network still registers.
func TestRegistrationThrottledPerNetwork(t *testing.T) {
	h := newHarness(t, func(c *api.Config, _ *api.Deps) { c.RegistrationsPerIP = 3 })
	reg := func(i int, ip string) resp {
		return h.do("POST", "/v1/auth/register", map[string]any{"first_name": "A", "last_name": "B",
			"email": fmt.Sprintf("r%d@example.com", i), "password": testPassword}, auth{ip: ip})
	}
	for i := range 3 {
		require.Equal(t, http.StatusCreated, reg(i, "2001:db8:9::1").Code)
	}
	accounts := h.count("accounts")
	r := reg(3, "2001:db8:9::ffff")
	require.Equal(t, http.StatusTooManyRequests, r.Code)
	require.Equal(t, "too_many_attempts", r.errCode())
	require.Equal(t, accounts, h.count("accounts"))
	require.Equal(t, http.StatusCreated, reg(4, "2001:db8:10::1").Code)
}

// TestLoginCSRFRefused: a text/plain (or form) login, which a third-party
// page can send without a preflight, is refused and opens no session; so is
// a JSON login or a cookie request carrying another site's Origin.
func TestLoginCSRFRefused(t *testing.T) {
	h := newHarness(t)
	c := h.register("csrf-login@example.com")
	sessions := h.count("sessions")
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		req := httptest.NewRequest("POST", "/v1/auth/login",
			strings.NewReader(`{"email":"csrf-login@example.com","password":"`+testPassword+`"}`))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		rec := httptest.NewRecorder()
		h.h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusUnsupportedMediaType, rec.Code, ct)
		require.Contains(t, rec.Body.String(), "unsupported_media_type")
		require.Nil(t, sessionCookie(rec))
	}
	require.Equal(t, sessions, h.count("sessions"))

	post := func(path, origin string, a auth) int {
		req := httptest.NewRequest("POST", path, strings.NewReader(`{"email":"csrf-login@example.com","password":"`+testPassword+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", origin)
		if a.cookie != "" {
			req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: a.cookie})
			req.Header.Set(csrfHeaderKey, a.csrf)
		}
		rec := httptest.NewRecorder()
		h.h.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusForbidden, post("/v1/auth/login", "https://evil.example", auth{}))
	require.Equal(t, http.StatusForbidden, post("/v1/auth/login", "null", auth{}))
	require.Equal(t, sessions, h.count("sessions"))
	require.Equal(t, http.StatusForbidden, post("/v1/auth/logout", "https://evil.example", c.web))
	// httptest requests are for example.com: the same host is accepted.
	require.Equal(t, http.StatusOK, post("/v1/auth/login", "https://example.com", auth{}))
	require.Equal(t, http.StatusNoContent, post("/v1/auth/logout", "https://example.com", c.web))
}

// TestAgentTokenGuessingThrottled: ten wrong agent tokens from one network
// lock it: the eleventh request is refused before any comparison, even
// with the right token; another network is not affected.
func TestAgentTokenGuessingThrottled(t *testing.T) {
	h := newHarness(t)
	for i := range 10 {
		r := h.do("GET", "/v1/support/support-requests", nil, auth{bearer: fmt.Sprintf("guess-%02d-0123456789abcdef", i), ip: "203.0.113.66"})
		require.Equal(t, http.StatusUnauthorized, r.Code)
	}
	r := h.do("GET", "/v1/support/support-requests", nil, auth{bearer: agentToken, ip: "203.0.113.66"})
	require.Equal(t, http.StatusTooManyRequests, r.Code)
	require.NotEmpty(t, r.Header().Get("Retry-After"))
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/support/support-requests", nil, auth{bearer: agentToken, ip: "198.51.100.1"}).Code)
}

func TestCSRFOnCookieRequests(t *testing.T) {
	h := newHarness(t)
	c := h.register("csrf@example.com")
	body := map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 7, "preset": "python"}

	r := h.do("POST", "/v1/orders", body, auth{cookie: c.web.cookie})
	require.Equal(t, http.StatusForbidden, r.Code)
	require.Equal(t, "forbidden", r.errCode())
	r = h.do("POST", "/v1/orders", body, auth{cookie: c.web.cookie, csrf: "wrong"})
	require.Equal(t, http.StatusForbidden, r.Code)
	r = h.do("POST", "/v1/orders", body, auth{cookie: c.web.cookie, csrf: c.auth.bearer})
	require.Equal(t, http.StatusForbidden, r.Code, "another session's secret is not the CSRF token")
	require.Zero(t, h.count("orders"))
	require.Zero(t, h.wf.total())

	r = h.do("POST", "/v1/orders", body, c.web)
	require.Equal(t, http.StatusCreated, r.Code)
	r = h.do("POST", "/v1/orders", body, c.auth) // bearer, no CSRF header
	require.Equal(t, http.StatusCreated, r.Code)
	require.Equal(t, 2, h.count("orders"))

	// Reads by cookie need no CSRF header.
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/orders", nil, auth{cookie: c.web.cookie}).Code)
}

// The order read checks its session in the statement that reads the order
// (no session cache): a logged-out or expired session stops reading at
// once, and an unknown session is told apart from another customer's order.
func TestOrderReadSessionRules(t *testing.T) {
	h := newHarness(t)
	c := h.register("order-reader@example.com")
	other := h.register("other-reader@example.com")
	ref := h.order(c)
	path := "/v1/orders/" + ref
	require.Equal(t, http.StatusOK, h.do("GET", path, nil, c.web).Code)
	require.Equal(t, http.StatusOK, h.do("GET", path, nil, c.auth).Code)

	r := h.do("GET", path, nil, auth{})
	require.Equal(t, http.StatusUnauthorized, r.Code, "no session")
	r = h.do("GET", path, nil, auth{bearer: "not-a-session"})
	require.Equal(t, http.StatusUnauthorized, r.Code, "unknown session")
	require.Equal(t, "unauthorized", r.errCode())
	r = h.do("GET", path, nil, other.auth)
	require.Equal(t, http.StatusNotFound, r.Code, "another customer's order")
	require.Equal(t, "not_found", r.errCode())

	// Logout of the cookie session: its very next read is refused and the
	// cookie cleared; the bearer session still reads.
	require.Equal(t, http.StatusNoContent, h.do("POST", "/v1/auth/logout", nil, c.web).Code)
	r = h.do("GET", path, nil, auth{cookie: c.web.cookie})
	require.Equal(t, http.StatusUnauthorized, r.Code, "logged out")
	require.Equal(t, "unauthorized", r.errCode())
	ck := sessionCookie(r.ResponseRecorder)
	require.NotNil(t, ck)
	require.True(t, ck.MaxAge < 0, "cookie cleared")
	require.Equal(t, http.StatusOK, h.do("GET", path, nil, c.auth).Code)

	// An expired session reads nothing either.
	_, err := h.db.Exec(`UPDATE sessions SET expires_at = now() - interval '1 second' WHERE account_id = $1`, c.id)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, h.do("GET", path, nil, c.auth).Code, "expired")
}
