package web

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/provision/sshhost"
	"github.com/kernodeck/kernodeck/workflows"
)

const (
	consoleToken = "agent-alice-console-token-0123456789"
	consoleAgent = "alice"
)

// settlingWorkflows records the support calls the API makes. A refund of
// a queued amount is applied as the settlement workflow's transition does
// (RecordOrderEvent: the posting to the balance and the use of the queued
// amount, refused by PostgreSQL past what remains); the rest only records.
// The workflows' own handling of these updates is tested in package
// workflows and end to end.
type settlingWorkflows struct {
	api.Workflows
	db    *postgres.DB
	mu    sync.Mutex
	calls []string
}

func (f *settlingWorkflows) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *settlingWorkflows) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *settlingWorkflows) StartRental(context.Context, workflows.RentalInput) error { return nil }
func (f *settlingWorkflows) StartTopUp(context.Context, workflows.TopUpInput) error   { return nil }

func (f *settlingWorkflows) EndEarly(_ context.Context, ref string, a workflows.SupportAction) error {
	f.record("EndEarly " + ref + " " + a.Agent + " " + a.Reason)
	return nil
}

func (f *settlingWorkflows) RefundException(ctx context.Context, e domain.Exception, r domain.ExceptionRefund) error {
	f.record("RefundException " + e.TargetRef + " " + r.Agent + " " + r.Reason)
	cents := r.AmountCents
	if cents == 0 {
		cents = e.RemainingCents()
	}
	return f.db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: e.TargetRef, Key: domain.KeyExceptionRefund(r.ActionID),
		Kind: domain.EventRefunded, Message: "Remboursé au solde.", At: time.Now(),
		Use:     &domain.ExceptionUse{ExceptionID: e.ID, Cents: cents, Refund: true},
		Posting: &domain.Posting{Kind: domain.PostingRefund, AccountID: e.AccountID, Cents: cents}})
}

type consoleHarness struct {
	t  *testing.T
	db *postgres.DB
	h  http.Handler
	wf *settlingWorkflows
}

// newConsoleHarness serves the console to consoleAgent, holding roles
// beyond agent.
func newConsoleHarness(t *testing.T, roles ...domain.SupportRole) *consoleHarness {
	t.Helper()
	gin.SetMode(gin.TestMode)
	db := pgtest.NewDB(t)
	site, err := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	site.SetExplorers(map[string]string{domain.NetworkBitcoin: "https://explorer.example/tx/{txid}"})
	wf := &settlingWorkflows{db: db}
	srv := api.New(api.Config{CookieSecure: true, Argon2: api.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1},
		AgentTokens: map[string]string{consoleToken: consoleAgent}, AgentRoles: map[string]domain.SupportRoles{consoleAgent: roles},
		Confirmations: map[string]int64{domain.NetworkBitcoin: 2},
		SupportLimits: domain.SupportLimits{FourEyesCents: 1 << 50, AgentDailyCapCents: 1 << 51}},
		api.Deps{Stores: app.APIStores(postgres.NewStore(db, nil, "")), Workflows: wf, Site: site, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			// No SSH key: a repair that would log in to a host fails; the
			// hosts of these tests have nothing left to check.
			Hosts: sshhost.NewOperations(postgres.Hosts{DB: db}, &sshhost.Driver{Store: postgres.Hosts{DB: db}})})
	return &consoleHarness{t: t, db: db, h: srv.Handler(), wf: wf}
}

// jar is a browser: it keeps every cookie the server sets (and drops those
// it clears).
type jar struct {
	ch      *consoleHarness
	cookies map[string]*http.Cookie
	origin  string
}

func (ch *consoleHarness) browser() *jar { return &jar{ch: ch, cookies: map[string]*http.Cookie{}} }

func (b *jar) do(method, path string, form url.Values) *httptest.ResponseRecorder {
	b.ch.t.Helper()
	var req *http.Request
	if form != nil {
		req = httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, path, nil)
	}
	if b.origin != "" {
		req.Header.Set("Origin", b.origin)
	}
	for _, c := range b.cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	rec := httptest.NewRecorder()
	b.ch.h.ServeHTTP(rec, req)
	for _, c := range rec.Result().Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	return rec
}

func (b *jar) get(path string) string {
	b.ch.t.Helper()
	rec := b.do(http.MethodGet, path, nil)
	if rec.Code != http.StatusOK {
		b.ch.t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
	}
	checkPageHeaders(b.ch.t, rec)
	return rec.Body.String()
}

