package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

func newTestSite(t *testing.T) *Site {
	t.Helper()
	s, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSafeNextKeepsOnlyLocalPaths(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "/orders",
		"/orders/KD-1?x=1":      "/orders/KD-1?x=1",
		"//evil.example/":       "/orders",
		"/\\evil.example":       "/orders",
		"https://evil.example/": "/orders",
		"javascript:alert(1)":   "/orders",
		"/ok\r\nSet-Cookie: x":  "/orders",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWalletURLOnlyForPaymentSchemes(t *testing.T) {
	for in, want := range map[string]string{
		"litecoin:rltc1qxyz?amount=0.26":     "litecoin:rltc1qxyz?amount=0.26",
		"ethereum:0xabc@1?value=10":          "ethereum:0xabc@1?value=10",
		"solana:Shop?amount=1&reference=R":   "solana:Shop?amount=1&reference=R",
		"TQn9Y2khEsLJW1ChVWFMSMeRDow5KcbLSE": "", // Tron: a plain address, no wallet link
		"javascript:alert(document.cookie)":  "",
		"https://evil.example/?bitcoin:bc1q": "",
	} {
		if got := string(walletURL(in)); got != want {
			t.Errorf("walletURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFrenchFormats(t *testing.T) {
	for cents, want := range map[int64]string{311800: "3\u202f118,00 USD", 2357: "23,57 USD", 5: "0,05 USD",
		-2357: "-23,57 USD", 100000000: "1\u202f000\u202f000,00 USD"} {
		if got := usd(cents); got != want {
			t.Errorf("usd(%d) = %q, want %q", cents, got, want)
		}
	}
	at := time.Date(2026, 8, 3, 14, 5, 0, 0, time.FixedZone("CEST", 2*3600))
	if got := frenchDate(at); got != "3 août 2026 à 14:05 (12:05 UTC)" {
		t.Errorf("frenchDate = %q", got)
	}
	if got := methodLabel("USDT", domain.NetworkTron); got != "USDT sur Tron" {
		t.Errorf("methodLabel = %q", got)
	}
}

// orderPage renders the order page for d as its owner would see it.
func renderOrder(t *testing.T, s *Site, d orderPageData) string {
	t.Helper()
	p := page{Title: "Commande", Me: &domain.Account{FirstName: "Ada"}, CSRF: "tok", Data: d}
	if _, err := s.withLive(&p, "order_live_box", "/orders/"+d.Order.Ref+"/live", orderTrigger); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.pages["order"].ExecuteTemplate(&buf, "layout.html", p); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func sampleOrder(status string, paid, late int64) orderPageData {
	o := api.OrderView{Order: domain.Order{Ref: "KD-TEST", Model: "rtx-a5000", Lots: 1, GPUsPerLot: 1, TotalGPUs: 1,
		DurationDays: 3, Preset: "python", LotCents: 2357, TotalCents: 2357, Status: status, PaidCents: paid, LateCents: late}}
	d := orderPageData{}
	d.Order = o
	d.Checkout = checkout{Target: target{Kind: "order", Ref: "KD-TEST", Status: status, TotalCents: 2357, PaidCents: paid,
		LateCents: late, Unpaid: unpaidOrder(status)}, RemainingCents: max(0, 2357-paid)}
	return d
}

func sampleIntent(expired bool) api.IntentView {
	in := domain.Intent{ID: "PI-TEST", TargetKind: "order", TargetRef: "KD-TEST", Asset: "LTC", Network: domain.NetworkLitecoin,
		Decimals: 8, AmountBase: domain.NewBigInt(big.NewInt(26188889)), Amount: "0.26188889", USDCents: 2357, Rate: "90",
		Address: "rltc1qexample", PaymentURI: "litecoin:rltc1qexample?amount=0.26188889",
		Deadline: time.Now().Add(time.Hour), Status: domain.IntentOpen}
	if expired {
		in.Deadline = time.Now().Add(-time.Minute)
	}
	return api.IntentView{Intent: in, Expired: expired}
}

// Each payment state shows the FAQ's advice: the exact instructions and
// their network warning, partial, over, late, expired (never reuse the old
// address; do not send again at random; contact support with the reference).
func TestCheckoutStatesGiveTheFAQsAdvice(t *testing.T) {
	s := newTestSite(t)

	d := sampleOrder(domain.StatusAwaitingPayment, 0, 0)
	in := sampleIntent(false)
	d.Checkout.Active = &in
	d.Checkout.PayFromBalance, d.Checkout.BalanceCents = true, 10000
	html := renderOrder(t, s, d)
	for _, want := range []string{"LTC sur Litecoin", "0.26188889", "rltc1qexample", "n'est pas équivalent",
		`data-deadline="`, "J'ai payé", "ne confirme rien", `href="litecoin:rltc1qexample?amount=0.26188889"`,
		"/v1/payment-intents/PI-TEST/qr.png", "Payer 23,57 USD avec mon solde", `name="csrf" value="tok"`} {
		if !strings.Contains(html, want) {
			t.Errorf("active request: missing %q", want)
		}
	}

	d = sampleOrder(domain.StatusPaymentDetected, 1000, 0)
	d.Checkout.Active = &in
	d.Checkout.Seen = []domain.IntentPayment{{Asset: "LTC", Amount: "0.11111111", AmountCents: 1000, State: "seen",
		Confirmations: 1, ConfirmationsRequired: 6}}
	html = renderOrder(t, s, d)
	for _, want := range []string{"0.11111111 LTC reçus", "1 confirmation sur 6", "Paiement partiel : il manque 13,57 USD",
		"N'envoyez pas de transfert au hasard", "contactez le support avec la référence KD-TEST"} {
		if !strings.Contains(html, want) {
			t.Errorf("partial and detected: missing %q", want)
		}
	}

	d = sampleOrder(domain.StatusAwaitingPayment, 0, 0)
	old := sampleIntent(true)
	d.Checkout.Expired = &old
	d.Checkout.Methods = []domain.Method{{Asset: "LTC", Network: domain.NetworkLitecoin}, {Asset: "USDT", Network: domain.NetworkTron}}
	html = renderOrder(t, s, d)
	for _, want := range []string{"a expiré", "Ne réutilisez ni son adresse ni son montant", "n'en envoyez pas un second au hasard",
		"Obtenir les instructions de paiement", "USDT sur Tron"} {
		if !strings.Contains(html, want) {
			t.Errorf("expired request: missing %q", want)
		}
	}
	if strings.Contains(html, "rltc1qexample") {
		t.Error("an expired request's address is shown")
	}

	d = sampleOrder(domain.StatusProvisioning, 3000, 500)
	d.Checkout.OverpaidCents = 643
	html = renderOrder(t, s, d)
	for _, want := range []string{"dépasse le total de 6,43 USD", "signalé au support pour remboursement",
		"arrivé après l'échéance", "remboursera sur votre solde"} {
		if !strings.Contains(html, want) {
			t.Errorf("over and late: missing %q", want)
		}
	}

	d = sampleOrder(domain.StatusExpired, 1000, 0)
	html = renderOrder(t, s, d)
	if !strings.Contains(html, "a expiré sans paiement complet") || !strings.Contains(html, "contactez le support avec la référence KD-TEST") {
		t.Error("expired order: advice missing")
	}
}

func TestPagesHeadersStaticFilesAndNotFound(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	s := newTestSite(t)
	r := gin.New()
	s.mount(r, &fakeServices{})
	r.NoRoute(s.NotFound)

	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/nothing/here", nil))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `<html lang="fr">`) ||
		!strings.Contains(rec.Body.String(), "Page introuvable") {
		t.Fatalf("not found: %d %s", rec.Code, rec.Body.String())
	}
	csp := rec.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("headers: %v", rec.Header())
	}

	url, err := s.assets.url("htmx-2.0.11.min.js")
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept-Encoding", "gzip, br")
	rec = httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Encoding") != "gzip" ||
		!strings.Contains(rec.Header().Get("Cache-Control"), "immutable") {
		t.Fatalf("static: %d %v", rec.Code, rec.Header())
	}
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := io.ReadAll(zr)
	if !bytes.HasPrefix(js, []byte("var htmx=")) {
		t.Fatalf("htmx body: %.40q", js)
	}
}

// An active order shows its access (SSH command, key download while the
// generated key can be revealed, Jupyter for the notebook preset), its
// period's dates and the reminders sent.
func TestActiveOrderShowsAccessPeriodAndReminders(t *testing.T) {
	s := newTestSite(t)
	d := sampleOrder(domain.StatusActive, 2357, 0)
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	end := start.Add(72 * time.Hour)
	d.Order.PeriodStart, d.Order.PeriodEnd = &start, &end
	jupyter := "http://127.0.0.1:8888/"
	fp := "SHA256:abc"
	d.Access = &domain.Access{Host: "gpu-1.example", Port: 2222, Username: "kd-test", KeyFingerprint: &fp,
		PrivateKeyAvailable: true, JupyterURL: &jupyter, JupyterToken: "jt", GPUModel: "NVIDIA RTX A5000", GPUCount: 1}
	d.KeyDownload = true
	d.Reminders = []domain.TimelineEvent{{Kind: domain.EventReminderSent, At: end.Add(-48 * time.Hour),
		Message: "Votre location se termine dans 48 heures : exportez vos résultats."}}
	html := renderOrder(t, s, d)
	for _, want := range []string{"ssh -i kernodeck-KD-TEST.key -p 2222 kd-test@gpu-1.example", `action="/orders/KD-TEST/private-key"`,
		"Télécharger la clé privée", `href="http://127.0.0.1:8888/"`, "3 décembre 2026 à 11:00 (10:00 UTC)", "6 décembre 2026 à 11:00 (10:00 UTC)",
		"Rappels envoyés", "se termine dans 48 heures", "1 × NVIDIA RTX A5000"} {
		if !strings.Contains(html, want) {
			t.Errorf("active order: missing %q", want)
		}
	}
	if strings.Contains(html, `id="paiement"`) {
		t.Error("a paid order shows the payment instructions")
	}
}

// An AMD order says ROCm, not CUDA, before and after provisioning (the FAQ:
// the customer's application must support the stack).
func TestAMDOrderSaysROCm(t *testing.T) {
	s := newTestSite(t)
	d := sampleOrder(domain.StatusAwaitingPayment, 2357, 0)
	d.Order.Model, d.Order.ComputeStack = "mi210", "rocm"
	html := renderOrder(t, s, d)
	if !strings.Contains(html, "ROCm (GPU AMD)") || strings.Contains(html, "CUDA (GPU NVIDIA)") {
		t.Errorf("awaiting payment: the order does not say ROCm:\n%s", html)
	}
	d = sampleOrder(domain.StatusActive, 2357, 0)
	d.Order.Model, d.Order.ComputeStack = "mi210", "rocm"
	d.Access = &domain.Access{Host: "gpu-amd.example", Port: 22, Username: "kd-test", GPUModel: "AMD Instinct MI210",
		GPUCount: 1, Driver: "6.8.5", CUDA: "ROCm 6.2.0-66"}
	html = renderOrder(t, s, d)
	if !strings.Contains(html, "1 × AMD Instinct MI210 · pilote 6.8.5 · ROCm 6.2.0-66") || strings.Contains(html, "CUDA ROCm") {
		t.Errorf("active AMD order: the ROCm version is not shown as such:\n%s", html)
	}
	d.Access.CUDA = "12.4"
	if html = renderOrder(t, s, d); !strings.Contains(html, "· CUDA 12.4") {
		t.Error("an NVIDIA machine's CUDA version is not named CUDA")
	}
}

// One host per order: with B200 hosts of 8 GPUs, the configurator marks
// every lot count but 4 as not offered, and a 5-lot quote shows the quote's
// message and no "Commander" button; a configuration that fits keeps it.
func TestConfiguratorOffersOnlyWhatFitsOneHost(t *testing.T) {
	s := newTestSite(t)
	cat := api.CatalogResponse{MinLots: 1, MaxLots: 10, Models: []domain.CatalogItem{{Model: "b200", DisplayName: "NVIDIA B200",
		Vendor: "nvidia", GPUsPerLot: 2}}, Durations: []int{3, 7, 30}, Presets: []string{"python"}}
	msg := "Une commande occupe une seule machine et aucune machine b200 ne compte 10 GPU : choisissez 4 lots (8 GPU)."
	q := &api.QuoteResponse{}
	q.Model, q.Lots, q.DurationDays, q.Preset, q.GPUsPerLot, q.TotalGPUs, q.TotalCents = "b200", 5, 3, "python", 2, 10, 349500
	q.Availability = &domain.Availability{HostSizes: []int{8}, Message: msg}
	render := func(q *api.QuoteResponse) string {
		d := configuratorData{Catalog: cat, Config: q.Configuration, Quote: q, Lots: lotChoices(cat, q)}
		var buf bytes.Buffer
		if err := s.pages["configurator"].ExecuteTemplate(&buf, "layout.html", page{Title: "Louer un GPU", Data: d}); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	html := render(q)
	for _, want := range []string{msg, `<option value="4">4</option>`, `<option value="5" selected disabled>5 (aucune machine de cette taille)</option>`} {
		if !strings.Contains(html, want) {
			t.Errorf("10 B200 on 8-GPU hosts: missing %q", want)
		}
	}
	if strings.Contains(html, `formaction="/order"`) {
		t.Error("a configuration no host fits can be ordered")
	}
	q.Lots, q.TotalGPUs = 4, 8
	q.Availability = &domain.Availability{HostSizes: []int{8}, Fits: true, AvailableNow: true, FreeNow: 1}
	if html = render(q); !strings.Contains(html, `formaction="/order"`) || !strings.Contains(html, "Disponible maintenant") {
		t.Error("a configuration that fits cannot be ordered")
	}
	// Without host sizes (local driver), every count is offered.
	for _, c := range lotChoices(cat, &api.QuoteResponse{}) {
		if !c.Fits {
			t.Errorf("lot %d not offered without host sizes", c.N)
		}
	}
}

// fakeServices answers the site's service calls with canned values (the
// API's own types); what a test leaves unset fails as unavailable. The
// visitor with a session cookie is Ada, CSRF token "tok".
type fakeServices struct {
	services // unset: calling another method panics (the test is wrong)
	order    func(ref string) (api.OrderDetail, error)
	topUp    func(ref string) (api.TopUpDetail, error)
	methods  []domain.Method
	balance  domain.Balance
	history  []domain.BalanceMovement
	payouts  *domain.PayoutLimits // nil: payouts not offered
}

func (f *fakeServices) PayoutTerms() (domain.PayoutLimits, bool) {
	if f.payouts == nil {
		return domain.PayoutLimits{}, false
	}
	return f.payouts.WithDefaults(), true
}

func (f *fakeServices) CustomerSession(_ context.Context, r *http.Request) (*api.Customer, error) {
	if !hasSessionCookie(r) {
		return nil, nil
	}
	return &api.Customer{Account: domain.Account{FirstName: "Ada", LastName: "Lovelace"}, CSRFToken: "tok"}, nil
}

func (f *fakeServices) ClearSession(*gin.Context) {}

func (f *fakeServices) SessionOrderPage(ctx context.Context, r *http.Request, ref string) (*api.Customer, api.OrderPage, error) {
	me, _ := f.CustomerSession(ctx, r)
	d, err := f.order(ref)
	return me, api.OrderPage{OrderDetail: d}, err
}

func (f *fakeServices) TopUp(_ context.Context, _ *api.Customer, ref string) (api.TopUpDetail, error) {
	return f.topUp(ref)
}

func (f *fakeServices) PaymentMethods() []domain.Method { return f.methods }

func (f *fakeServices) Balance(context.Context, *api.Customer) (domain.Balance, error) {
	return f.balance, nil
}

func (f *fakeServices) BalanceHistory(context.Context, *api.Customer) ([]domain.BalanceMovement, error) {
	return f.history, nil
}

func (f *fakeServices) TopUps(context.Context, *api.Customer) ([]api.TopUpView, error) {
	return nil, nil
}

// fakeSite mounts the site with the fake services f.
func fakeSite(t *testing.T, f *fakeServices) *gin.Engine {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	s := newTestSite(t)
	r := gin.New()
	s.mount(r, f)
	r.NoRoute(s.NotFound)
	return r
}

// getSignedIn fetches path with a session cookie and returns the page.
func getSignedIn(t *testing.T, r http.Handler, path string, wantStatus int) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.AddCookie(&http.Cookie{Name: "kd_session", Value: "session"})
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	if rec.Code != wantStatus {
		t.Fatalf("GET %s: %d, want %d\n%s", path, rec.Code, wantStatus, rec.Body.String())
	}
	return rec.Body.String()
}

// Error pages (not found, the site's 404, an API failure) keep the signed-in
// customer's logout form, with the session's CSRF token.
func TestErrorPagesKeepLogout(t *testing.T) {
	r := fakeSite(t, &fakeServices{order: func(ref string) (api.OrderDetail, error) {
		if ref == "KD-DOWN" {
			return api.OrderDetail{}, domain.Errorf(domain.ECodeUnavailable, "Service momentanément indisponible.")
		}
		return api.OrderDetail{}, domain.Errorf(domain.ECodeNotFound, "Commande introuvable.")
	}})
	for path, status := range map[string]int{"/orders/KD-OTHER": http.StatusNotFound, "/nothing/here": http.StatusNotFound,
		"/orders/KD-DOWN": http.StatusServiceUnavailable} {
		html := getSignedIn(t, r, path, status)
		for _, want := range []string{`action="/logout"`, `name="csrf" value="tok"`, "Connecté : Ada Lovelace"} {
			if !strings.Contains(html, want) {
				t.Errorf("%s: missing %q", path, want)
			}
		}
	}
}

// A partly paid top-up shows what was received, what is missing and the
// partial payment's advice, before it is credited.
func TestPartlyPaidTopUpShowsWhatWasReceived(t *testing.T) {
	r := fakeSite(t, &fakeServices{
		topUp: func(string) (api.TopUpDetail, error) {
			d := api.TopUpDetail{Timeline: []domain.TimelineEvent{}, PaymentIntents: []api.IntentView{}, ReceivedCents: 4000}
			d.TopUp = api.TopUpView{TopUp: domain.TopUp{Ref: "TU-PART", AmountCents: 10000, Status: domain.TopUpAwaitingPayment}}
			return d, nil
		},
		methods: []domain.Method{{Asset: "LTC", Network: domain.NetworkLitecoin}},
	})
	html := getSignedIn(t, r, "/topups/TU-PART", http.StatusOK)
	for _, want := range []string{`<dd class="received">40,00 USD</dd>`, `<dd class="remaining">60,00 USD</dd>`,
		"Paiement partiel : il manque 60,00 USD", "contactez le support avec la référence TU-PART"} {
		if !strings.Contains(html, want) {
			t.Errorf("partly paid top-up: missing %q", want)
		}
	}
}

// The balance's history links each reference to its page: a refund on a
// top-up to the top-up, one on an order to the order, a payout's hold and
// its amount given back to the payout, each named.
func TestBalanceHistoryLinksByReference(t *testing.T) {
	r := fakeSite(t, &fakeServices{balance: domain.Balance{AvailableCents: 12000},
		history: []domain.BalanceMovement{
			{Kind: domain.MovementRefund, Ref: "TU-REFUND", AmountCents: 2000},
			{Kind: domain.MovementRefund, Ref: "KD-REFUND", AmountCents: 1000},
			{Kind: domain.MovementTopUp, Ref: "TU-CREDIT", AmountCents: 10000},
			{Kind: domain.MovementOrderPayment, Ref: "KD-PAID", AmountCents: -2357},
			{Kind: domain.MovementPayout, Ref: "PO-BACK", AmountCents: 2500},
			{Kind: domain.MovementPayout, Ref: "PO-HELD", AmountCents: -2500}}})
	html := getSignedIn(t, r, "/balance", http.StatusOK)
	for _, want := range []string{`href="/topups/TU-REFUND"`, `href="/orders/KD-REFUND"`, `href="/topups/TU-CREDIT"`, `href="/orders/KD-PAID"`,
		`<td>Retrait annulé ou refusé : montant rendu</td><td><a href="/compte/retraits/PO-BACK">`,
		`<td>Retrait</td><td><a href="/compte/retraits/PO-HELD">`} {
		if !strings.Contains(html, want) {
			t.Errorf("balance history: missing %s", want)
		}
	}
	if strings.Contains(html, `href="/orders/TU-`) || strings.Contains(html, `href="/orders/PO-`) {
		t.Error("a top-up's or a payout's reference links to an order page")
	}
	if strings.Contains(html, "/compte/retraits\"") {
		t.Error("payouts not offered, yet the balance page offers them")
	}
}
