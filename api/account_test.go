package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
)

// sessionIDs lists the ids of a's sessions and which is current.
func (h *harness) sessionIDs(a auth) (ids []int64, current int64) {
	h.t.Helper()
	r := h.do("GET", "/v1/me/sessions", nil, a)
	require.Equal(h.t, http.StatusOK, r.Code, r.Body.String())
	for _, s := range r.body["sessions"].([]any) {
		m := s.(map[string]any)
		id := int64(m["id"].(float64))
		ids = append(ids, id)
		if m["current"].(bool) {
			current = id
		}
	}
	return ids, current
}

// A customer lists their sessions (device, address), ends one (its next
// request is refused), then all others; another account's session cannot
// be ended, and nothing changes when refused.
func TestAccountSessionsListedAndEnded(t *testing.T) {
	h := newHarness(t)
	c := h.register("sessions@example.com") // a bearer and a cookie session
	third := h.loginWeb(c.email, testPassword)
	other := h.register("other@example.com")

	r := h.do("GET", "/v1/me/sessions", nil, c.web)
	require.Equal(t, http.StatusOK, r.Code)
	list := r.body["sessions"].([]any)
	require.Len(t, list, 3)
	first := list[0].(map[string]any)
	require.Equal(t, true, first["current"], "the current session comes first")
	require.Equal(t, "192.0.2.1", first["client_ip"])
	require.NotEmpty(t, first["device"])

	_, bearerID := h.sessionIDs(c.auth)
	_, thirdID := h.sessionIDs(third)
	_, otherID := h.sessionIDs(other.web)

	// Another account's session: 404 session_not_found, nothing ended.
	before := h.count("sessions")
	for _, id := range []string{fmt.Sprint(otherID), "999999", "abc"} {
		r = h.do("DELETE", "/v1/me/sessions/"+id, nil, c.web)
		require.Equal(t, http.StatusNotFound, r.Code, id)
		require.Equal(t, "session_not_found", r.errCode())
		require.Contains(t, r.body["error"].(map[string]any)["message"], "rien n'a été changé")
	}
	require.Equal(t, before, h.count("sessions"))
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/me", nil, other.web).Code)

	// Without the CSRF token (cookie session): refused, nothing ended.
	r = h.do("DELETE", fmt.Sprintf("/v1/me/sessions/%d", thirdID), nil, auth{cookie: c.web.cookie})
	require.Equal(t, http.StatusForbidden, r.Code)
	require.Equal(t, "forbidden", r.errCode())
	require.Equal(t, before, h.count("sessions"))

	// One ended: its next request is refused, the others go on.
	r = h.do("DELETE", fmt.Sprintf("/v1/me/sessions/%d", thirdID), nil, c.web)
	require.Equal(t, http.StatusNoContent, r.Code, r.Body.String())
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/v1/me", nil, third).Code)
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/me", nil, c.auth).Code)
	// Ended already: refused the second time.
	r = h.do("DELETE", fmt.Sprintf("/v1/me/sessions/%d", thirdID), nil, c.web)
	require.Equal(t, "session_not_found", r.errCode())

	// All others: the bearer session ends, this one stays.
	r = h.do("POST", "/v1/me/sessions/end-others", nil, c.web)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.EqualValues(t, 1, r.body["sessions_ended"])
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/v1/me", nil, c.auth).Code)
	ids, current := h.sessionIDs(c.web)
	require.Len(t, ids, 1)
	require.NotEqual(t, bearerID, current)
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/me", nil, other.web).Code, "another account's sessions stay")

	r = h.do("GET", "/v1/me/activity", nil, c.web)
	require.Equal(t, http.StatusOK, r.Code)
	kinds := []string{}
	for _, e := range r.body["activity"].([]any) {
		kinds = append(kinds, e.(map[string]any)["kind"].(string))
	}
	require.Equal(t, []string{"sessions_ended", "session_ended", "login", "login"}, kinds)

	// Ending the current session is a logout: the cookie is cleared.
	r = h.do("DELETE", fmt.Sprintf("/v1/me/sessions/%d", current), nil, c.web)
	require.Equal(t, http.StatusNoContent, r.Code)
	ck := sessionCookie(r.ResponseRecorder)
	require.NotNil(t, ck)
	require.Equal(t, -1, ck.MaxAge)
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/v1/me", nil, c.web).Code)
}

