package api_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/secrets"
	"github.com/kernodeck/kernodeck/workflows"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
}

const (
	agentToken    = "agent-alice-token-0123456789abcdef"
	agentName     = "alice"
	testPassword  = "correct horse battery staple"
	csrfHeaderKey = "X-CSRF-Token"
)

// fakeWorkflows records the calls the API makes. It is not the real thing:
// it changes nothing in the database. errs[method] is returned when set.
type fakeWorkflows struct {
	mu    sync.Mutex
	calls []wfCall
	errs  map[string]error
	// refundable answers Refundable (the status query's RefundableCents).
	refundable int64
}

type wfCall struct {
	Method string
	Ref    string
	Arg    any
}

func newFakeWorkflows() *fakeWorkflows { return &fakeWorkflows{errs: map[string]error{}} }

func (f *fakeWorkflows) record(method, ref string, arg any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, wfCall{Method: method, Ref: ref, Arg: arg})
	return f.errs[method]
}

func (f *fakeWorkflows) fail(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[method] = err
}

func (f *fakeWorkflows) callsOf(method string) []wfCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []wfCall
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeWorkflows) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeWorkflows) StartRental(_ context.Context, in workflows.RentalInput) error {
	return f.record("StartRental", in.OrderRef, in)
}
func (f *fakeWorkflows) StartTopUp(_ context.Context, in workflows.TopUpInput) error {
	return f.record("StartTopUp", in.TopUpRef, in)
}
func (f *fakeWorkflows) PayFromBalance(_ context.Context, ref string) error {
	return f.record("PayFromBalance", ref, nil)
}
func (f *fakeWorkflows) CancelOrder(_ context.Context, ref string, r workflows.CancelRequest) error {
	return f.record("CancelOrder", ref, r)
}
func (f *fakeWorkflows) CancelTopUp(_ context.Context, ref string, r workflows.CancelRequest) error {
	return f.record("CancelTopUp", ref, r)
}
func (f *fakeWorkflows) AttributeOrderPayment(_ context.Context, ref string, a workflows.Attribution) error {
	return f.record("AttributeOrderPayment", ref, a)
}
func (f *fakeWorkflows) AttributeTopUpPayment(_ context.Context, ref string, a workflows.Attribution) error {
	return f.record("AttributeTopUpPayment", ref, a)
}
func (f *fakeWorkflows) Extend(_ context.Context, ref string, e workflows.Extension) error {
	return f.record("Extend", ref, e)
}
func (f *fakeWorkflows) EndEarly(_ context.Context, ref string, a workflows.SupportAction) error {
	return f.record("EndEarly", ref, a)
}
func (f *fakeWorkflows) RetryProvisioning(_ context.Context, ref string, a workflows.SupportAction) error {
	return f.record("RetryProvisioning", ref, a)
}
func (f *fakeWorkflows) Refund(_ context.Context, ref string, r workflows.Refund) error {
	return f.record("Refund", ref, r)
}

func (f *fakeWorkflows) Refundable(_ context.Context, ref string) (int64, error) {
	err := f.record("Refundable", ref, nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refundable, err
}

func (f *fakeWorkflows) RefundException(_ context.Context, e domain.Exception, r domain.ExceptionRefund) error {
	return f.record("RefundException", e.TargetRef, r)
}

func (f *fakeWorkflows) ResolveException(_ context.Context, e domain.Exception, r domain.ExceptionResolve) error {
	return f.record("ResolveException", e.TargetRef, r)
}

func (f *fakeWorkflows) CreateOrderIntent(_ context.Context, ref string, req workflows.IntentRequest) (domain.Intent, error) {
	return domain.Intent{}, f.record("CreateOrderIntent", ref, req)
}

func (f *fakeWorkflows) CreateTopUpIntent(_ context.Context, ref string, req workflows.IntentRequest) (domain.Intent, error) {
	return domain.Intent{}, f.record("CreateTopUpIntent", ref, req)
}

var _ api.Workflows = (*fakeWorkflows)(nil)

// harness is one API over a fresh database.
type harness struct {
	t      testing.TB
	ring   *secrets.Keyring // opens the email confirmation links
	sleeps *sleepLog        // the login slow-downs asked for (nothing waits)
	db     *postgres.DB
	wf     *fakeWorkflows
	cfg    api.Config
	srv    *api.Server
	h      http.Handler
	router routers.Router
}

func testConfig() api.Config {
	return api.Config{
		CookieSecure: true,
		AgentTokens:  map[string]string{agentToken: agentName},
		Argon2:       api.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1},
		Rental:       workflows.RentalConfig{ProvisioningAttempts: 3},
		// One agent moves any amount alone; four_eyes_test.go sets limits.
		SupportLimits: domain.SupportLimits{FourEyesCents: 1 << 50, AgentDailyCapCents: 1 << 51},
		// Every test registers from the same address.
		RegistrationsPerIP: 1000,
		// Tests create freely; quotas_test.go sets the limits it tests.
		Quotas: api.Quotas{UnpaidOrdersPerAccount: 1000, OpenTopUpsPerAccount: 1000, PaymentRequestsPerHour: 1000,
			SupportRequestsPerDay: 1000, SupportRequestsPerOrderDay: 1000, StreamsPerSession: 1000, StreamsPerAccount: 1000},
	}
}

