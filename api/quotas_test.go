package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// quotaCounter is the metrics' request observer as the API sees it: it
// counts quota refusals by quota.
type quotaCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (q *quotaCounter) ObserveRequest(string, string, int, time.Duration) {}

func (q *quotaCounter) QuotaRefused(quota string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.n[quota]++
}

func (q *quotaCounter) count(quota string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n[quota]
}

// intentWorkflows answers payment requests with a plausible open request
// (the harness's fake answers an empty one).
type intentWorkflows struct{ *fakeWorkflows }

func (w intentWorkflows) intent(kind, ref string, req workflows.IntentRequest) domain.Intent {
	now := time.Now()
	return domain.Intent{ID: "PI-" + ref[3:], TargetKind: kind, TargetRef: ref, Asset: req.Asset, Network: req.Network,
		Decimals: 8, Rate: "65000", RateSource: "test", RateAt: now, Address: "bc1qtest", PaymentURI: "bitcoin:bc1qtest",
		Deadline: now.Add(time.Hour), Status: "open", CreatedAt: now}
}

func (w intentWorkflows) CreateOrderIntent(ctx context.Context, ref string, req workflows.IntentRequest) (domain.Intent, error) {
	_, err := w.fakeWorkflows.CreateOrderIntent(ctx, ref, req)
	return w.intent("order", ref, req), err
}

func (w intentWorkflows) CreateTopUpIntent(ctx context.Context, ref string, req workflows.IntentRequest) (domain.Intent, error) {
	_, err := w.fakeWorkflows.CreateTopUpIntent(ctx, ref, req)
	return w.intent("topup", ref, req), err
}

// quotaHarness is a harness whose quotas are set by set (the others stay
// out of the way) and whose refusals are counted.
func quotaHarness(t *testing.T, set func(*api.Quotas)) (*harness, *quotaCounter) {
	qc := &quotaCounter{n: map[string]int{}}
	h := newHarness(t, func(c *api.Config, d *api.Deps) {
		set(&c.Quotas)
		d.Requests, d.Quotas = qc, qc
		d.Workflows = intentWorkflows{d.Workflows.(*fakeWorkflows)}
	})
	return h, qc
}

// everything counts the rows of every table a request may write, the
// quotas' own included: a refused request changes none of them.
func (h *harness) everything() map[string]int {
	h.t.Helper()
	out := h.counts()
	for _, t := range []string{"mail_outbox", "quota_uses", "live_streams", "capacity_holds"} {
		out[t] = h.count(t)
	}
	return out
}

// requireQuota checks r is a quota's refusal: 429, the code, a French
// message saying how long to wait, and a Retry-After of about retry.
func requireQuota(t *testing.T, r resp, code string, retry time.Duration) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, r.Code, r.Body.String())
	require.Equal(t, code, r.errCode())
	require.Contains(t, r.obj("error")["message"], "Réessayez dans ")
	secs, err := strconv.Atoi(r.Header().Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", r.Header().Get("Retry-After"))
	require.InDelta(t, retry.Seconds(), float64(secs), 60, "Retry-After %d s", secs)
}

// Unpaid orders per account: past the limit, 429 with Retry-After (when
// the oldest one's payment window ends) and no order, timeline entry or
// mail; 10 orders at once with room for 2 create exactly 2.
func TestQuotaUnpaidOrdersPerAccount(t *testing.T) {
	h, qc := quotaHarness(t, func(q *api.Quotas) { q.UnpaidOrdersPerAccount = 2 })
	c := h.register("orders@example.com")
	h.order(c)
	h.order(c)
	before := h.everything()
	r := h.do("POST", "/v1/orders", map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"}, c.auth)
	requireQuota(t, r, "quota_exceeded", 24*time.Hour)
	require.Contains(t, r.obj("error")["message"], "2 commandes en attente de paiement")
	require.Equal(t, before, h.everything())
	require.Len(t, h.wf.callsOf("StartRental"), 2, "no workflow for the refused order")
	require.Equal(t, 1, qc.count(domain.QuotaUnpaidOrders))

	// A paid order no longer counts; another account has its own quota.
	_, err := h.db.Exec(`UPDATE orders SET status = 'paid' WHERE account_id = $1`, c.id)
	require.NoError(t, err)
	other := h.register("orders2@example.com")
	var wg sync.WaitGroup
	codes := make([]int, 10)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = h.do("POST", "/v1/orders", map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"},
				[]auth{c.auth, other.auth}[i%2]).Code
		}()
	}
	wg.Wait()
	created := 0
	for _, code := range codes {
		if code == http.StatusCreated {
			created++
		} else {
			require.Equal(t, http.StatusTooManyRequests, code)
		}
	}
	require.Equal(t, 4, created, "2 each, decided one after the other: %v", codes)
	var unpaid int
	require.NoError(t, h.db.Get(&unpaid, `SELECT count(*) FROM orders WHERE status = 'awaiting_payment' AND account_id = $1`, c.id))
	require.Equal(t, 2, unpaid)
}

