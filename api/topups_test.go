package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A partly paid top-up says what was received: confirmed payments and
// attributions, less what a reorganisation took back, without what went to
// support (late or extra).
func TestTopUpSaysWhatWasReceived(t *testing.T) {
	h := newHarness(t)
	c := h.register("received@example.com")
	r := h.do("POST", "/v1/topups", map[string]any{"amount_cents": 10000}, c.auth)
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	ref := r.obj("topup")["reference"].(string)
	require.EqualValues(t, 0, r.body["received_cents"])

	_, err := h.db.Exec(`INSERT INTO timeline_events (ref, idem_key, kind, message, data) VALUES
		($1, 'c1', 'payment_confirmed', 'Paiement confirmé (30,00 USD).', '{"key": "ltc:a:0", "amount_cents": 3000}'),
		($1, 'c2', 'payment_confirmed', 'Paiement confirmé (20,00 USD).', '{"key": "ltc:b:0", "amount_cents": 2000}'),
		($1, 'late', 'payment_confirmed', 'Paiement confirmé après l''échéance.', '{"key": "ltc:c:0", "amount_cents": 500, "to_support": true}'),
		($1, 'r2', 'payment_reverted', 'Paiement annulé par une réorganisation.', '{"key": "ltc:b:0", "uncounted_cents": 2000}'),
		($1, 'att', 'payment_confirmed', 'Paiement attribué par le support.', '{"key": "attribution:1", "amount_cents": 1500, "attributed_by": "alice"}')`, ref)
	require.NoError(t, err)
	r = h.do("GET", "/v1/topups/"+ref, nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.EqualValues(t, 4500, r.body["received_cents"])
	require.Equal(t, "45.00", r.body["received_usd"])
}
