package web

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

func TestFrenchRate(t *testing.T) {
	for in, want := range map[string]string{
		"65000": "65\u202f000", "65000.50": "65\u202f000,5", "0.99981234": "0,99981234", "100": "100",
		"1234567.000": "1\u202f234\u202f567", "n/a": "n/a",
	} {
		if got := frenchRate(in); got != want {
			t.Errorf("frenchRate(%q) = %q, want %q", in, got, want)
		}
	}
}

// Counting a queued amount is recorded as an attribution naming the
// amount: the console names it for what it is.
func TestActionNameOfACountedAmount(t *testing.T) {
	count := domain.SupportAction{Action: domain.ActionAttributePayment, Params: json.RawMessage(`{"exception_id": 7, "amount_cents": 0}`)}
	attribute := domain.SupportAction{Action: domain.ActionAttributePayment, Params: json.RawMessage(`{"amount_cents": 0}`)}
	if got := actionName(count); got != "Prise en compte d'un montant reçu" {
		t.Errorf("count: %q", got)
	}
	if got := actionName(attribute); got != "Attribution d'un paiement" {
		t.Errorf("attribution: %q", got)
	}
	unknown := "acknowledged"
	if got := outcomeLabel(&unknown); got != "état inconnu" {
		t.Errorf("unknown outcome: %q", got)
	}
}

// canceledCatalog fails as a request its client cancelled does.
type canceledCatalog struct{ fakeServices }

func (canceledCatalog) Catalog(ctx context.Context) (api.CatalogResponse, error) {
	return api.CatalogResponse{}, domain.Errorf(domain.ECodeInternal, "catalog: %v", ctx.Err())
}

// The configurator's summary request, cancelled by the browser (htmx
// replaces it when the customer clicks on): nothing logged as an error.
func TestClientGoneIsNoError(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	var logs bytes.Buffer
	s, err := New(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	r := gin.New()
	s.mount(r, &canceledCatalog{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/summary?gpu_model=b200", nil).WithContext(ctx))
	if strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "client went away") {
		t.Fatalf("logs: %s", logs.String())
	}
	// Not cancelled, the same failure is an error.
	logs.Reset()
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/summary?gpu_model=b200", nil))
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("logs: %s", logs.String())
	}
}

// /favicon.ico is served, with the pages' CSP, and the pages name it.
func TestFavicon(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	s := newTestSite(t)
	r := gin.New()
	s.mount(r, &fakeServices{})
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/favicon.ico", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "image/x-icon" ||
		!strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'self'") || !bytes.HasPrefix(rec.Body.Bytes(), []byte{0, 0, 1, 0}) {
		t.Fatalf("favicon: %d %v %.8q", rec.Code, rec.Header(), rec.Body.Bytes())
	}
	var buf bytes.Buffer
	if err := s.pages["notfound"].ExecuteTemplate(&buf, "layout.html", page{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `<link rel="icon" href="/static/favicon.ico?v=`) {
		t.Fatal("the layout names no icon")
	}
}

// The order's confirmation (/order) shows the summary without the
// configurator's "Commander", which needs the configurator's form.
func TestOrderConfirmationHasNoDeadButton(t *testing.T) {
	s := newTestSite(t)
	q := &api.QuoteResponse{}
	q.Model, q.Lots, q.DurationDays, q.Preset, q.GPUsPerLot, q.TotalGPUs, q.TotalCents = "b200", 2, 7, "python", 2, 4, 311800
	d := configuratorData{Config: q.Configuration, Quote: q, Confirming: true}
	var buf bytes.Buffer
	if err := s.pages["order_confirm"].ExecuteTemplate(&buf, "layout.html", page{Title: "Confirmer la commande", Data: d}); err != nil {
		t.Fatal(err)
	}
	if html := buf.String(); strings.Contains(html, `formaction="/order"`) || !strings.Contains(html, "Confirmer la commande (3\u202f118,00 USD)") {
		t.Fatalf("confirmation page:\n%s", html)
	}
}