// signIn signs the browser in to the console with token.
func (b *jar) signIn(token string) *httptest.ResponseRecorder {
	return b.do(http.MethodPost, "/support/login", url.Values{"token": {token}, "next": {"/support"}})
}

// agentCSRF is the console session's CSRF token out of a page's forms.
func agentCSRF(t *testing.T, page string) string {
	t.Helper()
	m := csrfInput.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page")
	}
	return m[1]
}

// lateOrder is a customer's order with a bitcoin payment request whose
// payment arrived after its deadline: seen on chain (1 confirmation of 2)
// and queued as late, as the watcher's store and the workflow's transition
// write them.
func (ch *consoleHarness) lateOrder(email string) (ref string, accountID int64) {
	ch.t.Helper()
	t := ch.t
	ctx := context.Background()
	token, accountID := ch.customer(email)
	var created struct {
		Order api.OrderView `json:"order"`
	}
	ch.apiPost(token, "/v1/orders", `{"gpu_model":"rtx-a5000","lots":1,"duration_days":3,"preset":"pytorch"}`, &created)
	ref = created.Order.Ref
	if _, err := ch.db.Exec(`INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals,
		amount_base, usd_cents, rate, rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until, request_key)
		VALUES ('PI-LATE', 'order', $1, $2, 'BTC', 'bitcoin', 8, 36262, 2357, 65000, 'test', now() - interval '2 hours', 'bc1qlateaddress', 7,
			'bitcoin:bc1qlateaddress', now() - interval '1 hour', now() + interval '1 day', 'intent:1')`, ref, accountID); err != nil {
		t.Fatal(err)
	}
	if ok, err := ch.db.AcquireLease(ctx, "bitcoin", "w", time.Minute); err != nil || !ok {
		t.Fatalf("lease %v %v", ok, err)
	}
	seen := domain.ChainSeen{TxID: "latetx0001", Index: 0, Asset: "BTC", Address: "bc1qlateaddress", Amount: big.NewInt(36262),
		BlockHeight: 100, BlockHash: "h100", BlockTime: time.Now()}
	if err := ch.db.RecordBlock(ctx, "bitcoin", "w", 100, "h100", []domain.ChainSeen{seen}); err != nil {
		t.Fatal(err)
	}
	late := domain.NewException{Reason: domain.ExceptionLate, PaymentKey: "bitcoin:latetx0001:0", Network: "bitcoin",
		TxID: "latetx0001", Asset: "BTC", AmountBase: "36262", AmountCents: 2357}
	if err := ch.db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: ref, Key: domain.KeyConfirmed("bitcoin:latetx0001:0"),
		Kind: domain.EventPaymentConfirmed, Message: "Paiement confirmé après l'échéance : transmis au support.", At: time.Now(),
		Exceptions: []domain.NewException{late}}); err != nil {
		t.Fatal(err)
	}
	return ref, accountID
}

// customer registers an account through the API (address confirmed) and
// returns its bearer token.
func (ch *consoleHarness) customer(email string) (token string, accountID int64) {
	ch.t.Helper()
	var reg struct {
		Token   string         `json:"token"`
		Account domain.Account `json:"account"`
	}
	ch.apiPost("", "/v1/auth/register",
		`{"first_name":"Ada","last_name":"Lovelace","email":"`+email+`","password":"correct horse battery staple","bearer":true}`, &reg)
	if _, err := ch.db.Exec(`UPDATE accounts SET email_verified_at = now() WHERE id = $1`, reg.Account.ID); err != nil {
		ch.t.Fatal(err)
	}
	return reg.Token, reg.Account.ID
}

// apiPost posts JSON to the API (with a customer's bearer token if any)
// and decodes its 201 answer into out.
func (ch *consoleHarness) apiPost(token, path, body string, out any) {
	ch.t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	ch.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), out) != nil {
		ch.t.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body.String())
	}
}

func (ch *consoleHarness) count(query string, args ...any) int {
	ch.t.Helper()
	var n int
	if err := ch.db.Get(&n, query, args...); err != nil {
		ch.t.Fatal(err)
	}
	return n
}

