package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

func TestCatalog(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/v1/catalog", nil, auth{})
	require.Equal(t, http.StatusOK, r.Code)
	models := r.body["models"].([]any)
	require.Len(t, models, 8)
	first := models[0].(map[string]any)
	require.Equal(t, "rtx-a5000", first["model"])
	require.EqualValues(t, 24, first["memory_gb"])
	prices := first["prices"].([]any)
	require.Equal(t, "23.57", prices[0].(map[string]any)["lot_price_usd"])
	require.Equal(t, []any{3.0, 7.0, 30.0}, r.body["durations"])
}

func TestQuote(t *testing.T) {
	h := newHarness(t)
	r := h.do("POST", "/v1/quote", map[string]any{"gpu_model": "b200", "lots": 2, "duration_days": 7, "preset": "inference"}, auth{})
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.EqualValues(t, 2, r.body["lots"])
	require.EqualValues(t, 2, r.body["gpus_per_lot"])
	require.EqualValues(t, 4, r.body["total_gpus"])
	lot := int64(r.body["lot_price_cents"].(float64))
	require.Equal(t, int64(155900), lot)
	require.EqualValues(t, 2*lot, r.body["total_cents"])
	require.Equal(t, "3118.00", r.body["total_usd"])
	require.EqualValues(t, 192, r.body["memory_gb_per_gpu"])

	r = h.do("POST", "/v1/quote", map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"}, auth{})
	require.Equal(t, http.StatusOK, r.Code)
	require.Equal(t, "23.57", r.body["total_usd"])
	require.EqualValues(t, 2357, r.body["total_cents"])
	require.Equal(t, "23.57", r.body["lot_price_usd"])
	r = h.do("POST", "/v1/quote", map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 7, "preset": "python"}, auth{})
	require.Equal(t, "55.00", r.body["total_usd"])

	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 5, "preset": "python"}, "duration_days"},
		{map[string]any{"gpu_model": "rtx-a5000", "lots": 11, "duration_days": 3, "preset": "python"}, "lots"},
		{map[string]any{"gpu_model": "rtx-a5000", "lots": 0, "duration_days": 3, "preset": "python"}, "lots"},
		{map[string]any{"gpu_model": "tpu-v9", "lots": 1, "duration_days": 3, "preset": "python"}, "gpu_model"},
		{map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "jax"}, "preset"},
	} {
		r := h.do("POST", "/v1/quote", tc.body, auth{})
		require.Equal(t, http.StatusBadRequest, r.Code)
		require.Equal(t, "invalid", r.errCode())
		require.Equal(t, tc.field, r.errField())
	}
}

