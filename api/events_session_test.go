package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
)

// openStreamAs opens an event stream with a's credentials (bearer or
// cookie), like openStream.
func openStreamAs(t *testing.T, ctx context.Context, url string, a auth) <-chan sseEvent {
	t.Helper()
	return openStreamWith(t, ctx, url, a, "")
}

// untilState reads a fresh stream up to its first state event.
func untilState(t *testing.T, ch <-chan sseEvent, kind string) {
	t.Helper()
	ev := nextEvent(t, ch, 5*time.Second)
	for ev.event == "timeline" {
		ev = nextEvent(t, ch, 5*time.Second)
	}
	require.Equal(t, kind, ev.event)
}

// streamEnds waits, up to within, for the server to end the stream; what
// it still sends meanwhile is read and dropped.
func streamEnds(t *testing.T, ch <-chan sseEvent, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("the stream was still open after %s", within)
		}
	}
}

// A stream opened before a logout ends after it, order and top-up alike;
// the same account's other session keeps its stream, and the logged-out
// token cannot open a new one.
func TestEventsStreamEndsAtLogout(t *testing.T) {
	h := newHarness(t, func(cfg *api.Config, _ *api.Deps) {
		cfg.SSEPoll = 100 * time.Millisecond
		cfg.SSESessionCheck = 50 * time.Millisecond
	})
	c := h.register("logout-live@example.com")
	order, topUp := h.order(c), h.topUp(c)
	ts, ctx := streamServer(t, h)

	orderStream := openStreamAs(t, ctx, ts.URL+"/v1/orders/"+order+"/events", c.auth)
	untilState(t, orderStream, "order")
	topUpStream := openStreamAs(t, ctx, ts.URL+"/v1/topups/"+topUp+"/events", c.auth)
	untilState(t, topUpStream, "topup")
	other := openStreamAs(t, ctx, ts.URL+"/v1/orders/"+order+"/events", c.web) // the browser's session
	untilState(t, other, "order")

	require.Equal(t, http.StatusNoContent, h.do("POST", "/v1/auth/logout", nil, c.auth).Code)
	streamEnds(t, orderStream, 5*time.Second)
	streamEnds(t, topUpStream, 5*time.Second)

	// The other session's stream outlived those checks and still delivers.
	_, err := h.db.Exec(`INSERT INTO timeline_events (ref, idem_key, kind, message) VALUES ($1, 'after-logout', 'payment_claimed', 'Vous avez signalé un paiement.')`, order)
	require.NoError(t, err)
	ev := nextEvent(t, other, 5*time.Second)
	require.Equal(t, "timeline", ev.event)
	require.Contains(t, ev.data, "payment_claimed")

	r := h.do("GET", "/v1/orders/"+order+"/events", nil, c.auth)
	require.Equal(t, http.StatusUnauthorized, r.Code)
	require.Equal(t, "unauthorized", r.errCode())
}

// A stream ends after its maximum age (less at most a tenth); reconnecting
// with Last-Event-ID, as EventSource does by itself, resumes where it
// stopped.
func TestEventsStreamEndsAtMaxAge(t *testing.T) {
	const maxAge = 400 * time.Millisecond
	h := newHarness(t, func(cfg *api.Config, _ *api.Deps) {
		cfg.SSEPoll = 100 * time.Millisecond
		cfg.SSEMaxAge = maxAge
	})
	c := h.register("max-age@example.com")
	order := h.order(c)
	ts, ctx := streamServer(t, h)

	opened := time.Now()
	ch := openStreamAs(t, ctx, ts.URL+"/v1/orders/"+order+"/events", c.auth)
	created := nextEvent(t, ch, 5*time.Second)
	require.Equal(t, "timeline", created.event)
	require.NotEmpty(t, created.id)
	require.Equal(t, "order", nextEvent(t, ch, 5*time.Second).event)
	streamEnds(t, ch, 5*time.Second)
	require.GreaterOrEqual(t, time.Since(opened), maxAge-maxAge/10)

	_, err := h.db.Exec(`INSERT INTO timeline_events (ref, idem_key, kind, message) VALUES ($1, 'while-away', 'payment_claimed', 'Vous avez signalé un paiement.')`, order)
	require.NoError(t, err)
	again := openStream(t, ctx, ts.URL+"/v1/orders/"+order+"/events", c.auth.bearer, created.id)
	ev := nextEvent(t, again, 5*time.Second)
	require.Equal(t, "timeline", ev.event)
	require.Contains(t, ev.data, "payment_claimed", "the entry before Last-Event-ID was sent again")
	require.Equal(t, "order", nextEvent(t, again, 5*time.Second).event)
}

// A live stream is the page reconnecting by itself, not the customer: its
// opening and its session checks record no use, so a session left with an
// order page open still idles out, and the stream then ends.
func TestLiveStreamDoesNotKeepAnIdleSessionAlive(t *testing.T) {
	h := newHarness(t, func(cfg *api.Config, _ *api.Deps) {
		cfg.SSEPoll = 100 * time.Millisecond
		cfg.SSESessionCheck = 50 * time.Millisecond
		cfg.SessionIdle = 2 * time.Hour
	})
	c := h.register("idle-live@example.com")
	order := h.order(c)
	_, err := h.db.Exec(`UPDATE sessions SET last_used_at = now() - interval '1 hour'`)
	require.NoError(t, err)
	ts, ctx := streamServer(t, h)

	stream := openStreamAs(t, ctx, ts.URL+"/v1/orders/"+order+"/events", c.auth)
	untilState(t, stream, "order")
	var idleFor float64
	require.NoError(t, h.db.Get(&idleFor, `SELECT extract(epoch FROM now() - max(last_used_at)) FROM sessions`))
	require.Greater(t, idleFor, (59 * time.Minute).Seconds(), "opening the stream recorded a use")

	_, err = h.db.Exec(`UPDATE sessions SET last_used_at = now() - interval '2 hours 1 second'`)
	require.NoError(t, err)
	streamEnds(t, stream, 10*time.Second)
	require.NoError(t, h.db.Get(&idleFor, `SELECT extract(epoch FROM now() - max(last_used_at)) FROM sessions`))
	require.Greater(t, idleFor, (2 * time.Hour).Seconds(), "the stream's session checks recorded a use")
}