// Open top-ups per account: the second unpaid top-up is refused, nothing
// written; once the first is credited, a new one is accepted.
func TestQuotaOpenTopUpsPerAccount(t *testing.T) {
	h, qc := quotaHarness(t, func(q *api.Quotas) { q.OpenTopUpsPerAccount = 1 })
	c := h.register("topups@example.com")
	require.Equal(t, http.StatusCreated, h.do("POST", "/v1/topups", map[string]any{"amount_cents": 10000}, c.auth).Code)
	before := h.everything()
	r := h.do("POST", "/v1/topups", map[string]any{"amount_cents": 50000}, c.auth)
	requireQuota(t, r, "quota_exceeded", 24*time.Hour)
	require.Contains(t, r.obj("error")["message"], "1 recharge en attente de paiement")
	require.Equal(t, before, h.everything())
	require.Len(t, h.wf.callsOf("StartTopUp"), 1)
	require.Equal(t, 1, qc.count(domain.QuotaOpenTopUps))

	_, err := h.db.Exec(`UPDATE topups SET status = 'credited' WHERE account_id = $1`, c.id)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, h.do("POST", "/v1/topups", map[string]any{"amount_cents": 50000}, c.auth).Code)
}

// Payment requests per order, and per top-up, per hour: the ask past the
// limit is refused before the workflow is asked (no history written).
func TestQuotaPaymentRequestsPerHour(t *testing.T) {
	h, qc := quotaHarness(t, func(q *api.Quotas) { q.PaymentRequestsPerHour = 2 })
	c := h.register("intents@example.com")
	ref := h.order(c)
	body := map[string]any{"asset": "BTC", "network": "bitcoin"}
	for range 2 {
		require.Equal(t, http.StatusCreated, h.do("POST", "/v1/orders/"+ref+"/payment-intents", body, c.auth).Code)
	}
	before := h.everything()
	r := h.do("POST", "/v1/orders/"+ref+"/payment-intents", body, c.auth)
	requireQuota(t, r, "quota_exceeded", time.Hour)
	require.Equal(t, before, h.everything())
	require.Len(t, h.wf.callsOf("CreateOrderIntent"), 2, "the workflow was not asked")
	require.Equal(t, 1, qc.count(domain.QuotaOrderPaymentRequests))
	// Another order of the same account has its own count.
	require.Equal(t, http.StatusCreated, h.do("POST", "/v1/orders/"+h.order(c)+"/payment-intents", body, c.auth).Code)

	tr := h.do("POST", "/v1/topups", map[string]any{"amount_cents": 10000}, c.auth)
	require.Equal(t, http.StatusCreated, tr.Code, tr.Body.String())
	top := tr.obj("topup")["reference"].(string)
	for range 2 {
		require.Equal(t, http.StatusCreated, h.do("POST", "/v1/topups/"+top+"/payment-intents", body, c.auth).Code)
	}
	before = h.everything()
	requireQuota(t, h.do("POST", "/v1/topups/"+top+"/payment-intents", body, c.auth), "quota_exceeded", time.Hour)
	require.Equal(t, before, h.everything())
	require.Len(t, h.wf.callsOf("CreateTopUpIntent"), 2)
	require.Equal(t, 1, qc.count(domain.QuotaTopUpPaymentRequests))
}

// "J'ai payé" once per payment request: a second claim (or 20 at once)
// answers the same and writes nothing: no claim, no timeline entry (so no
// open stream wakes up).
func TestOneClaimPerPaymentRequest(t *testing.T) {
	h, qc := quotaHarness(t, func(*api.Quotas) {})
	c := h.register("claims@example.com")
	ref := h.order(c)
	_, err := h.db.Exec(`INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals,
		amount_base, usd_cents, rate, rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until, request_key)
		VALUES ('PI-CLAIMONCE', 'order', $1, $2, 'BTC', 'bitcoin', 8, 36262, 2357, 65000, 'test', now(), 'bc1qclaim', 7,
			'bitcoin:x', now() + interval '1 hour', now() + interval '25 hours', 'intent:1')`, ref, c.id)
	require.NoError(t, err)
	first := h.do("POST", "/v1/payment-intents/PI-CLAIMONCE/claim", nil, c.auth)
	require.Equal(t, http.StatusOK, first.Code, first.Body.String())
	before := h.everything()
	again := h.do("POST", "/v1/payment-intents/PI-CLAIMONCE/claim", nil, c.auth)
	require.Equal(t, http.StatusOK, again.Code)
	require.Equal(t, first.body["message"], again.body["message"])
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.do("POST", "/v1/payment-intents/PI-CLAIMONCE/claim", nil, c.web)
		}()
	}
	wg.Wait()
	require.Equal(t, before, h.everything())
	require.Equal(t, 1, h.count("payment_claims"))
	require.Equal(t, 21, qc.count(domain.QuotaClaims))
}

