package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An unpaid order's JSON says whether a machine is held for it and until
// when, read live from its capacity hold (for the bearer read and the
// cookie session's one-statement read alike): nothing held, then held,
// then lapsed; once paid the field is gone.
func TestOrderSaysWhetherAMachineIsHeld(t *testing.T) {
	h := newHarness(t)
	c := h.register("held@example.com")
	ref := h.order(c)
	hold := func(a auth) map[string]any {
		t.Helper()
		r := h.do("GET", "/v1/orders/"+ref, nil, a)
		require.Equal(t, http.StatusOK, r.Code, r.Body.String())
		mh, _ := r.body["machine_hold"].(map[string]any)
		return mh
	}
	for _, a := range []auth{c.auth, c.web} {
		require.Equal(t, map[string]any{"held": false}, hold(a))
	}

	until := time.Now().Add(20 * time.Minute).UTC().Truncate(time.Microsecond)
	_, err := h.db.Exec(`INSERT INTO capacity_holds (order_ref, gpu_model, gpus, held_until) VALUES ($1, 'rtx-a5000', 2, $2)`, ref, until)
	require.NoError(t, err)
	for _, a := range []auth{c.auth, c.web} {
		mh := hold(a)
		require.Equal(t, true, mh["held"])
		at, err := time.Parse(time.RFC3339Nano, mh["until"].(string))
		require.NoError(t, err)
		require.True(t, until.Equal(at), "until %s, want %s", at, until)
	}

	_, err = h.db.Exec(`UPDATE capacity_holds SET held_until = now() - interval '1 second' WHERE order_ref = $1`, ref)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"held": false}, hold(c.auth), "a lapsed hold holds nothing")

	_, err = h.db.Exec(`UPDATE orders SET status = 'paid', paid_at = now() WHERE ref = $1`, ref)
	require.NoError(t, err)
	require.Nil(t, hold(c.auth), "a paid order says nothing of holds")
}
