package api_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/workflows"
)

// extendingWorkflows applies an extension as the rental workflow's
// transition writes it (the period's end moved, in PostgreSQL), once per
// action ID as the workflow does; release, when set, holds each Extend
// until it is closed.
type extendingWorkflows struct {
	*fakeWorkflows
	db      *postgres.DB
	started chan struct{}
	release chan struct{}
}

func (f *extendingWorkflows) Extend(ctx context.Context, ref string, e workflows.Extension) error {
	if err := f.fakeWorkflows.Extend(ctx, ref, e); err != nil {
		return err
	}
	if f.release != nil {
		select {
		case f.started <- struct{}{}:
		default: // not the first: nobody waits for it
		}
		select {
		case <-f.release:
		case <-time.After(5 * time.Second):
		}
	}
	o, err := f.db.GetOrder(ctx, ref)
	if err != nil {
		return err
	}
	end := o.PeriodEnd.Add(time.Duration(e.Days) * 24 * time.Hour)
	return f.db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: ref, Key: domain.KeyExtend(e.ActionID),
		Kind: domain.EventExtended, Message: "Location prolongée.", At: time.Now(), PeriodEnd: &end})
}

// newExtendingHarness is a harness whose workflows apply extensions, with
// an active order whose period ends on the 14th.
func newExtendingHarness(t *testing.T) (*harness, *extendingWorkflows, string) {
	t.Helper()
	var wf *extendingWorkflows
	h := newDBHarness(t, func(db *postgres.DB, _ *api.Config, d *api.Deps) {
		wf = &extendingWorkflows{fakeWorkflows: d.Workflows.(*fakeWorkflows), db: db}
		d.Workflows = wf
	})
	ref := h.order(h.register("twice@example.com"))
	_, err := h.db.Exec(`UPDATE orders SET status = 'active', period_start = '2031-01-11 12:00Z', period_end = '2031-01-14 12:00Z' WHERE ref = $1`, ref)
	require.NoError(t, err)
	return h, wf, ref
}

func (h *harness) periodEnd(ref string) time.Time {
	h.t.Helper()
	o, err := h.db.GetOrder(context.Background(), ref)
	require.NoError(h.t, err)
	return o.PeriodEnd.UTC()
}

// The same extension sent twice under one key is carried out once: one
// audit row, one workflow update, the end moved from the 14th to the 15th
// only, and the second request gets the first one's answer, byte for byte.
func TestSupportActionKeySentTwiceRunsOnce(t *testing.T) {
	h, wf, ref := newExtendingHarness(t)
	key := auth{bearer: agentToken, key: "ext-once-0123456789"}
	body := map[string]any{"reason": "panne du nœud pendant une journée", "days": 1}

	first := h.do("POST", "/v1/support/orders/"+ref+"/extend", body, key)
	require.Equal(t, http.StatusOK, first.Code, first.Body.String())
	require.Empty(t, first.Header().Get(api.ReplayedHeader))
	again := h.do("POST", "/v1/support/orders/"+ref+"/extend", body, key)
	require.Equal(t, http.StatusOK, again.Code, again.Body.String())
	require.Equal(t, first.Body.String(), again.Body.String())
	require.Equal(t, "true", again.Header().Get(api.ReplayedHeader))

	require.Len(t, wf.callsOf("Extend"), 1)
	require.Equal(t, 1, h.count("support_actions"))
	require.Equal(t, time.Date(2031, 1, 15, 12, 0, 0, 0, time.UTC), h.periodEnd(ref))
	var done int
	require.NoError(t, h.db.Get(&done, `SELECT count(*) FROM support_actions WHERE outcome = 'done' AND idempotency_key = $1`, key.key))
	require.Equal(t, 1, done)

	// Another agent's key is another key; a new key is a new extension.
	r := h.do("POST", "/v1/support/orders/"+ref+"/extend", body, agent)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Len(t, wf.callsOf("Extend"), 2)
	require.Equal(t, time.Date(2031, 1, 16, 12, 0, 0, 0, time.UTC), h.periodEnd(ref))
}

// A refusal and a failure are answered again as they were first (same
// status and body), without asking the workflow again.
func TestSupportActionKeyReplaysRefusalAndFailure(t *testing.T) {
	h := newHarness(t)
	ref := h.order(h.register("replay@example.com"))
	for _, tc := range []struct {
		path   string
		err    error
		status int
	}{
		{"end-early", domain.Errorf(domain.ECodeConflict, "Seule une location active peut être terminée par anticipation."), http.StatusConflict},
		{"retry-provisioning", context.DeadlineExceeded, http.StatusServiceUnavailable},
	} {
		method := map[string]string{"end-early": "EndEarly", "retry-provisioning": "RetryProvisioning"}[tc.path]
		h.wf.fail(method, tc.err)
		a := auth{bearer: agentToken, key: "replay-" + tc.path}
		first := h.do("POST", "/v1/support/orders/"+ref+"/"+tc.path, map[string]any{"reason": "demande du client"}, a)
		require.Equal(t, tc.status, first.Code, first.Body.String())
		h.wf.fail(method, nil) // the workflow would accept it now: it is not asked
		again := h.do("POST", "/v1/support/orders/"+ref+"/"+tc.path, map[string]any{"reason": "demande du client"}, a)
		require.Equal(t, tc.status, again.Code, again.Body.String())
		require.Equal(t, first.Body.String(), again.Body.String())
		require.Len(t, h.wf.callsOf(method), 1, tc.path)
	}
	require.Equal(t, 2, h.count("support_actions"))
}