// Support requests: per order and per account within a day; past either,
// 429 with the wait until the oldest counted one is a day old.
func TestQuotaSupportRequestsPerDay(t *testing.T) {
	h, qc := quotaHarness(t, func(q *api.Quotas) { q.SupportRequestsPerOrderDay = 2; q.SupportRequestsPerDay = 3 })
	c := h.register("support@example.com")
	a, b, d := h.order(c), h.order(c), h.order(c)
	send := func(ref string) resp {
		return h.do("POST", "/v1/orders/"+ref+"/support-requests", map[string]any{"message": "Le GPU n'apparaît pas."}, c.auth)
	}
	require.Equal(t, http.StatusCreated, send(a).Code)
	require.Equal(t, http.StatusCreated, send(a).Code)
	before := h.everything()
	r := send(a)
	requireQuota(t, r, "quota_exceeded", 24*time.Hour)
	require.Contains(t, r.obj("error")["message"], "sur cette commande")
	require.Equal(t, before, h.everything())
	require.Equal(t, 1, qc.count(domain.QuotaSupportPerOrder))

	require.Equal(t, http.StatusCreated, send(b).Code)
	before = h.everything()
	r = send(d)
	requireQuota(t, r, "quota_exceeded", 24*time.Hour)
	require.Contains(t, r.obj("error")["message"], "3 demandes au support aujourd'hui")
	require.Equal(t, before, h.everything())
	require.Equal(t, 1, qc.count(domain.QuotaSupportPerAccount))

	// A day later (the requests' clock moved back) they may write again.
	_, err := h.db.Exec(`UPDATE support_requests SET created_at = created_at - interval '24 hours 1 minute'`)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, send(d).Code)
}

// Registrations per network: an IPv6 client counts per /56, so other /64s
// of the same /56 are the same network; the next /56 is another.
func TestQuotaRegistrationsPerNetworkSlash56(t *testing.T) {
	qc := &quotaCounter{n: map[string]int{}}
	h := newHarness(t, func(c *api.Config, d *api.Deps) { c.RegistrationsPerIP = 2; d.Requests, d.Quotas = qc, qc })
	reg := func(i int, ip string) resp {
		return h.do("POST", "/v1/auth/register", map[string]any{"first_name": "A", "last_name": "B",
			"email": fmt.Sprintf("net%d@example.com", i), "password": testPassword}, auth{ip: ip})
	}
	require.Equal(t, http.StatusCreated, reg(0, "2001:db8:5:1::1").Code)
	require.Equal(t, http.StatusCreated, reg(1, "2001:db8:5:2::1").Code)
	before := h.everything()
	r := reg(2, "2001:db8:5:ff::1")
	require.Equal(t, http.StatusTooManyRequests, r.Code)
	require.NotEmpty(t, r.Header().Get("Retry-After"))
	require.Equal(t, before, h.everything())
	require.Equal(t, 1, qc.count(domain.QuotaRegistrations))
	require.Equal(t, http.StatusCreated, reg(3, "2001:db8:5:100::1").Code)
}

// 300 live streams opened at once on one session: exactly the per-session
// limit are served, the others get 429 with Retry-After; another session
// of the account is then bounded by the per-account limit. Closed streams
// give their places back.
func TestLiveStreamsPerSessionAndAccount(t *testing.T) {
	h, qc := quotaHarness(t, func(q *api.Quotas) { q.StreamsPerSession = 10; q.StreamsPerAccount = 15 })
	c := h.register("streams@example.com")
	ref := h.order(c)
	ts := httptest.NewServer(h.h)
	defer ts.Close()
	defer h.srv.CloseStreams()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	open := func(a auth) *http.Response {
		req, err := http.NewRequestWithContext(ctx, "GET", ts.URL+"/v1/orders/"+ref+"/events", nil)
		require.NoError(t, err)
		if a.bearer != "" {
			req.Header.Set("Authorization", "Bearer "+a.bearer)
		} else {
			req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: a.cookie})
		}
		res, err := ts.Client().Do(req)
		require.NoError(t, err)
		return res
	}
	var (
		mu     sync.Mutex
		served []*http.Response
		codes  = map[int]int{}
		wg     sync.WaitGroup
	)
	ts.Client().Transport.(*http.Transport).MaxConnsPerHost = 0
	for range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := open(c.auth)
			mu.Lock()
			defer mu.Unlock()
			codes[res.StatusCode]++
			if res.StatusCode == http.StatusOK {
				served = append(served, res)
				return
			}
			require.NotEmpty(t, res.Header.Get("Retry-After"))
			_ = res.Body.Close()
		}()
	}
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusOK: 10, http.StatusTooManyRequests: 290}, codes)
	require.Equal(t, 10, h.count("live_streams"))
	require.Equal(t, 290, qc.count(domain.QuotaStreamsPerSession))

	// The cookie session is another session of the same account: 5 more.
	for range 5 {
		res := open(c.web)
		require.Equal(t, http.StatusOK, res.StatusCode)
		served = append(served, res)
	}
	res := open(c.web)
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	_ = res.Body.Close()
	require.Equal(t, 1, qc.count(domain.QuotaStreamsPerAccount))

	// Closing the streams gives their places back.
	for _, res := range served {
		_ = res.Body.Close()
	}
	require.Eventually(t, func() bool { return h.count("live_streams") == 0 }, 10*time.Second, 20*time.Millisecond)
	res = open(c.auth)
	require.Equal(t, http.StatusOK, res.StatusCode)
	_ = res.Body.Close()
}
