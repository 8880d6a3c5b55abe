package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// A customer extends their own rental (issue 39, item 2) through the API,
// on the Temporal dev server with the real worker: 7 days from the
// balance, asked twice with one key, debited once; 3 days by a crypto
// payment to the extension's top-up, which the top-up's workflow, once
// credited, asks the rental's to apply; a third extension, still awaiting
// its payment when the rental ends, lapses with it, and the payment that
// still comes is credited to the balance.
// The rental's and the paying top-up's histories (history version 15)
// are replayed, and recorded with KERNODECK_RECORD_HISTORY=1.
func TestCustomerExtensionEndToEnd(t *testing.T) {
	e := newEnv(t)
	dora := register(e, "Dora", "dora@example.com")
	tu := e.must(http.StatusCreated, "POST", "/v1/topups", dora, map[string]any{"amount_cents": 10000})
	tuRef := str(tu["topup"].(map[string]any)["reference"])
	e.must(http.StatusOK, "POST", "/v1/support/topups/"+tuRef+"/attribute-payment", agentToken, map[string]any{"reason": "virement vérifié"})
	e.waitTopUp(tuRef, domain.TopUpCredited)
	o := e.must(http.StatusCreated, "POST", "/v1/orders", dora, map[string]any{
		"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"})
	ref := str(o["order"].(map[string]any)["reference"])
	waitStatus(e, dora, ref, "awaiting_payment")
	e.must(http.StatusOK, "POST", "/v1/orders/"+ref+"/pay-from-balance", dora, nil)
	active := waitStatus(e, dora, ref, "active")
	end, err := time.Parse(time.RFC3339Nano, str(active["period_end"]))
	if err != nil {
		t.Fatal(err)
	}
	path := "/v1/orders/" + ref + "/extensions"
	balance := func() string { return str(e.must(http.StatusOK, "GET", "/v1/balance", dora, nil)["available_cents"]) }

	// 7 days from the balance, the request sent twice.
	e.extensionKey = "e2e-extension-balance"
	x1 := e.must(http.StatusCreated, "POST", path, dora, map[string]any{"days": 7, "method": "balance", "amount_cents": 5500})
	again := e.must(http.StatusCreated, "POST", path, dora, map[string]any{"days": 7, "method": "balance"})
	if str(x1["extension"].(map[string]any)["state"]) != "paid" || str(again["extension"].(map[string]any)["reference"]) != str(x1["extension"].(map[string]any)["reference"]) {
		t.Fatalf("balance extension %v, again %v", x1, again)
	}
	if got := balance(); got != "2143" {
		t.Fatalf("balance after 23.57 and 55.00: %s", got)
	}
	end = end.Add(7 * 24 * time.Hour)
	e.waitFor("the end moved by 7 days", func() bool { return e.order(ref).PeriodEnd.Equal(end) })

	// 3 days by crypto: the extension's top-up paid, credited, applied.
	e.extensionKey = "e2e-extension-crypto"
	x2 := e.must(http.StatusCreated, "POST", path, dora, map[string]any{"days": 3, "method": "crypto"})["extension"].(map[string]any)
	if str(x2["state"]) != "reserved" {
		t.Fatalf("crypto extension %v", x2)
	}
	payRef := str(x2["topup_reference"])
	e.paid("topup-"+payRef, btc("ee01", 2357, false))
	e.waitFor("the crypto extension paid", func() bool { return e.extensionState(ref, str(x2["reference"])) == domain.ExtensionPaid })
	end = end.Add(3 * 24 * time.Hour)
	e.waitFor("the end moved by 3 more days", func() bool { return e.order(ref).PeriodEnd.Equal(end) })
	if got := balance(); got != "2143" {
		t.Fatalf("balance after the crypto extension (credited, then debited): %s", got)
	}

	// A third, whose payment confirms after the rental ended: lapsed.
	e.extensionKey = "e2e-extension-late"
	x3 := e.must(http.StatusCreated, "POST", path, dora, map[string]any{"days": 3, "method": "crypto"})["extension"].(map[string]any)
	e.support("orders/"+ref+"/end-early", map[string]any{"reason": "demande du client"})
	e.waitOrder(ref, domain.StatusEnded)
	lateRef := str(x3["topup_reference"])
	e.paid("topup-"+lateRef, btc("ee02", 2357, false))
	// Lapsed as the rental ended, before its payment came.
	e.waitFor("the late extension lapsed", func() bool { return e.extensionState(ref, str(x3["reference"])) == domain.ExtensionLapsed })
	late := e.must(http.StatusOK, "GET", "/v1/topups/"+lateRef, dora, nil)["topup"].(map[string]any)
	if str(late["extension_state"]) != domain.ExtensionLapsed {
		t.Fatalf("the late extension's top-up: %v", late)
	}
	e.waitTopUp(lateRef, domain.TopUpCredited)
	if got := balance(); got != "4500" {
		t.Fatalf("balance with the lapsed extension's payment: %s", got)
	}
	var debits int
	if err := e.db.Get(&debits, `SELECT count(*) FROM ledger_transactions WHERE memo LIKE 'rental extension %'`); err != nil || debits != 2 {
		t.Fatalf("extension debits: %d %v", debits, err)
	}
	e.waitFor("the extension top-up's activity done", func() bool {
		d, err := e.tc.DescribeWorkflow(context.Background(), "topup-"+payRef, "")
		return err == nil && len(d.RawResponse.GetPendingActivities()) == 0
	})
	replayHistory(t, e.tc, "rental-"+ref, "rental_customer_extension.json")
	replayHistory(t, e.tc, "topup-"+payRef, "topup_extension_applied.json")
}

func (e *env) extensionState(orderRef, ref string) string {
	e.t.Helper()
	var state string
	_ = e.db.Get(&state, `SELECT state FROM rental_extensions WHERE order_ref = $1 AND ref = $2`, orderRef, ref)
	return state
}