func TestCreateOrderStartsRentalWithStoredOrder(t *testing.T) {
	h := newHarness(t)
	c := h.register("order@example.com")
	r := h.do("POST", "/v1/orders", map[string]any{"gpu_model": "b200", "lots": 2, "duration_days": 3, "preset": "pytorch"}, c.auth)
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	ref := r.obj("order")["reference"].(string)
	require.True(t, strings.HasPrefix(ref, "KD-"))
	require.Equal(t, "/v1/orders/"+ref, r.Header().Get("Location"))
	require.Equal(t, "awaiting_payment", r.obj("order")["status"])
	require.EqualValues(t, 4, r.obj("order")["total_gpus"])
	require.EqualValues(t, 2*69900, r.obj("order")["total_cents"])
	require.Equal(t, "cuda", r.obj("order")["compute_stack"])
	require.Len(t, r.body["timeline"], 1)
	require.Nil(t, r.body["access"])

	stored, err := h.db.GetOrder(context.Background(), ref)
	require.NoError(t, err)
	require.NotNil(t, stored.WorkflowStartedAt, "marked started")
	calls := h.wf.callsOf("StartRental")
	require.Len(t, calls, 1)
	stored.WorkflowStartedAt = nil
	require.Equal(t, workflows.NewRentalInput(stored, h.cfg.Rental), calls[0].Arg)
	require.Equal(t, c.id, calls[0].Arg.(workflows.RentalInput).AccountID)
	// An AMD order says ROCm from the start, on creation and on reading.
	r = h.do("POST", "/v1/orders", map[string]any{"gpu_model": "mi210", "lots": 1, "duration_days": 3, "preset": "python"}, c.auth)
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	require.Equal(t, "rocm", r.obj("order")["compute_stack"])
	r = h.do("GET", "/v1/orders/"+r.obj("order")["reference"].(string), nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Equal(t, "rocm", r.obj("order")["compute_stack"])
}

func TestCreateOrderWhenWorkflowsDownStillCreates(t *testing.T) {
	h := newHarness(t)
	c := h.register("down@example.com")
	h.wf.fail("StartRental", errors.New("temporal: connection refused"))
	ref := h.order(c)
	stored, err := h.db.GetOrder(context.Background(), ref)
	require.NoError(t, err)
	require.Nil(t, stored.WorkflowStartedAt, "left for the reconciler")
	un, err := h.db.UnstartedOrders(context.Background(), 0)
	require.NoError(t, err)
	require.Len(t, un, 1)
	r := h.do("GET", "/v1/orders/"+ref, nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code)
}

func TestOrdersAndTopUpsOfAnotherCustomerAre404(t *testing.T) {
	h := newHarness(t)
	alice := h.register("alice@example.com")
	bob := h.register("bob@example.com")
	ref := h.order(alice)
	tu := h.do("POST", "/v1/topups", map[string]any{"amount_cents": 10000}, alice.auth)
	require.Equal(t, http.StatusCreated, tu.Code)
	tuRef := tu.obj("topup")["reference"].(string)
	calls := h.wf.total()

	for _, probe := range []struct{ method, path string }{
		{"GET", "/v1/orders/" + ref},
		{"GET", "/v1/orders/" + ref + "/events"},
		{"POST", "/v1/orders/" + ref + "/cancel"},
		{"POST", "/v1/orders/" + ref + "/pay-from-balance"},
		{"GET", "/v1/orders/" + ref + "/support-requests"},
		{"GET", "/v1/topups/" + tuRef},
		{"GET", "/v1/orders/KD-DOESNOTEXI"},
		{"GET", "/v1/topups/TU-DOESNOTEXI"},
	} {
		r := h.do(probe.method, probe.path, nil, bob.auth)
		require.Equal(t, http.StatusNotFound, r.Code, probe.path)
		require.Equal(t, "not_found", r.errCode())
	}
	r := h.do("POST", "/v1/orders/"+ref+"/support-requests", map[string]any{"message": "hello"}, bob.auth)
	require.Equal(t, http.StatusNotFound, r.Code)
	require.Equal(t, calls, h.wf.total(), "no workflow touched for another customer's order")
	require.Zero(t, h.count("support_requests"))

	list := h.do("GET", "/v1/orders", nil, bob.auth)
	require.Empty(t, list.body["orders"])
	list = h.do("GET", "/v1/orders", nil, alice.auth)
	require.Len(t, list.body["orders"], 1)
	tl := h.do("GET", "/v1/topups", nil, bob.auth)
	require.Empty(t, tl.body["topups"])
}

func TestBadJSONWritesNothing(t *testing.T) {
	h := newHarness(t)
	c := h.register("json@example.com")
	accounts, orders, topups := h.count("accounts"), h.count("orders"), h.count("topups")

	for _, tc := range []struct {
		path, body, field string
	}{
		{"/v1/auth/register", `{"first_name": "A", "last_name": "B", "email": "x@example.com", "password": "` + testPassword + `", "admin": true}`, "admin"},
		{"/v1/auth/register", `{"first_name": "A", "last_name": "B", "email": "x@example.com", "password": "` + testPassword + `"`, ""},
		{"/v1/auth/register", `{"first_name": "A", "last_name": "B", "email": "x@example.com", "password": "` + testPassword + `"} {}`, ""},
		{"/v1/auth/register", `{"first_name": 12, "last_name": "B", "email": "x@example.com", "password": "` + testPassword + `"}`, "first_name"},
		{"/v1/auth/register", `[]`, ""},
		{"/v1/auth/register", ``, ""},
		{"/v1/orders", `{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python", "total_cents": 1}`, "total_cents"},
		{"/v1/orders", `{"gpu_model": "rtx-a5000", "lots": "1", "duration_days": 3, "preset": "python"}`, "lots"},
		{"/v1/orders", `not json`, ""},
		{"/v1/topups", `{"amount_cents": 10000, "amount_usd": "100"}`, "amount_usd"},
		{"/v1/topups", `{"amount_cents": 100.5}`, "amount_cents"},
	} {
		r := h.do("POST", tc.path, tc.body, c.auth)
		require.Equal(t, http.StatusBadRequest, r.Code, tc.body)
		require.Equal(t, "invalid_json", r.errCode(), tc.body)
		require.Equal(t, tc.field, r.errField(), tc.body)
		require.NotEmpty(t, r.obj("error")["message"])
	}
	require.Equal(t, accounts, h.count("accounts"))
	require.Equal(t, orders, h.count("orders"))
	require.Equal(t, topups, h.count("topups"))
	require.Zero(t, h.wf.total())
}

func TestBodyTooLarge(t *testing.T) {
	h := newHarness(t)
	c := h.register("big@example.com")
	big := `{"message": "` + strings.Repeat("x", 70<<10) + `"}`
	ref := h.order(c)
	r := h.do("POST", "/v1/orders/"+ref+"/support-requests", big, c.auth)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.Code)
	require.Equal(t, "body_too_large", r.errCode())

	// Without a declared length (chunked), the limit applies while reading.
	req := httptest.NewRequest("POST", "/v1/orders/"+ref+"/support-requests", strings.NewReader(big))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.auth.bearer)
	rec := httptest.NewRecorder()
	h.h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "body_too_large")
	require.Zero(t, h.count("support_requests"))

	// Just under the limit is fine (then refused on content).
	ok := `{"message": "` + strings.Repeat("y", 9000) + `"}`
	require.Equal(t, http.StatusCreated, h.do("POST", "/v1/orders/"+ref+"/support-requests", ok, c.auth).Code)
}