// The password changes only with the current one; then the old one no
// longer logs in, every other session is ended, this one stays.
func TestPasswordChange(t *testing.T) {
	h := newHarness(t)
	c := h.register("change@example.com")
	elsewhere := h.loginWeb(c.email, testPassword)
	newPassword := "un tout nouveau mot de passe"
	hashOf := func() string {
		var hash string
		require.NoError(t, h.db.Get(&hash, `SELECT password_hash FROM accounts WHERE id = $1`, c.id))
		return hash
	}
	hash, sessions := hashOf(), h.count("sessions")

	refusals := []struct {
		body        any
		a           auth
		status      int
		code, field string
	}{
		{map[string]any{"current_password": "pas le bon mot de passe", "new_password": newPassword}, c.web,
			http.StatusForbidden, "wrong_password", "current_password"},
		{map[string]any{"current_password": "", "new_password": newPassword}, c.web, http.StatusBadRequest, "invalid", "current_password"},
		{map[string]any{"current_password": testPassword, "new_password": "trop court"}, c.web, http.StatusBadRequest, "invalid", "new_password"},
		{map[string]any{"current_password": testPassword, "new_password": testPassword}, c.web, http.StatusBadRequest, "invalid", "new_password"},
		{map[string]any{"current_password": testPassword, "new_password": newPassword}, auth{cookie: c.web.cookie},
			http.StatusForbidden, "forbidden", ""},
	}
	for i, tc := range refusals {
		r := h.do("POST", "/v1/me/password", tc.body, tc.a)
		require.Equal(t, tc.status, r.Code, "case %d: %s", i, r.Body.String())
		require.Equal(t, tc.code, r.errCode(), "case %d", i)
		require.Equal(t, tc.field, r.errField(), "case %d", i)
	}
	require.Equal(t, "Le mot de passe actuel est incorrect : rien n'a été changé.",
		h.do("POST", "/v1/me/password", refusals[0].body, c.web).body["error"].(map[string]any)["message"])
	require.Equal(t, hash, hashOf(), "nothing changed")
	require.Equal(t, sessions, h.count("sessions"))
	mailed := func() int {
		var n int
		require.NoError(t, h.db.Get(&n, `SELECT count(*) FROM mail_outbox WHERE account_id = $1 AND template = 'password_changed'`, c.id))
		return n
	}
	require.Zero(t, mailed(), "a refused change mails nothing")

	// From another site, with the session's token: refused by the Origin check.
	req := httptest.NewRequest("POST", "/v1/me/password",
		strings.NewReader(`{"current_password":"`+testPassword+`","new_password":"`+newPassword+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "https://evil.example")
	req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: c.web.cookie})
	req.Header.Set(csrfHeaderKey, c.web.csrf)
	rec := httptest.NewRecorder()
	h.h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Contains(t, rec.Body.String(), "autre site")
	require.Equal(t, hash, hashOf())

	r := h.do("POST", "/v1/me/password", map[string]any{"current_password": testPassword, "new_password": newPassword}, c.web)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.EqualValues(t, 2, r.body["sessions_ended"]) // the bearer and the other cookie session
	require.Equal(t, 1, mailed(), "the owner is told of the change")
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/me", nil, c.web).Code)
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/v1/me", nil, elsewhere).Code)
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/v1/me", nil, c.auth).Code)

	r = h.do("POST", "/v1/auth/login", map[string]any{"email": c.email, "password": testPassword}, auth{})
	require.Equal(t, http.StatusUnauthorized, r.Code, "the old password no longer works")
	h.loginWeb(c.email, newPassword)

	r = h.do("GET", "/v1/me/activity", nil, c.web)
	require.Equal(t, http.StatusOK, r.Code)
	require.EqualValues(t, 1, r.body["failed_logins_30_days"])
	require.Equal(t, "login", r.body["activity"].([]any)[0].(map[string]any)["kind"])
	require.Equal(t, "password_changed", r.body["activity"].([]any)[1].(map[string]any)["kind"])
	failures := r.body["login_failures"].([]any)
	require.Len(t, failures, 1)
	require.EqualValues(t, 1, failures[0].(map[string]any)["count"])
	require.Equal(t, "192.0.2.1", failures[0].(map[string]any)["network"])
}

// Wrong current passwords are throttled per account: past the limit even
// the right one is refused for a while.
func TestPasswordChangeThrottled(t *testing.T) {
	h := newHarness(t)
	c := h.register("guess@example.com")
	for i := range 5 {
		r := h.do("POST", "/v1/me/password", map[string]any{"current_password": fmt.Sprintf("wrong guess number %d", i),
			"new_password": "un tout nouveau mot de passe"}, c.web)
		require.Equal(t, "wrong_password", r.errCode(), "guess %d", i)
	}
	r := h.do("POST", "/v1/me/password", map[string]any{"current_password": testPassword,
		"new_password": "un tout nouveau mot de passe"}, c.web)
	require.Equal(t, http.StatusTooManyRequests, r.Code, r.Body.String())
	require.NotEmpty(t, r.Header().Get("Retry-After"))
}