func TestConsoleSignInAndOut(t *testing.T) {
	ch := newConsoleHarness(t)
	b := ch.browser()

	// Signed out, every console page leads to the sign-in page.
	rec := b.do(http.MethodGet, "/support/orders/KD-NOPE", nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/support/login?next=%2Fsupport%2Forders%2FKD-NOPE" {
		t.Fatalf("signed out: %d %q", rec.Code, rec.Header().Get("Location"))
	}
	// A live part asked for by htmx, signed out: htmx is told to navigate.
	req := httptest.NewRequest(http.MethodGet, "/support/orders/KD-NOPE/live?v=x", nil)
	req.Header.Set("HX-Request", "true")
	rec = httptest.NewRecorder()
	ch.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || rec.Header().Get("HX-Redirect") != "/support/login?next=%2Fsupport" {
		t.Fatalf("signed-out live part: %d %q", rec.Code, rec.Header().Get("HX-Redirect"))
	}
	login := b.get("/support/login")
	if !strings.Contains(login, `name="token"`) || !strings.Contains(login, `type="password"`) {
		t.Fatalf("sign-in form: %s", login)
	}

	// A wrong token: refused in French, no session.
	rec = b.signIn("not-the-token-0123456789abcdef")
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "Jeton d&#39;agent inconnu.") {
		t.Fatalf("wrong token: %d %s", rec.Code, rec.Body.String())
	}
	if n := ch.count(`SELECT count(*) FROM agent_sessions`); n != 0 {
		t.Fatalf("%d sessions after a wrong token", n)
	}

	// Another site's form cannot sign a browser in.
	evil := ch.browser()
	evil.origin = "https://evil.example"
	if rec := evil.signIn(consoleToken); rec.Code != http.StatusForbidden || len(evil.cookies) != 0 {
		t.Fatalf("cross-site sign-in: %d %v", rec.Code, evil.cookies)
	}

	rec = b.signIn(consoleToken)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/support" {
		t.Fatalf("sign-in: %d %q %s", rec.Code, rec.Header().Get("Location"), rec.Body.String())
	}
	ck := b.cookies[api.AgentCookie]
	if ck == nil || !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteStrictMode {
		t.Fatalf("agent cookie: %+v", ck)
	}
	queue := b.get("/support")
	if !strings.Contains(queue, "Agent connecté : alice · rôle agent · session jusqu'au ") || !strings.Contains(queue, "Aucun montant en attente") {
		t.Fatalf("queue page: %s", queue)
	}
	// A copy of the cookie (another browser, as a thief would use it).
	thief := ch.browser()
	thief.cookies[api.AgentCookie] = ck
	thief.get("/support")

	// Sign-out needs the session's CSRF token.
	csrf := agentCSRF(t, queue)
	if rec := b.do(http.MethodPost, "/support/logout", url.Values{"csrf": {"forged"}}); rec.Code != http.StatusForbidden {
		t.Fatalf("sign-out without the CSRF token: %d", rec.Code)
	}
	thief.get("/support")
	rec = b.do(http.MethodPost, "/support/logout", url.Values{"csrf": {csrf}})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/support/login" {
		t.Fatalf("sign-out: %d %q", rec.Code, rec.Header().Get("Location"))
	}
	if _, ok := b.cookies[api.AgentCookie]; ok {
		t.Fatal("the agent cookie survived the sign-out")
	}
	// The session is gone on the server: the copied cookie opens nothing.
	if rec := thief.do(http.MethodGet, "/support", nil); rec.Code != http.StatusSeeOther ||
		!strings.HasPrefix(rec.Header().Get("Location"), "/support/login") {
		t.Fatalf("revoked session still reads the queue: %d", rec.Code)
	}
	if n := ch.count(`SELECT count(*) FROM agent_sessions`); n != 0 {
		t.Fatalf("%d sessions after sign-out", n)
	}
}

