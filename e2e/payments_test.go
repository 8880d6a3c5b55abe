package e2e

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/payments"
	"github.com/kernodeck/kernodeck/workflows"
)

// BIP84's published account key for the "abandon ... about" mnemonic.
const bip84Zpub = "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs"

// A payment request through the API and the real RentalWorkflow: exact
// instructions, one active request at a time, clear refusals that leave the
// order readable, and "J'ai payé" recorded without changing any payment state.
func TestPaymentRequestThroughAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	acc, err := hdwallet.ParseAccountKey(hdwallet.Bitcoin, bip84Zpub)
	if err != nil {
		t.Fatal(err)
	}
	w := apptest.New(t, apptest.Options{
		Networks: map[string]payments.Network{"bitcoin": {Deriver: acc}},
		Rates:    map[string]string{"BTC": "65000.12"},
	})
	e := &env{t: t, db: w.DB, tc: w.Temporal, api: w.API(), logger: w.Logger}
	dana := register(e, "Dana", "dana@example.com")
	eve := register(e, "Eve", "eve@example.com")

	m := e.must(http.StatusOK, "GET", "/v1/payment-methods", "", nil)
	if ms := asList(m["methods"]); len(ms) != 1 || str(ms[0].(map[string]any)["asset"]) != "BTC" {
		t.Fatalf("methods: %v", m)
	}
	created := e.must(http.StatusCreated, "POST", "/v1/orders", dana, map[string]any{
		"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"})
	ref := str(created["order"].(map[string]any)["reference"])
	waitStatus(e, dana, ref, "awaiting_payment")

	// Refused customer updates write no history: the API and the
	// workflow's validators refuse them before any event.
	wid := workflows.RentalWorkflowID(ref)
	var before int
	e.waitFor("workflow waiting for its payment", func() bool {
		h := historyOf(t, e.tc, wid)
		before = len(h.Events)
		// Its unpaid timer started, and no workflow task after the one that
		// started it (from version 10 that task's search attribute upsert
		// comes after the timer).
		timer := slices.ContainsFunc(h.Events, func(ev *historypb.HistoryEvent) bool {
			return ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED
		})
		last := enumspb.EVENT_TYPE_UNSPECIFIED
		if before > 0 {
			last = h.Events[before-1].GetEventType()
		}
		return timer && (last == enumspb.EVENT_TYPE_TIMER_STARTED || last == enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES)
	})
	if st, out := e.call("POST", "/v1/orders/"+ref+"/pay-from-balance", dana, nil); st != http.StatusConflict || errCode(out) != "insufficient_balance" {
		t.Fatalf("pay from an empty balance: %d %v", st, out)
	}

	// A method that is offered but not configured: clear refusal, order unchanged.
	_, out := e.call("POST", "/v1/orders/"+ref+"/payment-intents", dana, map[string]any{"asset": "SOL", "network": "solana"})
	if errBody := out["error"].(map[string]any); str(errBody["code"]) != "method_unavailable" || !strings.Contains(str(errBody["message"]), "commande reste enregistrée") {
		t.Fatalf("unconfigured method: %v", out)
	}
	// USDT on Bitcoin does not exist.
	st, _ := e.call("POST", "/v1/orders/"+ref+"/payment-intents", dana, map[string]any{"asset": "USDT", "network": "bitcoin"})
	if st != http.StatusBadRequest {
		t.Fatalf("USDT/bitcoin: status %d", st)
	}
	if after := len(historyOf(t, e.tc, wid).Events); after != before {
		t.Fatalf("refused updates wrote %d history events", after-before)
	}

	pi := e.must(http.StatusCreated, "POST", "/v1/orders/"+ref+"/payment-intents", dana,
		map[string]any{"asset": "BTC", "network": "bitcoin"})["payment_intent"].(map[string]any)
	if str(pi["address"]) != "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu" || str(pi["amount_base_units"]) != "36262" ||
		str(pi["amount"]) != "0.00036262" || str(pi["usd_cents"]) != "2357" || str(pi["rate_usd_per_unit"]) != "65000.12" {
		t.Fatalf("payment request: %v", pi)
	}
	deadline, err := time.Parse(time.RFC3339Nano, str(pi["deadline"]))
	if err != nil || time.Until(deadline) < 59*time.Minute || time.Until(deadline) > 61*time.Minute {
		t.Fatalf("deadline %v (%v)", pi["deadline"], err)
	}
	if str(pi["payment_uri"]) != "bitcoin:bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu?amount=0.00036262" {
		t.Fatalf("uri: %v", pi["payment_uri"])
	}
	id := str(pi["id"])

	// One active request at a time: asked again (a retry after a timeout
	// whose first call went through), the same request is the answer.
	again := e.must(http.StatusOK, "POST", "/v1/orders/"+ref+"/payment-intents", dana,
		map[string]any{"asset": "BTC", "network": "bitcoin"})["payment_intent"].(map[string]any)
	if str(again["id"]) != str(pi["id"]) || str(again["address"]) != str(pi["address"]) || str(again["amount"]) != str(pi["amount"]) {
		t.Fatalf("asked again: %v, first %v", again, pi)
	}

	// The QR code is a PNG of the URI, for the owner only.
	req, _ := http.NewRequest("GET", e.api.URL+"/v1/payment-intents/"+id+"/qr.png", nil)
	req.Header.Set("Authorization", "Bearer "+dana)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	png, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatalf("qr: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	e.must(http.StatusNotFound, "GET", "/v1/payment-intents/"+id, eve, nil)
	e.must(http.StatusNotFound, "POST", "/v1/payment-intents/"+id+"/claim", eve, nil)

	// "J'ai payé": on the tracking, and nothing else changes.
	e.must(http.StatusOK, "POST", "/v1/payment-intents/"+id+"/claim", dana, nil)
	o, tl, _ := order(e, dana, ref)
	if str(o["status"]) != "awaiting_payment" || str(o["paid_cents"]) != "0" {
		t.Fatalf("the claim changed the order: %v", o)
	}
	if ks := kinds(tl); !slices.Contains(ks, "payment_requested") || !slices.Contains(ks, "payment_claimed") {
		t.Fatalf("timeline: %v", ks)
	}
	out = e.must(http.StatusOK, "GET", "/v1/orders/"+ref, dana, nil)
	intents := asList(out["payment_intents"])
	if len(intents) != 1 || len(asList(intents[0].(map[string]any)["claims"])) != 1 {
		t.Fatalf("intents on the order: %v", intents)
	}
	// Support sees the request too.
	sup := e.must(http.StatusOK, "GET", "/v1/support/orders/"+ref, apptest.AgentToken, nil)
	if pis := asList(sup["payment_intents"]); len(pis) != 1 || str(pis[0].(map[string]any)["id"]) != id {
		t.Fatalf("support view of the requests: %v", sup["payment_intents"])
	}
	// Operators find the order by asset and network in Temporal.
	d, err := w.Temporal.DescribeWorkflow(w.Ctx, "rental-"+ref, "")
	if err != nil {
		t.Fatal(err)
	}
	sa := d.RawResponse.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	if !strings.Contains(string(sa["KdAsset"].GetData()), "BTC") || !strings.Contains(string(sa["KdNetwork"].GetData()), "bitcoin") {
		t.Fatalf("search attributes: %v", sa)
	}
}