// The key sent with another action, target, reason or parameters is
// refused (409, stable code, French message) and nothing is carried out.
func TestSupportActionKeyReusedForAnotherAction(t *testing.T) {
	h, wf, ref := newExtendingHarness(t)
	other := h.order(h.register("other@example.com"))
	a := auth{bearer: agentToken, key: "reused-key-0123456789"}
	r := h.do("POST", "/v1/support/orders/"+ref+"/extend", map[string]any{"reason": "panne", "days": 1}, a)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/support/orders/" + ref + "/end-early", map[string]any{"reason": "panne"}},
		{"/v1/support/orders/" + ref + "/extend", map[string]any{"reason": "panne", "days": 2}},
		{"/v1/support/orders/" + ref + "/extend", map[string]any{"reason": "autre raison", "days": 1}},
		{"/v1/support/orders/" + other + "/extend", map[string]any{"reason": "panne", "days": 1}},
	} {
		r := h.do("POST", tc.path, tc.body, a)
		require.Equal(t, http.StatusConflict, r.Code, r.Body.String())
		require.Equal(t, "idempotency_key_reused", r.errCode())
		require.Equal(t, "extend", r.obj("action")["action"], "the action the key was used for")
		require.Contains(t, r.Body.String(), "Cette clé d'idempotence a déjà servi pour une autre action")
	}
	require.Equal(t, 1, h.count("support_actions"))
	require.Len(t, wf.callsOf("Extend"), 1)
	require.Empty(t, wf.callsOf("EndEarly"))
	require.Equal(t, time.Date(2031, 1, 15, 12, 0, 0, 0, time.UTC), h.periodEnd(ref))
}

// Every support action needs its key: without it (or malformed), 400
// invalid with a French message, nothing recorded nor carried out.
func TestSupportActionKeyRequired(t *testing.T) {
	h := newHarness(t, withRoles(agentName, domain.RoleOperator)) // close-host-flag's

	c := h.register("nokey@example.com")
	ref := h.order(c)
	tu := h.do("POST", "/v1/topups", map[string]any{"amount_cents": 50000}, c.auth).obj("topup")["reference"].(string)
	require.NoError(t, h.db.RecordOrderEvent(context.Background(), domain.OrderEvent{OrderRef: ref, Key: "late-nokey",
		Kind: domain.EventPaymentToSupport, Message: "Paiement en retard : transmis au support.", At: time.Now(),
		Exceptions: []domain.NewException{{Reason: domain.ExceptionLate, PaymentKey: "bitcoin:nokeytx:0", Network: "bitcoin",
			TxID: "nokeytx", Asset: "BTC", AmountBase: "1000", AmountCents: 100}}}))
	calls := h.wf.total()
	var exc string
	require.NoError(t, h.db.Get(&exc, `SELECT id::text FROM payment_exceptions`))
	reason := map[string]any{"reason": "demande du client"}
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/orders/" + ref + "/attribute-payment", reason},
		{"/orders/" + ref + "/extend", map[string]any{"reason": "panne", "days": 1}},
		{"/orders/" + ref + "/end-early", reason},
		{"/orders/" + ref + "/retry-provisioning", reason},
		{"/orders/" + ref + "/cancel", reason},
		{"/orders/" + ref + "/refund", map[string]any{"reason": "geste", "amount_cents": 100}},
		{"/orders/" + ref + "/close-host-flag", reason},
		{"/topups/" + tu + "/attribute-payment", reason},
		{"/topups/" + tu + "/cancel", reason},
		{"/exceptions/" + exc + "/refund", reason},
		{"/exceptions/" + exc + "/count", reason},
		{"/exceptions/" + exc + "/resolve", reason},
		{"/exceptions/" + exc + "/value", map[string]any{"reason": "cours", "amount_cents": 100}},
	} {
		for _, key := range []string{noKey, "short", "has space in it", "é-accentuée-0123"} {
			r := h.do("POST", "/v1/support"+tc.path, tc.body, auth{bearer: agentToken, key: key})
			require.Equal(t, http.StatusBadRequest, r.Code, "%s %q: %s", tc.path, key, r.Body.String())
			require.Equal(t, "invalid", r.errCode())
			require.Equal(t, "idempotency_key", r.errField())
			require.Contains(t, r.Body.String(), "Indiquez une clé d'idempotence dans l'en-tête Idempotency-Key")
		}
	}
	require.Zero(t, h.count("support_actions"))
	require.Equal(t, calls, h.wf.total(), "no workflow asked")
}

// A request sent again while the first one with its key runs is told it
// is in progress (202), and nothing runs twice.
func TestSupportActionKeyInProgress(t *testing.T) {
	h, wf, ref := newExtendingHarness(t)
	wf.started, wf.release = make(chan struct{}, 1), make(chan struct{})
	a := auth{bearer: agentToken, key: "in-progress-0123456789"}
	body := map[string]any{"reason": "panne", "days": 1}
	var wg sync.WaitGroup
	var first resp
	wg.Go(func() { first = h.do("POST", "/v1/support/orders/"+ref+"/extend", body, a) })
	<-wf.started
	r := h.do("POST", "/v1/support/orders/"+ref+"/extend", body, a)
	require.Equal(t, http.StatusAccepted, r.Code, r.Body.String())
	require.Equal(t, "in_progress", r.errCode())
	require.Contains(t, r.Body.String(), "est en cours : elle n'est pas exécutée une deuxième fois")
	require.Nil(t, r.obj("action")["outcome"])
	close(wf.release)
	wg.Wait()
	require.Equal(t, http.StatusOK, first.Code, first.Body.String())
	require.Len(t, wf.callsOf("Extend"), 1)
	require.Equal(t, time.Date(2031, 1, 15, 12, 0, 0, 0, time.UTC), h.periodEnd(ref))
	// Once done, the key answers the outcome.
	r = h.do("POST", "/v1/support/orders/"+ref+"/extend", body, a)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Equal(t, first.Body.String(), r.Body.String())
}