// A customer's session opens no console page, and its cookie is not read
// by the support API.
func TestConsoleRefusesCustomers(t *testing.T) {
	ch := newConsoleHarness(t)
	ref, _ := ch.lateOrder("owner@example.com")
	b := ch.browser()
	rec := b.do(http.MethodPost, "/login", url.Values{"email": {"owner@example.com"}, "password": {"correct horse battery staple"}, "next": {"/orders"}})
	if rec.Code != http.StatusSeeOther || b.cookies[api.SessionCookie] == nil {
		t.Fatalf("customer login: %d", rec.Code)
	}
	b.get("/orders/" + ref) // the customer is signed in
	for _, path := range []string{"/support", "/support/orders/" + ref, "/support/find?q=" + ref} {
		rec := b.do(http.MethodGet, path, nil)
		if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/support/login") {
			t.Fatalf("customer on %s: %d %q", path, rec.Code, rec.Header().Get("Location"))
		}
	}
	csrf := agentCSRF(t, b.get("/orders/"+ref))
	rec = b.do(http.MethodPost, "/support/orders/"+ref+"/act", url.Values{"csrf": {csrf}, "action": {"end-early"}, "reason": {"je me rembourse"}})
	if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/support/login") {
		t.Fatalf("customer action: %d", rec.Code)
	}
	if n := ch.count(`SELECT count(*) FROM support_actions`); n != 0 || len(ch.wf.recorded()) != 0 {
		t.Fatalf("a customer acted as support: %d rows, calls %v", n, ch.wf.recorded())
	}
}

var liveVersion = regexp.MustCompile(`id="live-version" name="v" value="([0-9a-f]+)"`)

var txLink = regexp.MustCompile(`<a href="https://explorer.example/tx/latetx0001" rel="noreferrer noopener" target="_blank">`)

