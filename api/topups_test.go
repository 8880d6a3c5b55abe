package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
)

// A partly paid top-up says what its workflow counted so far, as each of
// its transitions writes it (a reversal lowers it again).
func TestTopUpSaysWhatWasReceived(t *testing.T) {
	h := newHarness(t)
	c := h.register("received@example.com")
	r := h.do("POST", "/v1/topups", map[string]any{"amount_cents": 10000}, c.auth)
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	ref := r.obj("topup")["reference"].(string)
	require.EqualValues(t, 0, r.body["received_cents"])

	for i, received := range []int64{3000, 5000, 3000} {
		require.NoError(t, h.db.RecordTopUpEvent(context.Background(), domain.TopUpEvent{TopUpRef: ref,
			Key: "test:" + string(rune('a'+i)), Kind: domain.EventPaymentPartial, Message: "Paiement partiel.",
			At: time.Now(), ReceivedCents: &received}))
		r = h.do("GET", "/v1/topups/"+ref, nil, c.auth)
		require.Equal(t, http.StatusOK, r.Code, r.Body.String())
		require.EqualValues(t, received, r.body["received_cents"])
	}
	require.Equal(t, "30.00", r.body["received_usd"])
}
