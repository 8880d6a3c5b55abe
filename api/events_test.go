package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/postgres"
)

type sseEvent struct {
	id, event, data string
	comment         bool
}

// readSSE parses a stream into events until it ends.
func readSSE(body *bufio.Reader, out chan<- sseEvent) {
	defer close(out)
	var ev sseEvent
	for {
		line, err := body.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev != (sseEvent{}) {
				out <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
			ev.comment = true
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			ev.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		}
	}
}

func nextEvent(t *testing.T, ch <-chan sseEvent, within time.Duration) sseEvent {
	t.Helper()
	for {
		select {
		case ev, ok := <-ch:
			require.True(t, ok, "stream ended")
			if ev.comment && ev.event == "" {
				continue
			}
			return ev
		case <-time.After(within):
			t.Fatal("no event in time")
		}
	}
}

func openStream(t *testing.T, ctx context.Context, url, token, lastID string) <-chan sseEvent {
	t.Helper()
	return openStreamWith(t, ctx, url, auth{bearer: token}, lastID)
}

// openStreamWith opens an event stream with a's credentials (bearer or
// cookie), resuming after lastID if set, and reads its events.
func openStreamWith(t *testing.T, ctx context.Context, url string, a auth, lastID string) <-chan sseEvent {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	if a.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+a.bearer)
	}
	if a.cookie != "" {
		req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: a.cookie})
	}
	if a.agent != "" {
		req.AddCookie(&http.Cookie{Name: api.AgentCookie, Value: a.agent})
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Body.Close() })
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.True(t, strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream"))
	ch := make(chan sseEvent, 16)
	go readSSE(bufio.NewReader(res.Body), ch)
	return ch
}

// newLiveHarness is a harness whose streams are woken by PostgreSQL's
// notifications only (the poll is an hour), listening once it returns;
// tweak adjusts the configuration further.
func newLiveHarness(t *testing.T, ctx context.Context, tweak func(*api.Config)) *harness {
	t.Helper()
	var l *postgres.TimelineListener
	h := newDBHarness(t, func(db *postgres.DB, cfg *api.Config, deps *api.Deps) {
		l = db.NewTimelineListener(slog.Default())
		go func() { _ = l.Run(ctx) }()
		deps.Timeline = l
		cfg.SSEPoll = time.Hour // only the notifications can deliver in time
		tweak(cfg)
	})
	select {
	case <-l.Listening():
	case <-time.After(10 * time.Second):
		t.Fatal("the timeline listener does not listen")
	}
	return h
}

func TestOrderEventsStreamLive(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newLiveHarness(t, ctx, func(cfg *api.Config) { cfg.SSEHeartbeat = 200 * time.Millisecond })
	c := h.register("live@example.com")
	ref := h.order(c)
	ts := httptest.NewServer(h.h)
	defer ts.Close()
	defer h.srv.CloseStreams()

	streamCtx, stop := context.WithCancel(ctx)
	ch := openStream(t, streamCtx, ts.URL+"/v1/orders/"+ref+"/events", c.auth.bearer, "")

	created := nextEvent(t, ch, 5*time.Second)
	require.Equal(t, "timeline", created.event)
	require.NotEmpty(t, created.id)
	var tl map[string]any
	require.NoError(t, json.Unmarshal([]byte(created.data), &tl))
	require.Equal(t, "created", tl["kind"])

	first := nextEvent(t, ch, 5*time.Second)
	require.Equal(t, "order", first.event)
	var o map[string]any
	require.NoError(t, json.Unmarshal([]byte(first.data), &o))
	require.Equal(t, "awaiting_payment", o["status"])

	// A new event and a status change arrive live.
	_, err := h.db.Exec(`WITH u AS (UPDATE orders SET status = 'payment_detected', updated_at = now() WHERE ref = $1)
		INSERT INTO timeline_events (ref, idem_key, kind, message) VALUES ($1, 'seen', 'payment_seen', 'Paiement vu.')`, ref)
	require.NoError(t, err)
	seen := nextEvent(t, ch, 3*time.Second)
	require.Equal(t, "timeline", seen.event)
	require.Contains(t, seen.data, "payment_seen")
	upd := nextEvent(t, ch, 3*time.Second)
	require.Equal(t, "order", upd.event)
	require.Contains(t, upd.data, `"status":"payment_detected"`)

	// Heartbeats keep coming while nothing happens.
	select {
	case ev := <-ch:
		require.True(t, ev.comment, "only a heartbeat expected, got %+v", ev)
	case <-time.After(2 * time.Second):
		t.Fatal("no heartbeat")
	}
	stop()

	// Resuming after the first event sends only what followed.
	ch = openStream(t, ctx, ts.URL+"/v1/orders/"+ref+"/events", c.auth.bearer, created.id)
	again := nextEvent(t, ch, 5*time.Second)
	require.Equal(t, "timeline", again.event)
	require.Equal(t, seen.id, again.id)
	require.Equal(t, "order", nextEvent(t, ch, 5*time.Second).event)
}

