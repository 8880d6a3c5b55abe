package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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

func TestRegisterDuplicateEmailRevealsNothing(t *testing.T) {
	h := newHarness(t)
	r := h.do("POST", "/v1/auth/register", registerBody("Ada", "Lovelace", "ada@example.com", testPassword), auth{})
	require.Equal(t, http.StatusCreated, r.Code)
	r = h.do("POST", "/v1/auth/register", registerBody("Bob", "Martin", "bob@example.com", testPassword+"x"), auth{})
	require.Equal(t, http.StatusCreated, r.Code)
	before := h.count("accounts")
	sessions := h.count("sessions")

	var bodies []string
	for _, email := range []string{"ada@example.com", "bob@example.com", "ADA@Example.COM", "  Bob@EXAMPLE.com "} {
		r := h.do("POST", "/v1/auth/register", registerBody("Eve", "Intruder", email, "another password 123"), auth{})
		require.Equal(t, http.StatusConflict, r.Code, email)
		require.Equal(t, "email_unavailable", r.errCode())
		require.Nil(t, sessionCookie(r.ResponseRecorder), "no session for a refused registration")
		require.Empty(t, r.Header().Values("Set-Cookie"))
		require.NotContains(t, r.Body.String(), "Ada")
		require.NotContains(t, r.Body.String(), "Bob")
		bodies = append(bodies, r.Body.String())
	}
	for _, b := range bodies[1:] {
		require.Equal(t, bodies[0], b, "the answer is the same whoever owns the address")
	}
	require.Equal(t, before, h.count("accounts"))
	require.Equal(t, sessions, h.count("sessions"))
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
	require.Equal(t, 2, h.count("login_failures"))
}

func TestLoginThrottledPerEmailThenPerIP(t *testing.T) {
	h := newHarness(t)
	h.register("target@example.com")
	for i := 0; i < 5; i++ {
		r := h.do("POST", "/v1/auth/login", map[string]any{"email": "target@example.com", "password": "guess number " + string(rune('a'+i))}, auth{})
		require.Equal(t, http.StatusUnauthorized, r.Code)
	}
	// Even the right password is refused while throttled.
	r := h.do("POST", "/v1/auth/login", map[string]any{"email": "Target@example.com", "password": testPassword}, auth{})
	require.Equal(t, http.StatusTooManyRequests, r.Code)
	require.Equal(t, "too_many_attempts", r.errCode())
	require.NotEmpty(t, r.Header().Get("Retry-After"))
	require.Nil(t, sessionCookie(r.ResponseRecorder))

	// Per IP: 20 failures over many emails from the same address.
	for i := 5; i < 20; i++ {
		r := h.do("POST", "/v1/auth/login", map[string]any{"email": "spray" + string(rune('a'+i)) + "@example.com", "password": "whatever"}, auth{})
		require.Equal(t, http.StatusUnauthorized, r.Code)
	}
	r = h.do("POST", "/v1/auth/login", map[string]any{"email": "fresh@example.com", "password": "whatever"}, auth{})
	require.Equal(t, http.StatusTooManyRequests, r.Code)
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
