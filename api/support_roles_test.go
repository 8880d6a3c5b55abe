package api_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

const (
	carolToken = "agent-carol-token-0123456789abcdef"
	carolName  = "carol"
	daveToken  = "agent-dave-token-0123456789abcdefg"
	daveName   = "dave"
)

// withRoles gives agent name roles (beyond agent).
func withRoles(name string, roles ...domain.SupportRole) func(*api.Config, *api.Deps) {
	return func(c *api.Config, _ *api.Deps) {
		if c.AgentRoles == nil {
			c.AgentRoles = map[string]domain.SupportRoles{}
		}
		c.AgentRoles[name] = roles
	}
}

// Each role is checked on the server: alice is an agent (not listed),
// bob a senior, carol an operator, dave both. Approving and declining
// take a senior, the hosts and the host flags an operator; a refusal is
// 403 forbidden_role in French and records and changes nothing. A
// senior still never reviews their own action (own_action).
func TestSupportRolesCheckedOnTheServer(t *testing.T) {
	h := newHarness(t, func(c *api.Config, _ *api.Deps) {
		c.AgentTokens = map[string]string{agentToken: agentName, bobToken: bobName, carolToken: carolName, daveToken: daveName}
		c.SupportLimits = domain.SupportLimits{FourEyesCents: 100_00, AgentDailyCapCents: 10_000_00}
	}, withRoles(bobName, domain.RoleSenior), withRoles(carolName, domain.RoleOperator),
		withRoles(daveName, domain.RoleOperator, domain.RoleSenior))
	alice, carol, dave := agent, auth{bearer: carolToken}, auth{bearer: daveToken}
	ref := h.order(h.register("roles@example.com"))

	refused := func(r resp, role string) {
		t.Helper()
		require.Equal(t, http.StatusForbidden, r.Code, r.Body.String())
		require.Equal(t, domain.ECodeForbiddenRole, r.errCode())
		require.Contains(t, r.Body.String(), "Réservé au rôle « "+role+" »")
		require.Contains(t, r.Body.String(), "Rien n'a été changé.")
	}

	// Who holds what, as the API says it.
	for a, want := range map[auth][]any{alice: {"agent"}, bob: {"agent", "senior"}, carol: {"agent", "operator"},
		dave: {"agent", "senior", "operator"}} {
		r := h.do("GET", "/v1/support/session", nil, a)
		require.Equal(t, http.StatusOK, r.Code, r.Body.String())
		require.Equal(t, want, r.body["roles"], a.bearer)
	}

	// A refund above the threshold waits; only a senior other than its
	// asker reviews it.
	asked := h.do("POST", "/v1/support/orders/"+ref+"/refund", map[string]any{"reason": "geste commercial", "amount_cents": 500_00}, dave)
	require.Equal(t, http.StatusAccepted, asked.Code, asked.Body.String())
	id := strconv.FormatInt(actionID(asked), 10)
	for _, a := range []auth{alice, carol} {
		refused(h.do("POST", "/v1/support/actions/"+id+"/approve", map[string]any{"reason": "je valide"}, a), "senior")
		refused(h.do("POST", "/v1/support/actions/"+id+"/decline", map[string]any{"reason": "non"}, a), "senior")
	}
	var reviewed bool
	require.NoError(t, h.db.Get(&reviewed, `SELECT reviewed_by IS NOT NULL FROM support_actions WHERE id = $1::bigint`, id))
	require.False(t, reviewed, "a refused review writes nothing")
	require.Empty(t, h.wf.callsOf("Refund"))
	own := h.do("POST", "/v1/support/actions/"+id+"/approve", map[string]any{"reason": "moi-même"}, dave)
	require.Equal(t, domain.ECodeOwnAction, own.errCode(), "a senior never approves their own action")
	ok := h.do("POST", "/v1/support/actions/"+id+"/approve", map[string]any{"reason": "panne vérifiée"}, bob)
	require.Equal(t, http.StatusOK, ok.Code, ok.Body.String())
	require.Len(t, h.wf.callsOf("Refund"), 1)

	// The hosts and the host flags: operators only, refused before the
	// inventory is even looked at, nothing recorded.
	actions := h.count("support_actions")
	for _, a := range []auth{alice, bob} {
		refused(h.do("GET", "/v1/support/hosts", nil, a), "opérateur")
		refused(h.do("GET", "/v1/support/host-flags", nil, a), "opérateur")
		refused(h.do("POST", "/v1/support/hosts/gpu-1/retire", map[string]any{"reason": "maintenance"}, a), "opérateur")
		refused(h.do("POST", "/v1/support/hosts/gpu-1/repair", map[string]any{"reason": "réparé"}, a), "opérateur")
		refused(h.do("POST", "/v1/support/orders/"+ref+"/close-host-flag", map[string]any{"reason": "client prévenu"}, a), "opérateur")
	}
	require.Equal(t, actions, h.count("support_actions"), "a refusal records nothing")
	for _, a := range []auth{carol, dave} {
		r := h.do("GET", "/v1/support/host-flags", nil, a)
		require.Equal(t, http.StatusOK, r.Code, r.Body.String())
		hosts := h.do("GET", "/v1/support/hosts", nil, a)
		require.Equal(t, domain.ECodeNoHostInventory, hosts.errCode(), "past the role: this harness has no inventory")
	}

	// What every agent does stays every agent's.
	for _, a := range []auth{alice, bob, carol} {
		require.Equal(t, http.StatusOK, h.do("GET", "/v1/support/actions/awaiting-approval", nil, a).Code)
		require.Equal(t, http.StatusOK, h.do("GET", "/v1/support/orders/"+ref, nil, a).Code)
	}
}
