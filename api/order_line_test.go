package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// A customer takes back what a paid order waiting for a machine holds:
// refused out of the line and on another's order; in line, one refund of
// all that is refundable under the customer's name, audited in
// support_actions like support's.
func TestTakeBackFromTheLine(t *testing.T) {
	h := newHarness(t)
	c := h.register("line@example.com")
	other := h.register("other@example.com")
	ref := h.order(c)

	r := h.do("POST", "/v1/orders/"+ref+"/take-back", nil, c.auth)
	require.Equal(t, http.StatusConflict, r.Code, r.Body.String())
	require.Equal(t, "conflict", r.errCode())
	require.Empty(t, h.wf.callsOf("Refund"))

	_, err := h.db.Exec(`UPDATE orders SET status = 'waiting_for_machine', paid_cents = total_cents, paid_at = now() WHERE ref = $1`, ref)
	require.NoError(t, err)
	r = h.do("POST", "/v1/orders/"+ref+"/take-back", nil, other.auth)
	require.Equal(t, http.StatusNotFound, r.Code, r.Body.String())
	require.Empty(t, h.wf.callsOf("Refundable"))

	h.wf.refundable = 4714
	r = h.do("POST", "/v1/orders/"+ref+"/take-back", nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	calls := h.wf.callsOf("Refund")
	require.Len(t, calls, 1)
	rf := calls[0].Arg.(workflows.Refund)
	require.Equal(t, int64(4714), rf.AmountCents)
	require.Equal(t, domain.CustomerAgent(c.id), rf.Agent)
	require.True(t, domain.ByCustomer(rf.Agent))

	var row struct {
		Agent   string `db:"agent"`
		Action  string `db:"action"`
		Params  []byte `db:"params"`
		Outcome string `db:"outcome"`
	}
	require.NoError(t, h.db.Get(&row, `SELECT agent, action, params, outcome FROM support_actions WHERE id = $1`, rf.ActionID))
	require.Equal(t, domain.CustomerAgent(c.id), row.Agent)
	require.Equal(t, domain.ActionRefund, row.Action)
	require.Equal(t, "done", row.Outcome)
	var params map[string]int64
	require.NoError(t, json.Unmarshal(row.Params, &params))
	require.Equal(t, int64(4714), params["amount_cents"])

	// The workflow's refusal comes back as the customer's error.
	h.wf.fail("Refund", domain.Errorf(domain.ECodeConflict, "La commande est close."))
	r = h.do("POST", "/v1/orders/"+ref+"/take-back", nil, c.auth)
	require.Equal(t, http.StatusConflict, r.Code, r.Body.String())
	require.Equal(t, "La commande est close.", r.obj("error")["message"])
}
