package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writableTables are every table a request of the API can write to.
var writableTables = []string{"accounts", "sessions", "orders", "topups", "timeline_events",
	"support_actions", "support_requests", "payment_intents", "payment_claims"}

func (h *harness) counts() map[string]int {
	h.t.Helper()
	out := map[string]int{}
	for _, t := range writableTables {
		out[t] = h.count(t)
	}
	return out
}

// TestNULInEveryFreeTextFieldIs400 sends "\u0000" (alone and inside text) in
// each free-text field of every endpoint that takes one: 400, code
// "invalid", the field named, a French message, and no row written anywhere.
func TestNULInEveryFreeTextFieldIs400(t *testing.T) {
	h := newHarness(t)
	c := h.register("nul@example.com")
	ref := h.order(c)
	r := h.do("POST", "/v1/orders/"+ref+"/support-requests", map[string]any{"message": "ça plante"}, c.auth)
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	reqID := int64(r.body["id"].(float64))
	agent := auth{bearer: agentToken}
	reg := map[string]any{"first_name": "Ada", "last_name": "Lovelace", "email": "nul2@example.com", "password": testPassword}

	type endpoint struct {
		path   string
		base   map[string]any
		fields []string
		a      auth
	}
	endpoints := []endpoint{
		{"/v1/auth/register", reg, []string{"first_name", "last_name", "email", "password"}, auth{}},
		{"/v1/auth/login", map[string]any{"email": c.email, "password": testPassword}, []string{"email", "password"}, auth{}},
		{"/v1/orders/" + ref + "/support-requests",
			map[string]any{"message": "m", "launch_command": "python x.py", "versions": "torch 2", "first_error": "boom"},
			[]string{"message", "launch_command", "versions", "first_error"}, c.auth},
		{"/v1/orders/" + ref + "/cancel", map[string]any{"reason": "plus besoin"}, []string{"reason"}, c.auth},
		{"/v1/orders", map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"},
			[]string{"gpu_model", "preset"}, c.auth},
		{"/v1/quote", map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"},
			[]string{"gpu_model", "preset"}, auth{}},
		{"/v1/orders/" + ref + "/payment-intents", map[string]any{"asset": "BTC", "network": "bitcoin"},
			[]string{"asset", "network"}, c.auth},
		{fmt.Sprintf("/v1/support/support-requests/%d/answer", reqID), map[string]any{"message": "réponse"},
			[]string{"message"}, agent},
		{"/v1/support/orders/" + ref + "/end-early", map[string]any{"reason": "demande client"}, []string{"reason"}, agent},
		{"/v1/support/orders/" + ref + "/cancel", map[string]any{"reason": "demande client"}, []string{"reason"}, agent},
		{"/v1/support/orders/" + ref + "/extend", map[string]any{"days": 1, "reason": "geste"}, []string{"reason"}, agent},
		{"/v1/support/orders/" + ref + "/attribute-payment", map[string]any{"amount_cents": 100, "reason": "virement vu"},
			[]string{"reason"}, agent},
		{"/v1/support/orders/" + ref + "/refund", map[string]any{"amount_cents": 100, "reason": "geste"}, []string{"reason"}, agent},
	}
	before, calls := h.counts(), h.wf.total()
	for _, e := range endpoints {
		for _, f := range e.fields {
			for _, v := range []string{"\u0000", "abc\u0000def"} {
				body := map[string]any{}
				for k, x := range e.base {
					body[k] = x
				}
				body[f] = v
				r := h.do("POST", e.path, body, e.a)
				require.Equal(t, http.StatusBadRequest, r.Code, "%s %s: %s", e.path, f, r.Body.String())
				require.Equal(t, "invalid", r.errCode(), "%s %s", e.path, f)
				require.Equal(t, f, r.errField(), "%s %s", e.path, f)
				require.Contains(t, r.obj("error")["message"], "caractère nul")
			}
		}
	}
	require.Equal(t, before, h.counts())
	require.Equal(t, calls, h.wf.total(), "no workflow called")
}

// TestControlCharactersRefused: names refuse every control or invisible
// character (a newline first); free text keeps line breaks and tabs but no
// other control character; a path or query with %00 is a 400.
func TestControlCharactersRefused(t *testing.T) {
	h := newHarness(t)
	c := h.register("ctl@example.com")
	ref := h.order(c)
	before := h.counts()
	for _, name := range []string{"Ada\nLovelace", "Ada\rX", "A\tB", "\u202eecalevoL", "A\u200bB", "A\u2028B", "A\x1bB"} {
		for _, f := range []string{"first_name", "last_name"} {
			body := map[string]any{"first_name": "Ada", "last_name": "Lovelace", "email": "ctl2@example.com", "password": testPassword}
			body[f] = name
			r := h.do("POST", "/v1/auth/register", body, auth{})
			require.Equal(t, http.StatusBadRequest, r.Code, "%q", name)
			require.Equal(t, "invalid", r.errCode())
			require.Equal(t, f, r.errField())
		}
	}
	r := h.do("POST", "/v1/orders/"+ref+"/support-requests", map[string]any{"message": "bell \x07"}, c.auth)
	require.Equal(t, http.StatusBadRequest, r.Code)
	require.Equal(t, "message", r.errField())
	for _, p := range []string{"/v1/orders/KD%00X", "/v1/orders/" + ref + "%00", "/v1/orders/" + ref + "/events?after=%00"} {
		r := h.do("GET", p, nil, c.auth)
		require.Equal(t, http.StatusBadRequest, r.Code, p)
		require.Equal(t, "invalid", r.errCode(), p)
	}
	require.Equal(t, before, h.counts())

	// Line breaks and tabs stay in free text, accents and emoji too.
	msg := "Ligne 1\n\tLigne 2 — é 🚀"
	r = h.do("POST", "/v1/orders/"+ref+"/support-requests", map[string]any{"message": msg}, c.auth)
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	require.Equal(t, msg, r.body["message"])
	r = h.do("POST", "/v1/auth/register", map[string]any{"first_name": "Zoé", "last_name": "O'Brien-Élise",
		"email": "ctl3@example.com", "password": testPassword}, auth{})
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	require.True(t, strings.HasPrefix(r.obj("account")["first_name"].(string), "Zo"))
}