func TestOrderEventsPollWithoutNotifier(t *testing.T) {
	h := newHarness(t, func(cfg *api.Config, _ *api.Deps) { cfg.SSEPoll = 100 * time.Millisecond })
	c := h.register("poll@example.com")
	ref := h.order(c)
	ts := httptest.NewServer(h.h)
	defer ts.Close()
	defer h.srv.CloseStreams()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ch := openStream(t, ctx, ts.URL+"/v1/orders/"+ref+"/events?after=0", c.auth.bearer, "")
	require.Equal(t, "timeline", nextEvent(t, ch, 5*time.Second).event)
	require.Equal(t, "order", nextEvent(t, ch, 5*time.Second).event)
	_, err := h.db.Exec(`INSERT INTO timeline_events (ref, idem_key, kind, message) VALUES ($1, 'claim', 'payment_claimed', 'Vous avez signalé un paiement.')`, ref)
	require.NoError(t, err)
	ev := nextEvent(t, ch, 3*time.Second)
	require.Contains(t, ev.data, "payment_claimed")

	r := h.do("GET", "/v1/orders/"+ref+"/events?after=-1", nil, c.auth)
	require.Equal(t, http.StatusBadRequest, r.Code)
	require.Equal(t, "after", r.errField())
}

// A top-up's stream sends its state ("topup") and its timeline like an
// order's, to its owner only.
func TestTopUpEventsStreamToItsOwner(t *testing.T) {
	h := newHarness(t, func(cfg *api.Config, _ *api.Deps) { cfg.SSEPoll = 100 * time.Millisecond })
	c := h.register("topup-live@example.com")
	other := h.register("other-live@example.com")
	ref := h.topUp(c)
	ts, ctx := streamServer(t, h)

	require.Equal(t, http.StatusNotFound, h.do("GET", "/v1/topups/"+ref+"/events", nil, other.auth).Code)

	ch := openStream(t, ctx, ts.URL+"/v1/topups/"+ref+"/events", c.auth.bearer, "")
	first := nextEvent(t, ch, 5*time.Second)
	for first.event == "timeline" {
		first = nextEvent(t, ch, 5*time.Second)
	}
	require.Equal(t, "topup", first.event)
	require.Contains(t, first.data, `"status":"awaiting_payment"`)
	_, err := h.db.Exec(`WITH u AS (UPDATE topups SET status = 'credited', credited_at = now(), updated_at = now() WHERE ref = $1)
		INSERT INTO timeline_events (ref, idem_key, kind, message) VALUES ($1, 'credited', 'topup_credited', 'Recharge créditée.')`, ref)
	require.NoError(t, err)
	ev := nextEvent(t, ch, 3*time.Second)
	require.Equal(t, "timeline", ev.event)
	require.Contains(t, ev.data, "topup_credited")
	upd := nextEvent(t, ch, 3*time.Second)
	require.Equal(t, "topup", upd.event)
	require.Contains(t, upd.data, `"status":"credited"`)
}