func newHarness(t testing.TB, tweak ...func(*api.Config, *api.Deps)) *harness {
	t.Helper()
	return newDBHarness(t, func(_ *postgres.DB, c *api.Config, d *api.Deps) {
		for _, f := range tweak {
			f(c, d)
		}
	})
}

// newDBHarness is newHarness whose tweak also gets the database. The
// store holds no keyring: sealed secrets are left out (keyedHarness).
func newDBHarness(t testing.TB, tweak func(*postgres.DB, *api.Config, *api.Deps)) *harness {
	t.Helper()
	db := pgtest.NewDB(t)
	wf := newFakeWorkflows()
	cfg := testConfig()
	ring, err := secrets.Parse(secrets.Generate("test"))
	require.NoError(t, err)
	sleeps := &sleepLog{}
	st := postgres.NewStore(db, nil, "")
	deps := api.Deps{Stores: app.APIStores(st), Workflows: wf, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Keyring: ring, Sleep: sleeps.sleep, KeyRequests: db, Pinger: db, TwoFactor: st, Extensions: postgres.Extensions{DB: db}}
	if testing.Verbose() {
		deps.Logger = slog.Default()
	}
	tweak(db, &cfg, &deps)
	srv := api.New(cfg, deps)
	return &harness{t: t, ring: ring, sleeps: sleeps, db: db, wf: wf, cfg: cfg, srv: srv, h: srv.Handler(), router: openAPIRouter(t)}
}

// sleepLog records the waits the API asks for instead of waiting.
type sleepLog struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *sleepLog) sleep(_ context.Context, d time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d = append(l.d, d)
	return nil
}

func (l *sleepLog) all() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.d)
}

// openAPIRouter loads the embedded document.
func openAPIRouter(t testing.TB) routers.Router {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	r, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)
	return r
}

// auth says how a request authenticates.
type auth struct {
	cookie string // kd_session value
	csrf   string // X-CSRF-Token
	bearer string // Authorization: Bearer
	ip     string // client address (default: httptest's 192.0.2.1)
	agent  string // the support console's session cookie
	// key is the Idempotency-Key of a POST under /v1/support/ or of an
	// extension: a fresh one when empty (as the CLI and the console send),
	// none when noKey.
	key string
}

// noKey sends a support action without its Idempotency-Key.
const noKey = "-"

type resp struct {
	*httptest.ResponseRecorder
	body map[string]any
}

func (r resp) errCode() string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func (r resp) errField() string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e["field"].(string)
	return s
}

func (r resp) obj(key string) map[string]any {
	m, _ := r.body[key].(map[string]any)
	return m
}

// do sends a request; body is a string (sent as is) or a value (as JSON).
// Every JSON answer is validated against the OpenAPI document.
func (h *harness) do(method, path string, body any, a auth) resp {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(h.t, err)
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, path, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.cookie != "" {
		req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: a.cookie})
	}
	if a.csrf != "" {
		req.Header.Set(csrfHeaderKey, a.csrf)
	}
	if a.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+a.bearer)
	}
	if a.ip != "" {
		req.RemoteAddr = net.JoinHostPort(a.ip, "40000")
	}
	if method == http.MethodPost && (strings.HasPrefix(path, "/v1/support/") || strings.HasSuffix(path, "/extensions")) {
		switch a.key {
		case noKey:
		case "":
			req.Header.Set(api.IdempotencyKeyHeader, rand.Text())
		default:
			req.Header.Set(api.IdempotencyKeyHeader, a.key)
		}
	}
	rec := httptest.NewRecorder()
	h.h.ServeHTTP(rec, req)
	out := resp{ResponseRecorder: rec}
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		require.NoError(h.t, json.Unmarshal(rec.Body.Bytes(), &out.body), rec.Body.String())
		h.validateResponse(req, rec)
	}
	return out
}

