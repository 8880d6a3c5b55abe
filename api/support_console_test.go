package api_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/workflows"
)

// agentReq sends a request with the console's agent cookie (and CSRF token
// when given), validated against the OpenAPI document like h.do's.
func (h *harness) agentReq(method, path, cookie, csrf, body string) *httptest.ResponseRecorder {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: api.AgentCookie, Value: cookie})
	}
	if csrf != "" {
		req.Header.Set(csrfHeaderKey, csrf)
	}
	if method == http.MethodPost && strings.HasPrefix(path, "/v1/support/") {
		req.Header.Set(api.IdempotencyKeyHeader, rand.Text())
	}
	rec := httptest.NewRecorder()
	h.h.ServeHTTP(rec, req)
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		h.validateResponse(req, rec)
	}
	return rec
}

// openAgentSession signs in with the agent token; it returns the cookie's
// value and the CSRF token.
func (h *harness) openAgentSession(token, ip string) (cookie, csrf string) {
	h.t.Helper()
	r := h.do("POST", "/v1/support/session", nil, auth{bearer: token, ip: ip})
	require.Equal(h.t, http.StatusCreated, r.Code, r.Body.String())
	for _, c := range r.Result().Cookies() {
		if c.Name == api.AgentCookie {
			require.True(h.t, c.HttpOnly && c.Secure && c.SameSite == http.SameSiteStrictMode && c.Path == "/", "%+v", c)
			cookie = c.Value
		}
	}
	require.NotEmpty(h.t, cookie, "no agent cookie set")
	require.Equal(h.t, agentName, r.body["agent"])
	require.Equal(h.t, "session", r.body["via"])
	return cookie, r.body["csrf_token"].(string)
}

func TestAgentConsoleSession(t *testing.T) {
	h := newHarness(t)
	c := h.register("console@example.com")
	ref := h.order(c)

	// No token, a customer session: refused, nothing opened.
	require.Equal(t, http.StatusUnauthorized, h.do("POST", "/v1/support/session", nil, auth{}).Code)
	require.Equal(t, http.StatusUnauthorized, h.do("POST", "/v1/support/session", nil, c.web).Code)
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/v1/support/exceptions", nil, c.web).Code)
	require.Equal(t, 0, h.count("agent_sessions"))

	cookie, csrf := h.openAgentSession(agentToken, "")
	var stored []byte
	require.NoError(t, h.db.Get(&stored, `SELECT token_hash FROM agent_sessions`))
	require.NotContains(t, string(stored), cookie, "the session token itself is never stored")

	r := h.agentReq("GET", "/v1/support/session", cookie, "", "")
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	var who api.Agent
	require.NoError(t, json.Unmarshal(r.Body.Bytes(), &who))
	require.Equal(t, api.Agent{Agent: agentName, Roles: []domain.SupportRole{domain.RoleAgent}, Via: "session", CSRFToken: csrf,
		CreatedAt: who.CreatedAt, ExpiresAt: who.ExpiresAt}, who)
	require.Equal(t, http.StatusOK, h.agentReq("GET", "/v1/support/orders/"+ref, cookie, "", "").Code)

	// The agent cookie is no customer session.
	req := httptest.NewRequest("GET", "/v1/me", nil)
	req.AddCookie(&http.Cookie{Name: api.AgentCookie, Value: cookie})
	require.Equal(t, http.StatusUnauthorized, h.serve(req).Code)

	// A state change with the cookie needs the CSRF token: without it,
	// nothing is recorded nor sent to the workflow.
	body := `{"reason":"demande du client par email"}`
	r = h.agentReq("POST", "/v1/support/orders/"+ref+"/end-early", cookie, "", body)
	require.Equal(t, http.StatusForbidden, r.Code, r.Body.String())
	r = h.agentReq("POST", "/v1/support/orders/"+ref+"/end-early", cookie, "wrong", body)
	require.Equal(t, http.StatusForbidden, r.Code, r.Body.String())
	require.Equal(t, 0, h.count("support_actions"))
	require.Empty(t, h.wf.callsOf("EndEarly"))

	// With it, the action runs the API's path: audit row, then the workflow,
	// under the session's agent.
	r = h.agentReq("POST", "/v1/support/orders/"+ref+"/end-early", cookie, csrf, body)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	calls := h.wf.callsOf("EndEarly")
	require.Len(t, calls, 1)
	require.Equal(t, agentName, calls[0].Arg.(workflows.SupportAction).Agent)
	var agent string
	require.NoError(t, h.db.Get(&agent, `SELECT agent FROM support_actions WHERE target_ref = $1`, ref))
	require.Equal(t, agentName, agent)

	// Sign-out: CSRF needed, then the session is gone for every copy of the cookie.
	require.Equal(t, http.StatusForbidden, h.agentReq("DELETE", "/v1/support/session", cookie, "", "").Code)
	r = h.agentReq("DELETE", "/v1/support/session", cookie, csrf, "")
	require.Equal(t, http.StatusNoContent, r.Code, r.Body.String())
	require.Equal(t, 0, h.count("agent_sessions"))
	r = h.agentReq("GET", "/v1/support/exceptions", cookie, "", "")
	require.Equal(t, http.StatusUnauthorized, r.Code)
	require.Contains(t, r.Header().Get("Set-Cookie"), api.AgentCookie+"=;")

	// A bearer token has no session to close.
	require.Equal(t, http.StatusBadRequest, h.do("DELETE", "/v1/support/session", nil, auth{bearer: agentToken}).Code)
}

