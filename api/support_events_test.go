package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
)

// The console's live streams: an agent's only; woken by what the queue
// and a file show without a timeline entry (a customer's support request);
// they do not keep an idle console session open, and end with it.
func TestSupportConsoleStreams(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newLiveHarness(t, ctx, func(cfg *api.Config) { cfg.SSESessionCheck = 100 * time.Millisecond })
	c := h.register("streams@example.com")
	ref := h.order(c)
	ts := httptest.NewServer(h.h)
	defer ts.Close()
	defer h.srv.CloseStreams()

	// A customer's session or token opens no support stream.
	for _, path := range []string{"/v1/support/events", "/v1/support/orders/" + ref + "/events"} {
		for _, a := range []auth{c.auth, c.web, {}} {
			require.Equal(t, http.StatusUnauthorized, h.do("GET", path, nil, a).Code, path)
		}
	}

	cookie, csrf := h.openAgentSession(agentToken, "")
	_, err := h.db.Exec(`UPDATE agent_sessions SET last_used_at = now() - interval '30 minutes'`)
	require.NoError(t, err)
	var before time.Time
	require.NoError(t, h.db.Get(&before, `SELECT last_used_at FROM agent_sessions`))
	file := openStreamWith(t, ctx, ts.URL+"/v1/support/orders/"+ref+"/events", auth{agent: cookie}, "")
	untilState(t, file, "order")
	queue := openStreamWith(t, ctx, ts.URL+"/v1/support/events", auth{agent: cookie}, "")
	first := nextEvent(t, queue, 5*time.Second)
	require.Equal(t, "queue", first.event)
	require.Contains(t, first.data, `"support_requests":[]`)
	var after time.Time
	require.NoError(t, h.db.Get(&after, `SELECT last_used_at FROM agent_sessions`))
	require.Equal(t, before, after, "a stream is not the agent's activity")

	// The customer writes to support: no timeline entry, yet both streams
	// say so at once (the listener's notification; the poll is an hour).
	r := h.do("POST", "/v1/orders/"+ref+"/support-requests", map[string]any{"message": "Le GPU n'apparaît pas"}, c.auth)
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	id := strconv.FormatInt(int64(r.body["id"].(float64)), 10)
	ev := nextEvent(t, file, 5*time.Second)
	require.Equal(t, "order", ev.event)
	require.Contains(t, ev.data, "Le GPU n'apparaît pas")
	ev = nextEvent(t, queue, 5*time.Second)
	require.Equal(t, "queue", ev.event)
	require.Contains(t, ev.data, `"support_requests":[`+id+`]`)

	// Signed out: the streams end, and do not open again.
	require.Equal(t, http.StatusNoContent, h.agentReq("DELETE", "/v1/support/session", cookie, csrf, "").Code)
	for _, ch := range []<-chan sseEvent{file, queue} {
		require.Eventually(t, func() bool {
			select {
			case _, ok := <-ch:
				return !ok
			default:
				return false
			}
		}, 5*time.Second, 20*time.Millisecond)
	}
	require.Equal(t, http.StatusUnauthorized, h.agentReq("GET", "/v1/support/events", cookie, "", "").Code)
}
