package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The support views say which actions the workflow may take in the
// case's status (the phase table): none once an order is cancelled.
func TestSupportViewsListAllowedActions(t *testing.T) {
	h := newHarness(t)
	c := h.register("offers@example.com")
	ref := h.order(c)
	allowed := func(path string) []any {
		t.Helper()
		r := h.do("GET", path, nil, agent)
		require.Equal(t, http.StatusOK, r.Code, r.Body.String())
		a, ok := r.body["allowed_actions"].([]any)
		require.True(t, ok, r.Body.String())
		return a
	}
	require.Equal(t, []any{"attribute_payment", "cancel", "refund"}, allowed("/v1/support/orders/"+ref))
	for status, want := range map[string][]any{
		"active":    {"extend", "end_early", "refund"},
		"cancelled": {},
		"ended":     {},
	} {
		_, err := h.db.Exec(`UPDATE orders SET status = $2 WHERE ref = $1`, ref, status)
		require.NoError(t, err)
		require.Equal(t, want, allowed("/v1/support/orders/"+ref), status)
	}
	tu := h.do("POST", "/v1/topups", map[string]any{"amount_cents": 50000}, c.auth).obj("topup")["reference"].(string)
	require.Equal(t, []any{"attribute_payment", "cancel"}, allowed("/v1/support/topups/"+tu))
}