// A payment request's deadline never passes its order's or top-up's
// expiry: it is cut at the end of the payment window, and refused when
// fewer than five minutes remain.
func TestRequestDeadlineNeverPassesExpiry(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	acc, err := hdwallet.ParseAccountKey(hdwallet.Bitcoin, bip84Zpub)
	if err != nil {
		t.Fatal(err)
	}
	w := apptest.New(t, apptest.Options{Networks: map[string]payments.Network{"bitcoin": {Deriver: acc}}})
	id := w.NewAccount("deadline@example.com")
	start := func(unpaid time.Duration) (domain.Order, time.Time) {
		item, err := w.DB.CatalogItem(w.Ctx, "rtx-a5000")
		if err != nil {
			t.Fatal(err)
		}
		q, _ := domain.PriceQuote(item, domain.Configuration{Model: "rtx-a5000", Lots: 1, DurationDays: 3, Preset: "python"})
		o, err := w.DB.CreateOrder(w.Ctx, id, q)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Workflows.StartRental(w.Ctx, workflows.NewRentalInput(o, workflows.RentalConfig{UnpaidTimeout: unpaid})); err != nil {
			t.Fatal(err)
		}
		d, err := w.Temporal.DescribeWorkflow(w.Ctx, workflows.RentalWorkflowID(o.Ref), "")
		if err != nil {
			t.Fatal(err)
		}
		return o, d.RawResponse.GetWorkflowExecutionInfo().GetStartTime().AsTime().Add(unpaid)
	}
	// The service's deadline is 1 h; the order expires in 30 min.
	o, expiry := start(30 * time.Minute)
	it, err := w.RequestOrderPayment(o.Ref, "BTC", "bitcoin")
	if err != nil {
		t.Fatal(err)
	}
	if it.Deadline.After(expiry) || expiry.Sub(it.Deadline) > time.Second {
		t.Fatalf("deadline %v, order expires %v", it.Deadline, expiry)
	}
	// Less than five minutes left: no request.
	o, _ = start(4 * time.Minute)
	if _, err := w.RequestOrderPayment(o.Ref, "BTC", "bitcoin"); domain.ErrorCode(err) != domain.ECodeConflict {
		t.Fatalf("request 4 min before expiry: %v", err)
	}
	// Top-ups too.
	tu, err := w.DB.CreateTopUp(w.Ctx, id, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Workflows.StartTopUp(w.Ctx, workflows.NewTopUpInput(tu, 20*time.Minute)); err != nil {
		t.Fatal(err)
	}
	it, err = w.RequestTopUpPayment(tu.Ref, "BTC", "bitcoin")
	if err != nil {
		t.Fatal(err)
	}
	if time.Until(it.Deadline) > 20*time.Minute {
		t.Fatalf("top-up request deadline %v is past its 20 min window", it.Deadline)
	}
}