func TestAgentConsoleSessionEnds(t *testing.T) {
	h := newHarness(t)

	// Unused past its idle timeout, or past its lifetime: refused.
	cookie, _ := h.openAgentSession(agentToken, "")
	_, err := h.db.Exec(`UPDATE agent_sessions SET last_used_at = now() - interval '61 minutes'`)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, h.agentReq("GET", "/v1/support/session", cookie, "", "").Code)
	cookie, _ = h.openAgentSession(agentToken, "")
	_, err = h.db.Exec(`UPDATE agent_sessions SET expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, h.agentReq("GET", "/v1/support/session", cookie, "", "").Code)

	// The token it was opened with is rotated: the session ends with it
	// (another server on the same database, configured with a new token).
	cookie, _ = h.openAgentSession(agentToken, "")
	require.Equal(t, http.StatusOK, h.agentReq("GET", "/v1/support/session", cookie, "", "").Code)
	rotated := *h
	cfg := h.cfg
	cfg.AgentTokens = map[string]string{"agent-alice-new-token-0123456789": agentName}
	rotated.h = api.New(cfg, api.Deps{Stores: app.APIStores(postgres.NewStore(h.db, nil, "")), Workflows: h.wf, Keyring: h.ring,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler()
	require.Equal(t, http.StatusUnauthorized, rotated.agentReq("GET", "/v1/support/session", cookie, "", "").Code)
	require.Equal(t, 0, h.count("agent_sessions"), "the orphaned session is deleted")
	require.Equal(t, http.StatusUnauthorized, h.agentReq("GET", "/v1/support/session", cookie, "", "").Code)
}

func TestAgentConsoleSignInThrottled(t *testing.T) {
	h := newHarness(t)
	const ip = "198.51.100.7"
	// Wrong tokens at sign-in count as on every support call, per network.
	codes := map[int]int{}
	for i := 0; i < 12; i++ {
		codes[h.do("POST", "/v1/support/session", nil, auth{bearer: fmt.Sprintf("wrong-token-%02d-0123456789", i), ip: ip}).Code]++
	}
	require.Equal(t, 10, codes[http.StatusUnauthorized], "%v", codes)
	require.Equal(t, 2, codes[http.StatusTooManyRequests], "%v", codes)
	// Even the right token is refused from that network now, and the API
	// with the token too (one throttle).
	require.Equal(t, http.StatusTooManyRequests, h.do("POST", "/v1/support/session", nil, auth{bearer: agentToken, ip: ip}).Code)
	require.Equal(t, http.StatusTooManyRequests, h.do("GET", "/v1/support/exceptions", nil, auth{bearer: agentToken, ip: ip}).Code)
	require.Equal(t, 0, h.count("agent_sessions"))
	// Another network is not affected.
	h.openAgentSession(agentToken, net.IPv4(203, 0, 113, 9).String())
}

func TestSupportProvisioningFailures(t *testing.T) {
	h := newHarness(t)
	c := h.register("stuck@example.com")
	ref := h.order(c)
	h.order(c) // awaiting payment: not listed
	r := h.do("GET", "/v1/support/provisioning-failures", nil, auth{bearer: agentToken})
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Empty(t, r.body["orders"])
	_, err := h.db.Exec(`UPDATE orders SET status = 'provisioning_failed' WHERE ref = $1`, ref)
	require.NoError(t, err)
	r = h.do("GET", "/v1/support/provisioning-failures", nil, auth{bearer: agentToken})
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	orders := r.body["orders"].([]any)
	require.Len(t, orders, 1)
	require.Equal(t, ref, orders[0].(map[string]any)["reference"])
	require.Equal(t, "stuck@example.com", orders[0].(map[string]any)["customer_email"])
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/v1/support/provisioning-failures", nil, c.web).Code)
}

func TestSupportCustomerFile(t *testing.T) {
	h := newHarness(t)
	c := h.register("file@example.com")
	ref := h.order(c)
	tu := h.do("POST", "/v1/topups", map[string]any{"amount_cents": 50000}, c.auth)
	require.Equal(t, http.StatusCreated, tu.Code, tu.Body.String())
	r := h.do("GET", fmt.Sprintf("/v1/support/accounts/%d", c.id), nil, auth{bearer: agentToken})
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Equal(t, "file@example.com", r.obj("customer")["email"])
	orders := r.body["orders"].([]any)
	require.Len(t, orders, 1)
	require.Equal(t, ref, orders[0].(map[string]any)["reference"])
	require.Len(t, r.body["topups"], 1)
	require.Equal(t, float64(50000), r.obj("balance")["pending_topups_cents"])
	require.Equal(t, http.StatusNotFound, h.do("GET", "/v1/support/accounts/999999", nil, auth{bearer: agentToken}).Code)
	require.Equal(t, http.StatusNotFound, h.do("GET", "/v1/support/accounts/x", nil, auth{bearer: agentToken}).Code)
	require.Equal(t, http.StatusUnauthorized, h.do("GET", fmt.Sprintf("/v1/support/accounts/%d", c.id), nil, c.web).Code)
}

// A host its customer made dirty on purpose (the teardown's report on the
// reservation, as the SSH driver writes it) is in support's queue with the
// order, the customer and what they did; the order's support view shows it
// on the host; an operator closes it with a reason (recorded), after which it
// leaves the queue, and a second close is refused.
func TestSupportHostFlags(t *testing.T) {
	h := newHarness(t, withRoles(agentName, domain.RoleOperator))
	c := h.register("dirty@example.com")
	ref := h.order(c)
	empty := h.do("GET", "/v1/support/host-flags", nil, auth{bearer: agentToken})
	require.Equal(t, http.StatusOK, empty.Code, empty.Body.String())
	require.Empty(t, empty.body["host_flags"])
	const flag = "/home/kd-x : le client en a donné des fichiers à d'autres uids (100000 )"
	_, err := h.db.Exec(`WITH g AS (INSERT INTO gpu_hosts (name, address, host_key_fingerprint, gpu_model, gpu_count)
		SELECT 'gpu-flagged', '192.0.2.7', 'SHA256:' || repeat('A', 43), gpu_model, 1 FROM orders WHERE ref = $1 RETURNING id)
		INSERT INTO host_reservations (order_ref, host_id, host_name, unix_user, state, released_at, customer_flag, customer_flag_at)
		SELECT $1, g.id, 'gpu-flagged', 'kd-x', 'released', now(), $2, now() FROM g`, ref, flag)
	require.NoError(t, err)

	r := h.do("GET", "/v1/support/host-flags", nil, auth{bearer: agentToken})
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	flags := r.body["host_flags"].([]any)
	require.Len(t, flags, 1)
	f := flags[0].(map[string]any)
	require.Equal(t, ref, f["reference"])
	require.Equal(t, "dirty@example.com", f["customer_email"])
	require.Equal(t, "gpu-flagged", f["host_name"])
	require.Equal(t, flag, f["customer_flag"])
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/v1/support/host-flags", nil, c.web).Code)

	o := h.do("GET", "/v1/support/orders/"+ref, nil, auth{bearer: agentToken})
	require.Equal(t, http.StatusOK, o.Code, o.Body.String())
	hosts := o.body["hosts"].([]any)
	require.Len(t, hosts, 1)
	require.Equal(t, flag, hosts[0].(map[string]any)["customer_flag"])
	require.Nil(t, hosts[0].(map[string]any)["customer_flag_closed_at"])

	closed := h.do("POST", "/v1/support/orders/"+ref+"/close-host-flag", map[string]any{"reason": "client prévenu par e-mail"}, auth{bearer: agentToken})
	require.Equal(t, http.StatusOK, closed.Code, closed.Body.String())
	require.Equal(t, "close_host_flag", closed.obj("action")["action"])
	r = h.do("GET", "/v1/support/host-flags", nil, auth{bearer: agentToken})
	require.Empty(t, r.body["host_flags"])
	var by string
	require.NoError(t, h.db.Get(&by, `SELECT customer_flag_closed_by FROM host_reservations WHERE order_ref = $1`, ref))
	require.NotEmpty(t, by)
	again := h.do("POST", "/v1/support/orders/"+ref+"/close-host-flag", map[string]any{"reason": "encore"}, auth{bearer: agentToken})
	require.Equal(t, http.StatusConflict, again.Code, again.Body.String())
}
