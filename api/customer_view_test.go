package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
)

// TestCustomerSeesNoInternals: a provisioning failure reaches the customer
// as a fixed French message, without the raw error (host names, addresses,
// remote output), and support actions without the agent's name or internal
// reason, in the order, its live stream and a top-up alike; support's view
// keeps all of it.
func TestCustomerSeesNoInternals(t *testing.T) {
	h := newHarness(t, func(cfg *api.Config, _ *api.Deps) { cfg.SSEPoll = 100 * time.Millisecond })
	c := h.register("internals@example.com")
	ref := h.order(c)
	const rawErr = "ssh gpu-host-07.dc2.internal (10.20.30.40:22): prepare.sh: exit 1: install: cannot create /home/kd-x: Permission denied"
	_, err := h.db.Exec(`INSERT INTO timeline_events (ref, idem_key, kind, message, data) VALUES
		($1, 'f', 'provisioning_failed', 'La préparation a échoué sur gpu-host-07.dc2.internal : '||$2::text, jsonb_build_object('step', 'prepare', 'attempt', 1, 'error', $2::text)),
		($1, 's', 'support_action', 'Le support a relancé la préparation de la machine.', '{"action": "retry_provisioning", "agent": "alice.martin", "reason": "hôte 07 HS, ticket interne 991"}')`,
		ref, rawErr)
	require.NoError(t, err)
	r := h.do("POST", "/v1/topups", map[string]any{"amount_cents": 10000}, c.auth)
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	topup := r.obj("topup")["reference"].(string)
	_, err = h.db.Exec(`INSERT INTO timeline_events (ref, idem_key, kind, message, data) VALUES
		($1, 's', 'support_action', 'Le support a attribué un paiement.', '{"action": "attribute_payment", "agent": "alice.martin", "reason": "virement vu"}')`, topup)
	require.NoError(t, err)

	hidden := []string{"gpu-host-07", "10.20.30.40", "Permission denied", "alice.martin", "ticket interne", "virement vu"}
	noInternals := func(where, body string) {
		t.Helper()
		for _, s := range hidden {
			require.NotContains(t, body, s, where)
		}
	}
	o := h.do("GET", "/v1/orders/"+ref, nil, c.auth)
	require.Equal(t, http.StatusOK, o.Code)
	noInternals("order", o.Body.String())
	require.Contains(t, o.Body.String(), "La préparation de la machine a échoué. Le support est prévenu")
	require.Contains(t, o.Body.String(), "retry_provisioning", "what support did stays visible")
	created := o.body["timeline"].([]any)[0].(map[string]any)["data"].(map[string]any)
	require.Equal(t, "rtx-a5000", created["gpu_model"], "an event without internals keeps its data")
	require.EqualValues(t, 2, created["lots"])
	tp := h.do("GET", "/v1/topups/"+topup, nil, c.auth)
	require.Equal(t, http.StatusOK, tp.Code)
	noInternals("top-up", tp.Body.String())

	ts := httptest.NewServer(h.h)
	defer ts.Close()
	defer h.srv.CloseStreams()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := openStream(t, ctx, ts.URL+"/v1/orders/"+ref+"/events?after=0", c.auth.bearer, "")
	var stream strings.Builder
	for range 3 { // created, failure, support action
		ev := nextEvent(t, ch, 5*time.Second)
		require.Equal(t, "timeline", ev.event)
		stream.WriteString(ev.data)
	}
	noInternals("stream", stream.String())

	s := h.do("GET", "/v1/support/orders/"+ref, nil, auth{bearer: agentToken})
	require.Equal(t, http.StatusOK, s.Code)
	for _, want := range []string{"10.20.30.40", "alice.martin", "ticket interne"} {
		require.Contains(t, s.Body.String(), want, "support sees the full detail")
	}
}
