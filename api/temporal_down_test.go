package api_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/wfclient"
)

// dbFingerprint is every table's content of the public schema, hashed:
// equal fingerprints, unchanged database.
func dbFingerprint(t *testing.T, h *harness) map[string]string {
	t.Helper()
	var tables []string
	require.NoError(t, h.db.Select(&tables, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`))
	out := map[string]string{}
	for _, tbl := range tables {
		var sum string
		require.NoError(t, h.db.Get(&sum, `SELECT COALESCE(md5(string_agg(t::text, '|' ORDER BY t::text)), '') FROM "`+tbl+`" t`))
		out[tbl] = sum
	}
	return out
}

// With Temporal down (the real workflow client over a Temporal client that
// cannot connect): the customer and support reads answer from PostgreSQL,
// and every write that goes through a workflow answers 503
// workflows_unavailable with its French message and Retry-After (and the
// services the web site calls in Go refuse the same), having written
// nothing at all: no half-created order or top-up, no payment
// request, no audited support action. A write that needs no workflow (a
// support request) still works.
func TestTemporalDownReadsWorkWritesRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there any more
	tc, err := client.NewLazyClient(client.Options{HostPort: addr})
	require.NoError(t, err)
	defer tc.Close()
	h := newHarness(t, func(_ *api.Config, d *api.Deps) {
		wf := &wfclient.Client{Temporal: tc}
		d.Workflows, d.Health = wf, wf
	})

	c := h.register("down@example.com")
	// An order written earlier, while Temporal was up.
	var ref string
	require.NoError(t, h.db.Get(&ref, `INSERT INTO orders (ref, account_id, gpu_model, lots, gpus_per_lot, total_gpus,
		duration_days, preset, lot_cents, total_cents, status, workflow_id)
		VALUES ('ORD-DOWN000001', $1, 'rtx-a5000', 1, 1, 1, 3, 'python', 2357, 2357, 'awaiting_payment', 'rental-ORD-DOWN000001')
		RETURNING ref`, c.id))

	reads := []struct{ path string }{{"/v1/orders"}, {"/v1/orders/" + ref}, {"/v1/balance"}, {"/v1/topups"}, {"/v1/orders/" + ref + "/payment-intents"}}
	for _, r := range reads {
		got := h.do("GET", r.path, nil, c.auth)
		require.Equal(t, http.StatusOK, got.Code, "GET %s: %s", r.path, got.Body.String())
	}
	got := h.do("GET", "/v1/support/orders/"+ref, nil, auth{bearer: agentToken})
	require.Equal(t, http.StatusOK, got.Code, got.Body.String())

	before := dbFingerprint(t, h)
	order := map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "pytorch"}
	writes := []struct {
		path string
		body any
		a    auth
	}{
		{"/v1/orders", order, c.auth},
		{"/v1/orders", order, c.web},
		{"/v1/topups", map[string]any{"amount_cents": 5000}, c.auth},
		{"/v1/orders/" + ref + "/payment-intents", map[string]any{"asset": "BTC", "network": "bitcoin"}, c.auth},
		{"/v1/orders/" + ref + "/pay-from-balance", map[string]any{}, c.auth},
		{"/v1/orders/" + ref + "/cancel", map[string]any{}, c.auth},
		{"/v1/orders/" + ref + "/take-back", map[string]any{}, c.auth},
		{"/v1/support/orders/" + ref + "/extend", map[string]any{"reason": "geste commercial", "days": 1}, auth{bearer: agentToken}},
		{"/v1/support/orders/" + ref + "/cancel", map[string]any{"reason": "demande du client"}, auth{bearer: agentToken}},
		{"/v1/support/orders/" + ref + "/attribute-payment", map[string]any{"reason": "virement reçu"}, auth{bearer: agentToken}},
		{"/v1/support/orders/" + ref + "/refund", map[string]any{"reason": "remboursement"}, auth{bearer: agentToken}},
	}
	for _, w := range writes {
		got := h.do("POST", w.path, w.body, w.a)
		require.Equal(t, http.StatusServiceUnavailable, got.Code, "POST %s: %s", w.path, got.Body.String())
		require.Equal(t, "workflows_unavailable", got.errCode(), "POST %s: %s", w.path, got.Body.String())
		e, _ := got.body["error"].(map[string]any)
		require.Equal(t, "Le service de paiement est momentanément indisponible, réessayez dans quelques minutes. Rien n'a été enregistré.",
			e["message"], "POST %s", w.path)
		require.Equal(t, "60", got.Header().Get("Retry-After"), "POST %s", w.path)
	}
	// The same services as the web site calls them, in Go.
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "Bearer "+c.auth.bearer)
	me, err := h.srv.CustomerSession(context.Background(), req)
	require.NoError(t, err)
	require.NotNil(t, me)
	ctx := context.Background()
	_, err = h.srv.CreateOrder(ctx, me, api.OrderRequest{Model: "rtx-a5000", Lots: 1, DurationDays: 3, Preset: "pytorch"})
	require.Equal(t, domain.ECodeWorkflowsUnavailable, domain.ErrorCode(err), "CreateOrder: %v", err)
	_, err = h.srv.CreateTopUp(ctx, me, 50000)
	require.Equal(t, domain.ECodeWorkflowsUnavailable, domain.ErrorCode(err), "CreateTopUp: %v", err)
	_, _, err = h.srv.CreateOrderPaymentRequest(ctx, me, ref, api.PaymentRequest{Asset: "BTC", Network: "bitcoin"}, "")
	require.Equal(t, domain.ECodeWorkflowsUnavailable, domain.ErrorCode(err), "CreateOrderPaymentRequest: %v", err)
	_, err = h.srv.CancelOrder(ctx, me, ref, "")
	require.Equal(t, domain.ECodeWorkflowsUnavailable, domain.ErrorCode(err), "CancelOrder: %v", err)
	_, err = h.srv.PayFromBalance(ctx, me, ref)
	require.Equal(t, domain.ECodeWorkflowsUnavailable, domain.ErrorCode(err), "PayFromBalance: %v", err)
	_, err = h.srv.TakeBack(ctx, me, ref)
	require.Equal(t, domain.ECodeWorkflowsUnavailable, domain.ErrorCode(err), "TakeBack: %v", err)

	after := dbFingerprint(t, h)
	var changed []string
	for tbl, sum := range after {
		if before[tbl] != sum {
			changed = append(changed, tbl)
		}
	}
	sort.Strings(changed)
	require.Empty(t, changed, "tables written by refused writes")
	require.Equal(t, 1, h.count("orders"))

	// A write without a workflow goes on.
	got = h.do("POST", "/v1/orders/"+ref+"/support-requests", map[string]any{"message": "Ma commande attend le service de paiement."}, c.auth)
	require.Equal(t, http.StatusCreated, got.Code, got.Body.String())
}