func TestOrderDetailShowsAccessOnlyOnceReady(t *testing.T) {
	h := newHarness(t)
	c := h.register("access@example.com")
	ref := h.order(c)
	r := h.do("GET", "/v1/orders/"+ref, nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code)
	_, has := r.body["access"]
	require.False(t, has)

	_, err := h.db.Exec(`INSERT INTO order_access (order_ref, host, port, username, password, gpu_model_seen,
		gpu_count_seen, driver_version, cuda_version) VALUES ($1, 'gpu7.kernodeck.test', 2222, 'kd', 's3cret', 'NVIDIA RTX A5000', 2, '550.54', '12.4')`, ref)
	require.NoError(t, err)
	_, err = h.db.Exec(`INSERT INTO timeline_events (ref, idem_key, kind, message) VALUES ($1, 'access', 'access_available', 'Accès disponible.')`, ref)
	require.NoError(t, err)
	r = h.do("GET", "/v1/orders/"+ref, nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code)
	acc := r.obj("access")
	require.Equal(t, "gpu7.kernodeck.test", acc["host"])
	require.Equal(t, "s3cret", acc["password"])
	require.EqualValues(t, 2, acc["gpu_count_seen"])
	require.Len(t, r.body["timeline"], 2)
}

func TestCancelAndPayFromBalanceGoThroughWorkflows(t *testing.T) {
	h := newHarness(t)
	c := h.register("pay@example.com")
	ref := h.order(c)

	// A balance that cannot cover the order is refused before the
	// workflow: the refusal writes no history.
	r := h.do("POST", "/v1/orders/"+ref+"/pay-from-balance", nil, c.auth)
	require.Equal(t, http.StatusConflict, r.Code)
	require.Equal(t, "insufficient_balance", r.errCode())
	require.Contains(t, r.obj("error")["message"], "ne couvre pas le total de la commande")
	require.Empty(t, h.wf.callsOf("PayFromBalance"))

	ctx := context.Background()
	tu, err := h.db.CreateTopUp(ctx, c.id, 10000)
	require.NoError(t, err)
	require.NoError(t, h.db.CreditTopUp(ctx, domain.CreditTopUpInput{TopUpRef: tu.Ref, AccountID: c.id, AmountCents: 10000, At: time.Now()}))
	h.wf.fail("PayFromBalance", domain.Errorf(domain.ECodeInsufficient, "Votre solde disponible ne couvre pas le total."))
	r = h.do("POST", "/v1/orders/"+ref+"/pay-from-balance", nil, c.auth)
	require.Equal(t, http.StatusConflict, r.Code)
	require.Equal(t, "insufficient_balance", r.errCode())
	require.Equal(t, "Votre solde disponible ne couvre pas le total.", r.obj("error")["message"])

	h.wf.fail("PayFromBalance", errors.New("dial tcp 127.0.0.1:7233: connection refused"))
	r = h.do("POST", "/v1/orders/"+ref+"/pay-from-balance", nil, c.auth)
	require.Equal(t, http.StatusServiceUnavailable, r.Code)
	require.Equal(t, "unavailable", r.errCode())
	require.NotContains(t, r.Body.String(), "7233", "internal details stay in the logs")

	h.wf.fail("PayFromBalance", nil)
	r = h.do("POST", "/v1/orders/"+ref+"/pay-from-balance", map[string]any{}, c.web)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Len(t, h.wf.callsOf("PayFromBalance"), 3)

	r = h.do("POST", "/v1/orders/"+ref+"/cancel", map[string]any{"reason": "erreur de modèle"}, c.auth)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	r = h.do("POST", "/v1/orders/"+ref+"/cancel", nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code)
	calls := h.wf.callsOf("CancelOrder")
	require.Len(t, calls, 2)
	require.Equal(t, workflows.CancelRequest{By: "customer", Reason: "erreur de modèle"}, calls[0].Arg)
	require.Equal(t, ref, calls[0].Ref)

	h.wf.fail("CancelOrder", domain.Errorf(domain.ECodeConflict, "Cette commande est déjà réglée."))
	r = h.do("POST", "/v1/orders/"+ref+"/cancel", nil, c.auth)
	require.Equal(t, http.StatusConflict, r.Code)
	require.Equal(t, "conflict", r.errCode())
}