// topUp creates a 100 USD top-up for c.
func (h *harness) topUp(c customer) string {
	h.t.Helper()
	r := h.do("POST", "/v1/topups", map[string]any{"amount_cents": 10000}, c.auth)
	require.Equal(h.t, http.StatusCreated, r.Code, r.Body.String())
	return r.obj("topup")["reference"].(string)
}

// streamServer serves h over HTTP for event streams until the test ends;
// ctx ends first, then the streams, then the server.
func streamServer(t *testing.T, h *harness) (*httptest.Server, context.Context) {
	ts := httptest.NewServer(h.h)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); h.srv.CloseStreams(); ts.Close() })
	return ts, ctx
}

// seenPayment gives target (an order or a top-up of the customer) a payment
// request and a payment mined at block 100 of Litecoin, the chain's tip.
func seenPayment(t *testing.T, h *harness, c customer, kind, target string) {
	t.Helper()
	id := "PI-" + target
	_, err := h.db.Exec(`INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals,
			amount_base, usd_cents, rate, rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until, request_key)
		VALUES ($1, $2, $3, $4, 'LTC', 'litecoin', 8, 10000000, 1000, 100, 'test', now(), 'rltc1q'||$3, (SELECT count(*) FROM payment_intents),
			'litecoin:rltc1q'||$3, now() + interval '1 hour', now() + interval '2 hours', $1)`, id, kind, target, c.id)
	require.NoError(t, err)
	_, err = h.db.Exec(`INSERT INTO chain_blocks (network, height, hash) VALUES ('litecoin', 100, 'b100') ON CONFLICT DO NOTHING`)
	require.NoError(t, err)
	_, err = h.db.Exec(`INSERT INTO chain_payments (network, txid, output_index, asset, intent_id, address, amount_base, amount_cents, late, block_height, state)
		VALUES ('litecoin', 'tx-'||$1::text, 0, 'LTC', $1, 'rltc1q', 10000000, 1000, false, 100, 'seen')`, id)
	require.NoError(t, err)
}

// A block adds a confirmation to a payment seen without a timeline entry
// nor a change of the order or top-up: the stream still sends the state
// again, so a page showing "1 confirmation sur 6" fetches "2 sur 6".
func TestEventsStreamAConfirmationMore(t *testing.T) {
	h := newHarness(t, func(cfg *api.Config, _ *api.Deps) { cfg.SSEPoll = 100 * time.Millisecond })
	c := h.register("confirmations@example.com")
	order, topUp := h.order(c), h.topUp(c)
	ts, ctx := streamServer(t, h)

	seenPayment(t, h, c, "order", order)
	seenPayment(t, h, c, "topup", topUp)
	streams := map[string]<-chan sseEvent{}
	for kind, path := range map[string]string{"order": "/v1/orders/" + order, "topup": "/v1/topups/" + topUp} {
		ch := openStream(t, ctx, ts.URL+path+"/events", c.auth.bearer, "")
		ev := nextEvent(t, ch, 5*time.Second)
		for ev.event == "timeline" {
			ev = nextEvent(t, ch, 5*time.Second)
		}
		require.Equal(t, kind, ev.event)
		streams[kind] = ch
	}
	_, err := h.db.Exec(`INSERT INTO chain_blocks (network, height, hash) VALUES ('litecoin', 101, 'b101')`)
	require.NoError(t, err)
	for kind, ch := range streams {
		ev := nextEvent(t, ch, 3*time.Second)
		require.Equal(t, kind, ev.event, "a confirmation more is not streamed on the %s's stream", kind)
	}
	r := h.do("GET", "/v1/orders/"+order, nil, c.auth)
	pays := r.body["payment_intents"].([]any)[0].(map[string]any)["payments"].([]any)
	require.EqualValues(t, 2, pays[0].(map[string]any)["confirmations"])
}
