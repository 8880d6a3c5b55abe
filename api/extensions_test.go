package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
)

// A customer's extension through the API (issue 39, item 2): each refusal
// answers its stable code and French message, and changes nothing (no
// workflow call, no extension, no top-up); a crypto extension is reserved
// once per key with the top-up that takes its payment.
func TestExtensionRefusalsChangeNothing(t *testing.T) {
	h := newHarness(t)
	c := h.register("extend@example.com")
	ref := h.order(c)
	path := "/v1/orders/" + ref + "/extensions"
	nothing := func(step string) {
		t.Helper()
		require.Empty(t, h.wf.callsOf("Extend"), step)
		require.Zero(t, h.count("rental_extensions"), step)
		require.Zero(t, h.count("topups"), step)
	}
	ext := func(body map[string]any, a auth) resp {
		t.Helper()
		return h.do("POST", path, body, a)
	}

	// Unpaid: nothing may be added yet.
	r := h.do("GET", path, nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Equal(t, false, r.body["available"])
	require.Equal(t, domain.ECodeConflict, r.body["code"])
	r = ext(map[string]any{"days": 7, "method": "balance"}, c.auth)
	require.Equal(t, http.StatusConflict, r.Code, r.Body.String())
	require.Equal(t, domain.ECodeConflict, r.errCode())
	nothing("unpaid")

	// Active, ending in two days.
	end := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	_, err := h.db.Exec(`UPDATE orders SET status = 'active', period_start = now(), period_end = $2 WHERE ref = $1`, ref, end)
	require.NoError(t, err)
	r = h.do("GET", path, nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Equal(t, true, r.body["available"], r.Body.String())
	offers := r.body["offers"].([]any)
	require.Len(t, offers, 3)
	seven := offers[1].(map[string]any)
	require.EqualValues(t, 7, seven["days"])
	require.EqualValues(t, 2*5500, seven["amount_cents"], "the catalog's 7-day lot price (55 USD) × 2 lots")
	require.Equal(t, end.Add(7*24*time.Hour).Format(time.RFC3339), seven["new_period_end"])

	for _, bad := range []struct {
		body  map[string]any
		a     auth
		field string
	}{
		{map[string]any{"days": 5, "method": "balance"}, c.auth, "days"},
		{map[string]any{"days": 7, "method": "card"}, c.auth, "method"},
		{map[string]any{"days": 7, "method": "balance", "amount_cents": -1}, c.auth, "amount_cents"},
		{map[string]any{"days": 7, "method": "balance"}, auth{bearer: c.auth.bearer, key: noKey}, "idempotency_key"},
	} {
		r = ext(bad.body, bad.a)
		require.Equal(t, http.StatusBadRequest, r.Code, r.Body.String())
		require.Equal(t, domain.ECodeInvalid, r.errCode())
		require.Equal(t, bad.field, r.errField())
	}
	r = ext(map[string]any{"days": 7, "method": "balance"}, c.auth)
	require.Equal(t, http.StatusConflict, r.Code, r.Body.String())
	require.Equal(t, domain.ECodeInsufficient, r.errCode())
	require.Contains(t, r.body["error"].(map[string]any)["message"], "ne couvre pas la prolongation")
	r = ext(map[string]any{"days": 7, "method": "crypto", "amount_cents": 9999}, c.auth)
	require.Equal(t, http.StatusConflict, r.Code, r.Body.String())
	require.Equal(t, domain.ECodeConflict, r.errCode(), "a price other than the one shown")
	nothing("refusals")

	// The machine leaves service (the local inventory below what is held).
	_, err = h.db.Exec(`UPDATE gpu_inventory SET total_gpus = 1 WHERE gpu_model = 'rtx-a5000'`)
	require.NoError(t, err)
	_, err = h.db.Exec(`INSERT INTO gpu_reservations (order_ref, gpu_model, gpus, state) VALUES ($1, 'rtx-a5000', 2, 'reserved')`, ref)
	require.NoError(t, err)
	r = h.do("GET", path, nil, c.auth)
	require.Equal(t, domain.ECodeExtensionUnavailable, r.body["code"], r.Body.String())
	r = ext(map[string]any{"days": 3, "method": "crypto"}, c.auth)
	require.Equal(t, http.StatusConflict, r.Code, r.Body.String())
	require.Equal(t, domain.ECodeExtensionUnavailable, r.errCode())
	nothing("machine gone")
	_, err = h.db.Exec(`UPDATE gpu_inventory SET total_gpus = 8 WHERE gpu_model = 'rtx-a5000'`)
	require.NoError(t, err)

	// Another customer's order is not found.
	other := h.register("other@example.com")
	r = ext(map[string]any{"days": 3, "method": "crypto"}, other.auth)
	require.Equal(t, http.StatusNotFound, r.Code, r.Body.String())
	nothing("another's order")

	// By crypto: reserved with its top-up, once per key.
	key := auth{bearer: c.auth.bearer, key: "extension-key-0001"}
	r = ext(map[string]any{"days": 3, "method": "crypto", "amount_cents": 2 * 2357}, key)
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	x := r.obj("extension")
	require.Equal(t, domain.ExtensionReserved, x["state"])
	require.EqualValues(t, 2*2357, x["amount_cents"])
	tu := x["topup_reference"].(string)
	r = ext(map[string]any{"days": 3, "method": "crypto"}, key)
	require.Equal(t, http.StatusCreated, r.Code, r.Body.String())
	require.Equal(t, x["reference"], r.obj("extension")["reference"], "the same key is the same extension")
	require.Equal(t, 1, h.count("topups"))
	require.Equal(t, 1, h.count("rental_extensions"))
	starts := h.wf.callsOf("StartTopUp")
	require.Len(t, starts, 1)
	r = h.do("GET", "/v1/topups/"+tu, nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.EqualValues(t, 2*2357, r.obj("topup")["amount_cents"])
	require.Equal(t, ref, r.obj("topup")["extension_order_reference"])

	// The same key for another extension, and a second extension while
	// the first awaits its payment, are refused.
	r = ext(map[string]any{"days": 7, "method": "crypto"}, key)
	require.Equal(t, domain.ECodeIdempotencyKeyReused, r.errCode(), r.Body.String())
	r = ext(map[string]any{"days": 7, "method": "crypto"}, c.auth)
	require.Equal(t, http.StatusConflict, r.Code, r.Body.String())
	require.Equal(t, domain.ECodeConflict, r.errCode())
	require.Equal(t, 1, h.count("rental_extensions"))
	require.Empty(t, h.wf.callsOf("Extend"))

	// Ending, then ended: nothing more may be added.
	for _, status := range []string{domain.StatusEnding, domain.StatusEnded} {
		_, err = h.db.Exec(`UPDATE orders SET status = $2 WHERE ref = $1`, ref, status)
		require.NoError(t, err)
		r = ext(map[string]any{"days": 3, "method": "balance"}, c.auth)
		require.Equal(t, http.StatusConflict, r.Code, r.Body.String())
		require.Equal(t, domain.ECodeConflict, r.errCode(), status)
		require.Contains(t, r.body["error"].(map[string]any)["message"], "ne peut pas être prolongée")
	}
	require.Equal(t, 1, h.count("rental_extensions"))
	require.Empty(t, h.wf.callsOf("Extend"))
}
