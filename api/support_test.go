package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

var agent = auth{bearer: agentToken}

func TestSupportRefusesCustomerSessions(t *testing.T) {
	h := newHarness(t)
	c := h.register("cust@example.com")
	ref := h.order(c)

	for _, a := range []auth{{}, c.auth, c.web, {cookie: c.web.cookie, csrf: c.web.csrf, bearer: c.auth.bearer}, {bearer: agentToken + "x"}} {
		r := h.do("GET", "/v1/support/orders/"+ref, nil, a)
		require.Equal(t, http.StatusUnauthorized, r.Code)
		require.Equal(t, "unauthorized", r.errCode())
		require.Contains(t, r.Header().Get("WWW-Authenticate"), "Bearer")
		r = h.do("POST", "/v1/support/orders/"+ref+"/cancel", map[string]any{"reason": "test refus"}, a)
		require.Equal(t, http.StatusUnauthorized, r.Code)
	}
	require.Zero(t, h.count("support_actions"))
	require.Empty(t, h.wf.callsOf("CancelOrder"))

	r := h.do("GET", "/v1/support/orders/"+ref, nil, agent)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Equal(t, false, r.body["access_present"])
	require.Equal(t, "cust@example.com", r.obj("customer")["email"])
}

func TestSupportActionIsAuditedAndCarriesItsID(t *testing.T) {
	h := newHarness(t)
	c := h.register("audit@example.com")
	ref := h.order(c)

	r := h.do("POST", "/v1/support/orders/"+ref+"/extend", map[string]any{"reason": "panne du nœud pendant 2 jours", "days": 2}, agent)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	act := r.obj("action")
	id := int64(act["id"].(float64))
	require.Equal(t, agentName, act["agent"])
	require.Equal(t, "extend", act["action"])
	require.Equal(t, ref, act["target"])
	require.Equal(t, "done", act["outcome"])

	var row struct {
		Agent   string  `db:"agent"`
		Action  string  `db:"action"`
		Target  string  `db:"target_ref"`
		Reason  string  `db:"reason"`
		Params  []byte  `db:"params"`
		Outcome *string `db:"outcome"`
	}
	require.NoError(t, h.db.Get(&row, `SELECT agent, action, target_ref, reason, params, outcome FROM support_actions WHERE id = $1`, id))
	require.Equal(t, agentName, row.Agent)
	require.Equal(t, "panne du nœud pendant 2 jours", row.Reason)
	require.Equal(t, ref, row.Target)
	require.JSONEq(t, `{"days": 2}`, string(row.Params))
	require.Equal(t, "done", *row.Outcome)

	calls := h.wf.callsOf("Extend")
	require.Len(t, calls, 1)
	require.Equal(t, workflows.Extension{ActionID: id, Agent: agentName, Days: 2, Reason: "panne du nœud pendant 2 jours"}, calls[0].Arg)

	// Each order action reaches its workflow method with the action's ID.
	for _, tc := range []struct {
		path, method string
		body         map[string]any
		want         func(id int64) any
	}{
		{"attribute-payment", "AttributeOrderPayment", map[string]any{"reason": "paiement reçu sur une ancienne adresse"},
			func(id int64) any {
				return workflows.Attribution{ActionID: id, Agent: agentName, Reason: "paiement reçu sur une ancienne adresse"}
			}},
		{"attribute-payment", "AttributeOrderPayment", map[string]any{"reason": "paiement partiel", "amount_cents": 1000},
			func(id int64) any {
				return workflows.Attribution{ActionID: id, Agent: agentName, AmountCents: 1000, Reason: "paiement partiel"}
			}},
		{"end-early", "EndEarly", map[string]any{"reason": "demande du client"},
			func(id int64) any {
				return workflows.SupportAction{ActionID: id, Agent: agentName, Reason: "demande du client"}
			}},
		{"retry-provisioning", "RetryProvisioning", map[string]any{"reason": "hôte réparé"},
			func(id int64) any {
				return workflows.SupportAction{ActionID: id, Agent: agentName, Reason: "hôte réparé"}
			}},
		{"cancel", "CancelOrder", map[string]any{"reason": "doublon"},
			func(id int64) any {
				return workflows.CancelRequest{By: "support", ActionID: id, Agent: agentName, Reason: "doublon"}
			}},
		{"refund", "Refund", map[string]any{"reason": "geste commercial", "amount_cents": 500},
			func(id int64) any {
				return workflows.Refund{ActionID: id, Agent: agentName, AmountCents: 500, Reason: "geste commercial"}
			}},
	} {
		before := len(h.wf.callsOf(tc.method))
		r := h.do("POST", "/v1/support/orders/"+ref+"/"+tc.path, tc.body, agent)
		require.Equal(t, http.StatusOK, r.Code, r.Body.String())
		id := int64(r.obj("action")["id"].(float64))
		calls := h.wf.callsOf(tc.method)
		require.Len(t, calls, before+1)
		require.Equal(t, tc.want(id), calls[before].Arg, tc.path)
		require.Equal(t, ref, calls[before].Ref)
	}

	// Top-up actions.
	tu := h.do("POST", "/v1/topups", map[string]any{"amount_cents": 50000}, c.auth)
	tuRef := tu.obj("topup")["reference"].(string)
	r = h.do("POST", "/v1/support/topups/"+tuRef+"/attribute-payment", map[string]any{"reason": "paiement tardif vérifié"}, agent)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Equal(t, tuRef, h.wf.callsOf("AttributeTopUpPayment")[0].Ref)
	r = h.do("POST", "/v1/support/topups/"+tuRef+"/cancel", map[string]any{"reason": "demande du client"}, agent)
	require.Equal(t, http.StatusOK, r.Code)
	cancel := h.wf.callsOf("CancelTopUp")[0].Arg.(workflows.CancelRequest)
	require.Equal(t, "support", cancel.By)
	require.Equal(t, int64(r.obj("action")["id"].(float64)), cancel.ActionID)

	r = h.do("GET", "/v1/support/topups/"+tuRef, nil, agent)
	require.Equal(t, http.StatusOK, r.Code)
	require.Len(t, r.body["support_actions"], 2)

	r = h.do("GET", "/v1/support/orders/"+ref, nil, agent)
	require.Equal(t, http.StatusOK, r.Code)
	require.Len(t, r.body["support_actions"], 7)
}