// validateResponse checks a response against the document's schema for its
// route and status.
func (h *harness) validateResponse(req *http.Request, rec *httptest.ResponseRecorder) {
	h.t.Helper()
	route, params, err := h.router.FindRoute(req)
	if err != nil {
		return // unknown routes answer 404 outside the document
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 rec.Code,
		Header:                 rec.Header(),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(rec.Body.Bytes())
	require.NoError(h.t, openapi3filter.ValidateResponse(context.Background(), in),
		"%s %s -> %d %s", req.Method, req.URL.Path, rec.Code, rec.Body.String())
}

// customer is a registered account with its session.
type customer struct {
	id    int64
	email string
	auth  auth // bearer
	web   auth // cookie + csrf (a second session)
}

// register creates an account with a bearer session and a cookie session,
// its address confirmed (as if the link were opened).
func (h *harness) register(email string) customer {
	h.t.Helper()
	c := h.registerUnverified(email)
	_, err := h.db.Exec(`UPDATE accounts SET email_verified_at = now() WHERE id = $1`, c.id)
	require.NoError(h.t, err)
	return c
}

// registerUnverified is register with the address left unconfirmed.
func (h *harness) registerUnverified(email string) customer {
	h.t.Helper()
	r := h.do("POST", "/v1/auth/register", map[string]any{
		"first_name": "Ada", "last_name": "Lovelace", "email": email, "password": testPassword, "bearer": true,
	}, auth{})
	require.Equal(h.t, http.StatusCreated, r.Code, r.Body.String())
	tok, _ := r.body["token"].(string)
	require.NotEmpty(h.t, tok)
	id := int64(r.obj("account")["id"].(float64))
	// Its cookie session is written as a login would open it: an
	// unconfirmed account does not sign in with its password.
	cookie, csrf, client := rand.Text(), rand.Text(), domain.SessionClient{IP: "192.0.2.1"}
	sum := sha256.Sum256([]byte(cookie))
	ctx := context.Background()
	require.NoError(h.t, h.db.CreateSession(ctx, sum[:], id, csrf, time.Now().Add(cmp.Or(h.cfg.SessionTTL, api.DefaultSessionTTL)),
		cmp.Or(h.cfg.SessionIdle, api.DefaultSessionIdle), client))
	require.NoError(h.t, h.db.RecordActivity(ctx, id, domain.ActivityLogin, client))
	return customer{id: id, email: email, auth: auth{bearer: tok}, web: auth{cookie: cookie, csrf: csrf}}
}

// loginWeb logs in the browser way: cookie + CSRF token.
func (h *harness) loginWeb(email, password string) auth {
	h.t.Helper()
	r := h.do("POST", "/v1/auth/login", map[string]any{"email": email, "password": password}, auth{})
	require.Equal(h.t, http.StatusOK, r.Code, r.Body.String())
	ck := sessionCookie(r.ResponseRecorder)
	require.NotNil(h.t, ck)
	csrf, _ := r.body["csrf_token"].(string)
	require.NotEmpty(h.t, csrf)
	return auth{cookie: ck.Value, csrf: csrf}
}

func sessionCookie(rec *httptest.ResponseRecorder) *http.Cookie {
	for _, c := range rec.Result().Cookies() {
		if c.Name == api.SessionCookie {
			return c
		}
	}
	return nil
}

func (h *harness) count(table string) int {
	h.t.Helper()
	var n int
	require.NoError(h.t, h.db.Get(&n, "SELECT count(*) FROM "+table))
	return n
}

// order creates an order for c (2 lots of rtx-a5000, 3 days).
func (h *harness) order(c customer) string {
	h.t.Helper()
	r := h.do("POST", "/v1/orders", map[string]any{
		"gpu_model": "rtx-a5000", "lots": 2, "duration_days": 3, "preset": "pytorch"}, c.auth)
	require.Equal(h.t, http.StatusCreated, r.Code, r.Body.String())
	return r.obj("order")["reference"].(string)
}
