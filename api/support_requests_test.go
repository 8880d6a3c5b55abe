package api_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// Support sees the open requests and answers one: the request is answered,
// the answer is on the order's tracking with the agent's name, and a mail to
// the customer is queued with it.
func TestSupportAnswersARequest(t *testing.T) {
	h := newHarness(t)
	c := h.register("asks@example.com")
	ref := h.order(c)
	r := h.do("POST", "/v1/orders/"+ref+"/support-requests", map[string]any{
		"message": "Le notebook ne démarre pas", "first_error": "ModuleNotFoundError: No module named 'jupyter'",
	}, c.auth)
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	id := int64(r.body["id"].(float64))

	// Customers cannot reach the support queue.
	r = h.do("GET", "/v1/support/support-requests", nil, c.auth)
	require.Equal(t, http.StatusUnauthorized, r.Code)
	r = h.do("GET", "/v1/support/support-requests", nil, agent)
	require.Equal(t, http.StatusOK, r.Code)
	require.Len(t, r.body["support_requests"], 1)

	path := "/v1/support/support-requests/" + strconv.FormatInt(id, 10) + "/answer"
	r = h.do("POST", path, map[string]any{"message": ""}, agent)
	require.Equal(t, http.StatusBadRequest, r.Code)
	r = h.do("POST", "/v1/support/support-requests/999999/answer", map[string]any{"message": "?"}, agent)
	require.Equal(t, http.StatusNotFound, r.Code)

	r = h.do("POST", path, map[string]any{"message": "Installez jupyter dans l'environnement : pip install notebook."}, agent)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Equal(t, "answered", r.body["support_request"].(map[string]any)["status"])

	r = h.do("GET", "/v1/support/support-requests", nil, agent)
	require.Len(t, r.body["support_requests"], 0)

	var kinds []string
	require.NoError(t, h.db.Select(&kinds, `SELECT kind FROM timeline_events WHERE ref = $1 ORDER BY id`, ref))
	require.Contains(t, kinds, "support_answer")
	var answerBy string
	require.NoError(t, h.db.Get(&answerBy, `SELECT data->>'agent' FROM timeline_events WHERE ref = $1 AND kind = 'support_answer'`, ref))
	require.Equal(t, agentName, answerBy)
	var mails int
	require.NoError(t, h.db.Get(&mails, `SELECT count(*) FROM mail_outbox WHERE ref = $1 AND template = 'support_answer'`, ref))
	require.Equal(t, 1, mails)
}
