package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// A rental whose teardown is stuck (ending, with a "teardown_stuck"
// event) is listed for support with what failed, and the queue's stream
// says so as soon as the event is written; a customer cannot read it.
func TestSupportTeardownsStuck(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newLiveHarness(t, ctx, func(*api.Config) {})
	c := h.register("teardown@example.com")
	ref := h.order(c)
	h.order(c) // awaiting payment: not listed
	_, err := h.db.Exec(`UPDATE orders SET status = 'ending' WHERE ref = $1`, ref)
	require.NoError(t, err)
	ts := httptest.NewServer(h.h)
	defer ts.Close()
	defer h.srv.CloseStreams()

	r := h.do("GET", "/v1/support/teardowns-stuck", nil, auth{bearer: agentToken})
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Empty(t, r.body["orders"], "an ending order without the event is not stuck")
	cookie, _ := h.openAgentSession(agentToken, "")
	queue := openStreamWith(t, ctx, ts.URL+"/v1/support/events", auth{agent: cookie}, "")
	first := nextEvent(t, queue, 5*time.Second)
	require.Equal(t, "queue", first.event)
	require.Contains(t, first.data, `"teardown_stuck":[]`)

	require.NoError(t, h.db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: ref, Key: domain.KeyTeardownStuck,
		Kind: domain.EventTeardownStuck, Message: "La fin de location prend du retard.", At: time.Now(),
		Data: map[string]any{"step": "ReleaseCapacity", "error": "wipe: device busy"}}))
	ev := nextEvent(t, queue, 5*time.Second)
	require.Equal(t, "queue", ev.event)
	require.Contains(t, ev.data, `"teardown_stuck":["`+ref+`"]`)

	r = h.do("GET", "/v1/support/teardowns-stuck", nil, auth{bearer: agentToken})
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	orders := r.body["orders"].([]any)
	require.Len(t, orders, 1)
	o := orders[0].(map[string]any)
	require.Equal(t, ref, o["reference"])
	require.Equal(t, "teardown@example.com", o["customer_email"])
	require.Equal(t, "ReleaseCapacity", o["step"])
	require.Equal(t, "wipe: device busy", o["error"])
	require.NotEmpty(t, o["since"])
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/v1/support/teardowns-stuck", nil, c.web).Code)
}