func TestSupportActionRefusedOrFailedIsRecorded(t *testing.T) {
	h := newHarness(t)
	c := h.register("refused@example.com")
	ref := h.order(c)

	h.wf.fail("EndEarly", domain.Errorf(domain.ECodeConflict, "La location n'est pas active."))
	r := h.do("POST", "/v1/support/orders/"+ref+"/end-early", map[string]any{"reason": "fin demandée"}, agent)
	require.Equal(t, http.StatusConflict, r.Code)
	require.Equal(t, "conflict", r.errCode())
	require.Equal(t, "rejected", r.obj("action")["outcome"])
	require.Contains(t, r.obj("action")["detail"], "La location n'est pas active.")

	h.wf.fail("RetryProvisioning", errors.New("context deadline exceeded"))
	r = h.do("POST", "/v1/support/orders/"+ref+"/retry-provisioning", map[string]any{"reason": "relance"}, agent)
	require.Equal(t, http.StatusServiceUnavailable, r.Code)
	require.Equal(t, "unavailable", r.errCode())
	require.Equal(t, "failed", r.obj("action")["outcome"])

	var outcomes []string
	require.NoError(t, h.db.Select(&outcomes, `SELECT outcome FROM support_actions ORDER BY id`))
	require.Equal(t, []string{"rejected", "failed"}, outcomes)
}

func TestSupportActionValidationWritesNothing(t *testing.T) {
	h := newHarness(t)
	c := h.register("valid@example.com")
	ref := h.order(c)
	for _, tc := range []struct {
		path  string
		body  any
		code  string
		field string
	}{
		{"/orders/" + ref + "/cancel", map[string]any{"reason": "no"}, "invalid", "reason"},
		{"/orders/" + ref + "/cancel", map[string]any{}, "invalid", "reason"},
		{"/orders/" + ref + "/cancel", map[string]any{"reason": strings.Repeat("r", 2001)}, "invalid", "reason"},
		{"/orders/" + ref + "/extend", map[string]any{"reason": "valid reason"}, "invalid", "days"},
		{"/orders/" + ref + "/extend", map[string]any{"reason": "valid reason", "days": 31}, "invalid", "days"},
		{"/orders/" + ref + "/refund", map[string]any{"reason": "valid reason"}, "invalid", "amount_cents"},
		{"/orders/" + ref + "/attribute-payment", map[string]any{"reason": "valid reason", "amount_cents": -5}, "invalid", "amount_cents"},
		{"/orders/" + ref + "/cancel", `{"reason": "valid reason", "by": "customer"}`, "invalid_json", "by"},
		{"/orders/KD-0000000000/cancel", map[string]any{"reason": "valid reason"}, "not_found", ""},
		{"/topups/TU-0000000000/cancel", map[string]any{"reason": "valid reason"}, "not_found", ""},
	} {
		r := h.do("POST", "/v1/support"+tc.path, tc.body, agent)
		require.Equal(t, tc.code, r.errCode(), "%s %v", tc.path, tc.body)
		require.Equal(t, tc.field, r.errField(), tc.path)
	}
	require.Zero(t, h.count("support_actions"))
	require.Equal(t, 1, h.wf.total(), "only the StartRental of the order")
}

func TestSupportOrderViewHidesAccessSecret(t *testing.T) {
	h := newHarness(t)
	c := h.register("view@example.com")
	ref := h.order(c)
	_, err := h.db.Exec(`INSERT INTO order_access (order_ref, host, port, username, password, gpu_model_seen,
		gpu_count_seen, driver_version, cuda_version) VALUES ($1, 'h', 22, 'u', 'topsecret', 'RTX A5000', 2, '550', '12.4')`, ref)
	require.NoError(t, err)
	_, err = h.db.CreateSupportRequest(context.Background(), domain.SupportRequest{OrderRef: ref, AccountID: c.id, Message: "aide"})
	require.NoError(t, err)

	r := h.do("GET", "/v1/support/orders/"+ref, nil, agent)
	require.Equal(t, http.StatusOK, r.Code)
	require.Equal(t, true, r.body["access_present"])
	require.NotContains(t, r.Body.String(), "topsecret")
	require.Len(t, r.body["support_requests"], 1)
	raw, _ := json.Marshal(r.body["order"])
	require.Contains(t, string(raw), ref)
	require.Equal(t, http.StatusNotFound, h.do("GET", "/v1/support/orders/KD-0000000000", nil, agent).Code)
}