// The queue and an order's file show what PostgreSQL holds; a refund of
// the queued amount goes through its confirmation page to the workflow,
// shrinks the queue and credits the balance; the same refund again is
// refused; a forged form changes nothing.
func TestConsoleQueueFileAndRefund(t *testing.T) {
	ch := newConsoleHarness(t)
	ref, accountID := ch.lateOrder("late@example.com")
	b := ch.browser()
	if rec := b.signIn(consoleToken); rec.Code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", rec.Code)
	}

	queue := b.get("/support")
	for _, want := range []string{"1 montant ouvert", "Confirmé après l&#39;échéance (1)", `href="/support/orders/` + ref + `"`,
		"late@example.com", "23,57 USD en BTC"} {
		if !strings.Contains(queue, want) && !strings.Contains(queue, strings.ReplaceAll(want, "\u202f", " ")) {
			t.Fatalf("queue lacks %q:\n%s", want, queue)
		}
	}
	if other := b.get("/support?motif=over"); !strings.Contains(other, "Aucun montant en attente pour ce motif") {
		t.Fatalf("filter: %s", other)
	}

	// Search by txid and by email finds the order.
	for _, q := range []string{"latetx0001", "late@example.com"} {
		if found := b.get("/support/find?q=" + url.QueryEscape(q)); !strings.Contains(found, `href="/support/orders/`+ref+`"`) {
			t.Fatalf("find %s: %s", q, found)
		}
	}

	file := b.get("/support/orders/" + ref)
	for _, want := range []string{"Ada Lovelace", "late@example.com", "bc1qlateaddress", "0.00036262", "latetx0001", "NVIDIA RTX A5000 · 1 lot",
		"1 sur 2", "Confirmé après l&#39;échéance", "Paiement confirmé après l&#39;échéance : transmis au support."} {
		if !strings.Contains(file, want) {
			t.Fatalf("file lacks %q:\n%s", want, file)
		}
	}
	if !txLink.MatchString(file) {
		t.Fatalf("no explorer link for the payment:\n%s", file)
	}
	// The evidence is live: fetched again on each event of the file's
	// stream (after the entries shown), 204 while unchanged.
	if !regexp.MustCompile(`<div hx-ext="sse" sse-connect="/v1/support/orders/` + ref + `/events\?after=[0-9]+">\s*<div id="live" class="live" hx-get="/support/orders/` + ref + `/live" hx-include="#live-version" hx-trigger="sse:order, sse:timeline"`).MatchString(file) {
		t.Fatalf("file not live: %s", file)
	}
	fileVersion := liveVersion.FindStringSubmatch(file)[1]
	if rec := b.do(http.MethodGet, "/support/orders/"+ref+"/live?v="+fileVersion, nil); rec.Code != http.StatusNoContent {
		t.Fatalf("live part unchanged: %d", rec.Code)
	}
	queueVersion := liveVersion.FindStringSubmatch(queue)[1]
	if rec := b.do(http.MethodGet, "/support/live?v="+queueVersion, nil); rec.Code != http.StatusNoContent {
		t.Fatalf("live queue unchanged: %d", rec.Code)
	}
	csrf := agentCSRF(t, file)
	var excID string
	if err := ch.db.Get(&excID, `SELECT id::text FROM payment_exceptions WHERE target_ref = $1`, ref); err != nil {
		t.Fatal(err)
	}

	// The form asks for a reason before anything.
	form := url.Values{"csrf": {csrf}, "action": {"refund-exception"}, "exception_id": {excID}, "reason": {""}}
	if rec := b.do(http.MethodPost, "/support/orders/"+ref+"/confirm", form); rec.Code != http.StatusBadRequest ||
		!strings.Contains(rec.Body.String(), "Indiquez la raison") {
		t.Fatalf("no reason: %d", rec.Code)
	}
	// The confirmation page says what changes, and does nothing yet.
	form.Set("reason", "paiement arrivé après l'échéance, client prévenu")
	rec := b.do(http.MethodPost, "/support/orders/"+ref+"/confirm", form)
	confirm := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(confirm, "23,57 USD du montant en attente n° "+excID+" (Confirmé après l&#39;échéance, 0.00036262 BTC, transaction latetx0001)") ||
		!strings.Contains(confirm, "sont remboursés au solde de Ada Lovelace (late@example.com)") ||
		!strings.Contains(confirm, "Il restera 0,00 USD en attente") ||
		!strings.Contains(confirm, "Solde disponible du client : 0,00 USD aujourd&#39;hui, 23,57 USD après l&#39;action.") {
		t.Fatalf("confirmation page: %d %s", rec.Code, confirm)
	}
	if n := ch.count(`SELECT count(*) FROM support_actions`); n != 0 || len(ch.wf.recorded()) != 0 {
		t.Fatalf("the confirmation page acted: %d rows, %v", n, ch.wf.recorded())
	}
	confirmed := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`).FindAllStringSubmatch(confirm, -1) {
		confirmed.Set(m[1], html.UnescapeString(m[2]))
	}
	if confirmed.Get("reason") != "paiement arrivé après l'échéance, client prévenu" || confirmed.Get("exception_id") != excID {
		t.Fatalf("confirmation form: %v", confirmed)
	}

	// A forged confirmation (wrong CSRF token) changes nothing.
	forged := url.Values{}
	for k, v := range confirmed {
		forged[k] = v
	}
	forged.Set("csrf", "forged")
	if rec := b.do(http.MethodPost, "/support/orders/"+ref+"/act", forged); rec.Code != http.StatusForbidden {
		t.Fatalf("forged action: %d %s", rec.Code, rec.Body.String())
	}
	if n := ch.count(`SELECT count(*) FROM support_actions`); n != 0 || len(ch.wf.recorded()) != 0 {
		t.Fatalf("a forged form acted: %d rows, %v", n, ch.wf.recorded())
	}

	// Confirmed: the API's support action (audit row, then the workflow).
	rec = b.do(http.MethodPost, "/support/orders/"+ref+"/act", confirmed)
	if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/support/orders/"+ref+"?action=") {
		t.Fatalf("action: %d %q %s", rec.Code, rec.Header().Get("Location"), rec.Body.String())
	}
	if got := ch.wf.recorded(); len(got) != 1 || got[0] != "RefundException "+ref+" alice paiement arrivé après l'échéance, client prévenu" {
		t.Fatalf("workflow calls: %v", got)
	}
	after := b.get(rec.Header().Get("Location"))
	if !strings.Contains(after, "(Remboursement d&#39;un montant en attente) : effectuée.") || !strings.Contains(after, "<td>alice</td>") {
		t.Fatalf("file after the action: %s", after)
	}
	bal, err := ch.db.Balance(context.Background(), accountID)
	if err != nil || bal.AvailableCents != 2357 {
		t.Fatalf("balance after the refund: %+v %v", bal, err)
	}
	if queue := b.get("/support"); !strings.Contains(queue, "0 montant ouvert") {
		t.Fatalf("the queue did not shrink: %s", queue)
	}
	// An open page's live parts now answer the change.
	live := b.get("/support/orders/" + ref + "/live?v=" + fileVersion)
	if strings.Contains(live, "<html") || !strings.Contains(live, "Remboursement d&#39;un montant en attente") {
		t.Fatalf("file's live part after the refund: %s", live)
	}
	if live := b.get("/support/live?v=" + queueVersion); !strings.Contains(live, "0 montant ouvert") {
		t.Fatalf("queue's live part after the refund: %s", live)
	}
	// The customer's file: the balance, the order, the refund in the movements.
	customerURL := fmt.Sprintf("/support/customers/%d", accountID)
	if !strings.Contains(after, `<a href="`+customerURL+`">`) {
		t.Fatalf("no link to the customer's file: %s", after)
	}
	cust := b.get(customerURL)
	for _, want := range []string{`<dd class="available">23,57 USD</dd>`, `href="/support/orders/` + ref + `"`,
		"<td>Remboursement sur le solde</td><td>" + ref + `</td><td class="num">23,57 USD</td>`} {
		if !strings.Contains(cust, want) {
			t.Fatalf("customer file lacks %q:\n%s", want, cust)
		}
	}

	// The same confirmation posted again: not carried out again (its key
	// was used), the first result shown, the balance unchanged.
	first := rec.Header().Get("Location")
	rec = b.do(http.MethodPost, "/support/orders/"+ref+"/act", confirmed)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != first+"&renvoi=1" {
		t.Fatalf("second refund: %d %q %s", rec.Code, rec.Header().Get("Location"), rec.Body.String())
	}
	if again := b.get(rec.Header().Get("Location")); !strings.Contains(again, "Cette confirmation avait déjà été envoyée : l&#39;action n&#39;a pas été refaite") ||
		!strings.Contains(again, "(Remboursement d&#39;un montant en attente) : effectuée.") {
		t.Fatalf("file after the confirmation posted again: %s", again)
	}
	if n := ch.count(`SELECT count(*) FROM support_actions`); n != 1 || len(ch.wf.recorded()) != 1 {
		t.Fatalf("the confirmation posted again acted: %d rows, calls %v", n, ch.wf.recorded())
	}
	if bal, _ := ch.db.Balance(context.Background(), accountID); bal.AvailableCents != 2357 {
		t.Fatalf("balance after the confirmation posted again: %+v", bal)
	}
	// And its confirmation page refuses it up front.
	if rec := b.do(http.MethodPost, "/support/orders/"+ref+"/confirm", form); rec.Code != http.StatusBadRequest ||
		!strings.Contains(rec.Body.String(), "Il reste 0,00 USD à rembourser") {
		t.Fatalf("confirmation of a settled amount: %d", rec.Code)
	}
}

// An order action (end early) through its confirmation page reaches the
// workflow with the agent and the reason.
func TestConsoleEndEarly(t *testing.T) {
	ch := newConsoleHarness(t)
	ref, _ := ch.lateOrder("end@example.com")
	// The host it held (SSH driver), broken since, shows in the file.
	if _, err := ch.db.Exec(`INSERT INTO gpu_hosts (id, name, address, host_key_fingerprint, gpu_model, gpu_count, state, note)
		VALUES (7, 'gpu-host-7', '10.0.0.7', 'SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'rtx-a5000', 1, 'broken', 'ventilateur HS')`); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.db.Exec(`INSERT INTO host_reservations (order_ref, host_id, host_name, unix_user, state, failure)
		VALUES ($1, 7, 'gpu-host-7', 'kd_cust1', 'failed', 'nvidia-smi: 0 GPU vu')`, ref); err != nil {
		t.Fatal(err)
	}
	// Running (end early is offered to an active rental only).
	if _, err := ch.db.Exec(`UPDATE orders SET status = 'active' WHERE ref = $1`, ref); err != nil {
		t.Fatal(err)
	}
	b := ch.browser()
	b.signIn(consoleToken)
	file := b.get("/support/orders/" + ref)
	for _, want := range []string{"<code>gpu-host-7</code> · compte <code>kd_cust1</code>", "en panne : ventilateur HS", "en échec : nvidia-smi: 0 GPU vu"} {
		if !strings.Contains(file, want) {
			t.Fatalf("file lacks %q:\n%s", want, file)
		}
	}
	csrf := agentCSRF(t, file)
	form := url.Values{"csrf": {csrf}, "action": {"end-early"}, "reason": {"machine défectueuse"}}
	rec := b.do(http.MethodPost, "/support/orders/"+ref+"/confirm", form)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "se termine maintenant") {
		t.Fatalf("confirmation: %d %s", rec.Code, rec.Body.String())
	}
	rec = b.do(http.MethodPost, "/support/orders/"+ref+"/act", b.confirmed("/support/orders/"+ref+"/confirm", form))
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("end early: %d %s", rec.Code, rec.Body.String())
	}
	if got := ch.wf.recorded(); len(got) != 1 || got[0] != "EndEarly "+ref+" alice machine défectueuse" {
		t.Fatalf("workflow calls: %v", got)
	}
	if n := ch.count(`SELECT count(*) FROM support_actions WHERE action = 'end_early' AND agent = 'alice' AND outcome = 'done'`); n != 1 {
		t.Fatalf("audit rows: %d", n)
	}

	// Its provisioning failed: the queue lists it with a link to its file.
	if _, err := ch.db.Exec(`UPDATE orders SET status = 'provisioning_failed' WHERE ref = $1`, ref); err != nil {
		t.Fatal(err)
	}
	queue := b.get("/support")
	if !strings.Contains(queue, "1 commande attend le support") || !strings.Contains(queue, `<a href="/support/orders/`+ref+`">`+ref+`</a></th><td>end@example.com</td>`) {
		t.Fatalf("provisioning failure not in the queue: %s", queue)
	}
}

func TestParseUSD(t *testing.T) {
	for in, want := range map[string]int64{"23,57": 2357, "23.57": 2357, "12": 1200, "1 234,5": 123450, "0,05 USD": 5, "1\u202f000,00": 100000} {
		if got, err := parseUSD(in); err != nil || got != want {
			t.Errorf("parseUSD(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "abc", "1,234", "-5", "1.2.3", ",5", "99999999999999999"} {
		if _, err := parseUSD(bad); err == nil {
			t.Errorf("parseUSD(%q) accepted", bad)
		}
	}
}

// A customer's support request is listed in the queue; the agent answers
// it from the order's file: it leaves the queue and the order's timeline
// (the customer's tracking) shows the answer.
func TestConsoleAnswersSupportRequest(t *testing.T) {
	ch := newConsoleHarness(t)
	ref, accountID := ch.lateOrder("help@example.com")
	r, err := ch.db.CreateSupportRequest(context.Background(), domain.SupportRequest{OrderRef: ref, AccountID: accountID,
		Message: "Mon paiement est arrivé en retard, que faire ?"})
	if err != nil {
		t.Fatal(err)
	}
	b := ch.browser()
	b.signIn(consoleToken)
	if queue := b.get("/support"); !strings.Contains(queue, "Mon paiement est arrivé en retard, que faire ?") {
		t.Fatalf("request not in the queue: %s", queue)
	}
	file := b.get("/support/orders/" + ref)
	id := strconv.FormatInt(r.ID, 10)
	if !strings.Contains(file, `action="/support/support-requests/`+id+`/answer"`) {
		t.Fatalf("no answer form: %s", file)
	}
	form := url.Values{"csrf": {agentCSRF(t, file)}, "ref": {ref}, "message": {"Nous vous remboursons sur votre solde."}}
	rec := b.do(http.MethodPost, "/support/support-requests/"+id+"/answer", form)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("answer: %d %s", rec.Code, rec.Body.String())
	}
	if queue := b.get("/support"); strings.Contains(queue, "que faire ?") {
		t.Fatalf("answered request still queued: %s", queue)
	}
	tl, err := ch.db.Timeline(context.Background(), ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	if last := tl[len(tl)-1]; last.Kind != domain.EventSupportAnswer || !strings.Contains(last.Message, "Nous vous remboursons sur votre solde.") {
		t.Fatalf("timeline: %+v", last)
	}
}

// A top-up's file: the top-up, its customer, and its actions through the
// confirmation page (attribution in USD).
func TestConsoleTopUpFile(t *testing.T) {
	ch := newConsoleHarness(t)
	token, _ := ch.customer("topup@example.com")
	var created struct {
		TopUp api.TopUpView `json:"topup"`
	}
	ch.apiPost(token, "/v1/topups", `{"amount_cents":10000}`, &created)
	ref := created.TopUp.Ref
	b := ch.browser()
	b.signIn(consoleToken)
	if found := b.get("/support/find?q=" + ref); !strings.Contains(found, `href="/support/topups/`+ref+`"`) {
		t.Fatalf("find a top-up: %s", found)
	}
	file := b.get("/support/topups/" + ref)
	for _, want := range []string{"<h1>Recharge " + ref + "</h1>", "topup@example.com", "100,00 USD", `action="/support/topups/` + ref + `/confirm"`} {
		if !strings.Contains(file, want) {
			t.Fatalf("top-up file lacks %q:\n%s", want, file)
		}
	}
	if strings.Contains(file, `value="extend"`) || strings.Contains(file, `value="refund"`) {
		t.Fatal("order actions offered on a top-up")
	}
	form := url.Values{"csrf": {agentCSRF(t, file)}, "action": {"attribute-payment"}, "reason": {"virement reçu hors chaîne"}}
	rec := b.do(http.MethodPost, "/support/topups/"+ref+"/confirm", form)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "le solde de Ada Lovelace (topup@example.com) est crédité de 100,00 USD") {
		t.Fatalf("confirmation: %d %s", rec.Code, rec.Body.String())
	}
	// An order's action is not one of a top-up's.
	form.Set("action", "extend")
	form.Set("days", "2")
	if rec := b.do(http.MethodPost, "/support/topups/"+ref+"/confirm", form); rec.Code != http.StatusBadRequest {
		t.Fatalf("extend on a top-up: %d", rec.Code)
	}
}

// Another asset sent to a request's address waits for its value: the
// agent states it through the confirmation page (the API's handler writes
// it), then the amount is refundable like any other.
func TestConsoleValuesAnotherAsset(t *testing.T) {
	ch := newConsoleHarness(t)
	ref, _ := ch.lateOrder("usdt@example.com")
	ctx := context.Background()
	if err := ch.db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: ref, Key: "other-asset-test", Kind: domain.EventPaymentToSupport,
		Message: "USDT reçu à l'adresse d'une demande en ETH : transmis au support.", At: time.Now(),
		Exceptions: []domain.NewException{{Reason: domain.ExceptionOtherAsset, PaymentKey: "ethereum:othertx:1", Network: "ethereum",
			TxID: "othertx", Asset: "USDT", AmountBase: "5000000", AmountCents: 0}}}); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := ch.db.Get(&id, `UPDATE payment_exceptions SET needs_value = true WHERE payment_key = 'ethereum:othertx:1' RETURNING id`); err != nil {
		t.Fatal(err)
	}
	// The rate near its reception bounds the value (one agent may state it).
	if _, err := ch.db.Exec(`INSERT INTO asset_rates (asset, usd_per_unit, source, observed_at) VALUES ('USDT', 1, 'test', now())`); err != nil {
		t.Fatal(err)
	}
	b := ch.browser()
	b.signIn(consoleToken)
	file := b.get("/support/orders/" + ref)
	idStr := strconv.FormatInt(id, 10)
	if !strings.Contains(file, `id="vx`+idStr+`-amount"`) {
		t.Fatalf("no value form: %s", file)
	}
	form := url.Values{"csrf": {agentCSRF(t, file)}, "action": {"value-exception"}, "exception_id": {idStr},
		"amount": {"5,00"}, "reason": {"5 USDT au cours de 1 USD"}}
	rec := b.do(http.MethodPost, "/support/orders/"+ref+"/confirm", form)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "vaut désormais 5,00 USD") {
		t.Fatalf("confirmation: %d %s", rec.Code, rec.Body.String())
	}
	if rec := b.do(http.MethodPost, "/support/orders/"+ref+"/act", b.confirmed("/support/orders/"+ref+"/confirm", form)); rec.Code != http.StatusSeeOther {
		t.Fatalf("value: %d %s", rec.Code, rec.Body.String())
	}
	var cents int64
	var needs bool
	if err := ch.db.QueryRow(`SELECT amount_cents, needs_value FROM payment_exceptions WHERE id = $1`, id).Scan(&cents, &needs); err != nil || cents != 500 || needs {
		t.Fatalf("valued: %d %v %v", cents, needs, err)
	}
	if n := ch.count(`SELECT count(*) FROM support_actions WHERE action = 'value_exception' AND agent = 'alice' AND outcome = 'done'`); n != 1 {
		t.Fatalf("audit rows: %d", n)
	}
	// Valued once: the form is gone and a second valuation is refused.
	if file := b.get("/support/orders/" + ref); strings.Contains(file, `id="vx`+idStr+`-amount"`) {
		t.Fatal("value form still offered")
	}
	if rec := b.do(http.MethodPost, "/support/orders/"+ref+"/confirm", form); rec.Code != http.StatusConflict {
		t.Fatalf("second valuation: %d", rec.Code)
	}
}