func TestTopUpsAndBalance(t *testing.T) {
	h := newHarness(t)
	c := h.register("topup@example.com")
	for _, bad := range []int64{0, 100, 10001, 5000000} {
		r := h.do("POST", "/v1/topups", map[string]any{"amount_cents": bad}, c.auth)
		require.Equal(t, http.StatusBadRequest, r.Code)
		require.Equal(t, "amount_cents", r.errField())
	}
	require.Zero(t, h.count("topups"))

	r := h.do("POST", "/v1/topups", map[string]any{"amount_cents": 200000}, c.auth)
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	ref := r.obj("topup")["reference"].(string)
	require.Equal(t, "2000.00", r.obj("topup")["amount_usd"])
	calls := h.wf.callsOf("StartTopUp")
	require.Len(t, calls, 1)
	in := calls[0].Arg.(workflows.TopUpInput)
	require.Equal(t, workflows.TopUpInput{TopUpRef: ref, AccountID: c.id, AmountCents: 200000}, in)
	stored, err := h.db.GetTopUp(context.Background(), ref)
	require.NoError(t, err)
	require.NotNil(t, stored.WorkflowStartedAt)

	r = h.do("GET", "/v1/topups/"+ref, nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code)
	require.Len(t, r.body["timeline"], 1)
	r = h.do("GET", "/v1/topups", nil, c.auth)
	require.Len(t, r.body["topups"], 1)

	r = h.do("GET", "/v1/balance", nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code)
	require.EqualValues(t, 0, r.body["available_cents"])
	require.EqualValues(t, 200000, r.body["pending_topups_cents"])
	require.Equal(t, "2000.00", r.body["pending_topups_usd"])
}

func TestSupportRequests(t *testing.T) {
	h := newHarness(t)
	c := h.register("help@example.com")
	ref := h.order(c)
	r := h.do("POST", "/v1/orders/"+ref+"/support-requests", map[string]any{"message": "  "}, c.auth)
	require.Equal(t, http.StatusBadRequest, r.Code)
	require.Equal(t, "message", r.errField())

	r = h.do("POST", "/v1/orders/"+ref+"/support-requests", map[string]any{
		"message": "Le GPU n'est pas vu", "launch_command": "python -c 'import torch; print(torch.cuda.is_available())'",
		"versions": "torch 2.5.1+cu124", "first_error": "False",
	}, c.web)
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	require.Equal(t, ref, r.body["order_reference"])
	require.Equal(t, "open", r.body["status"])

	r = h.do("GET", "/v1/orders/"+ref+"/support-requests", nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code)
	require.Len(t, r.body["support_requests"], 1)
}

func TestHealthzAndUnknownRoute(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/healthz", nil, auth{})
	require.Equal(t, http.StatusOK, r.Code)
	r = h.do("GET", "/v1/nope", nil, auth{})
	require.Equal(t, http.StatusNotFound, r.Code)
	require.Equal(t, "not_found", r.errCode())
}
