package e2e

import (
	"net/http"
	"slices"
	"testing"
)

func register(e *env, first, email string) string {
	e.t.Helper()
	out := e.must(http.StatusCreated, "POST", "/v1/auth/register", "", map[string]any{
		"first_name": first, "last_name": "Test", "email": email,
		"password": "a sufficiently long passphrase", "bearer": true,
	})
	tok := str(out["token"])
	if tok == "" {
		e.t.Fatalf("register: no token in %v", out)
	}
	// Confirmed as if the mailed link were opened: these tests are about
	// orders and payments (an unconfirmed account has one unpaid order and
	// no mail but the link; api and notify test that).
	if _, err := e.db.Exec(`UPDATE accounts SET email_verified_at = now() WHERE lower(email) = lower($1)`, email); err != nil {
		e.t.Fatal(err)
	}
	return tok
}

func order(e *env, token, ref string) (map[string]any, []map[string]any, map[string]any) {
	e.t.Helper()
	out := e.must(http.StatusOK, "GET", "/v1/orders/"+ref, token, nil)
	o, _ := out["order"].(map[string]any)
	var tl []map[string]any
	for _, ev := range asList(out["timeline"]) {
		tl = append(tl, ev.(map[string]any))
	}
	acc, _ := out["access"].(map[string]any)
	return o, tl, acc
}

func asList(v any) []any { l, _ := v.([]any); return l }

func kinds(tl []map[string]any) []string {
	var ks []string
	for _, ev := range tl {
		ks = append(ks, str(ev["kind"]))
	}
	return ks
}

func waitStatus(e *env, token, ref, want string) map[string]any {
	e.t.Helper()
	var o map[string]any
	e.waitFor("order "+ref+" to be "+want, func() bool {
		o, _, _ = order(e, token, ref)
		return str(o["status"]) == want
	})
	return o
}

// Register, quote, order, support attributes the payment, the order goes
// through provisioning to "access available" with the access readable by
// its owner only, support ends it early, teardown is recorded.
func TestRentalPaidBySupportRunsToEndEarly(t *testing.T) {
	e := newEnv(t)
	alice := register(e, "Alice", "alice@example.com")
	bob := register(e, "Bob", "bob@example.com")

	q := e.must(http.StatusOK, "POST", "/v1/quote", "", map[string]any{
		"gpu_model": "b200", "lots": 2, "duration_days": 7, "preset": "pytorch"})
	if str(q["total_gpus"]) != "4" {
		t.Fatalf("quote: %v", q)
	}
	created := e.must(http.StatusCreated, "POST", "/v1/orders", alice, map[string]any{
		"gpu_model": "b200", "lots": 2, "duration_days": 7, "preset": "pytorch"})
	ref := str(created["order"].(map[string]any)["reference"])
	if str(created["order"].(map[string]any)["total_cents"]) != str(q["total_cents"]) {
		t.Fatalf("order total %v != quote total %v", created["order"], q["total_cents"])
	}
	waitStatus(e, alice, ref, "awaiting_payment")

	// Bob sees nothing of Alice's order.
	e.must(http.StatusNotFound, "GET", "/v1/orders/"+ref, bob, nil)

	// Support attributes the payment, with a reason that is audited.
	act := e.must(http.StatusOK, "POST", "/v1/support/orders/"+ref+"/attribute-payment", agentToken,
		map[string]any{"reason": "virement reçu, ticket 42"})
	if a := act["action"].(map[string]any); str(a["agent"]) != "e2e-agent" || str(a["outcome"]) != "done" {
		t.Fatalf("support action: %v", act)
	}

	o := waitStatus(e, alice, ref, "active")
	_, tl, access := order(e, alice, ref)
	if access == nil || str(access["username"]) == "" || str(access["password"]) == "" || str(access["host"]) != "gpu-e2e.local" {
		t.Fatalf("access not shown to the owner: %v", access)
	}
	if str(access["gpu_model_seen"]) != "b200" || str(access["gpu_count_seen"]) != "4" {
		t.Fatalf("verification not shown: %v", access)
	}
	if o["period_start"] == nil || o["period_end"] == nil {
		t.Fatalf("period dates missing: %v", o)
	}
	for _, k := range []string{"created", "payment_confirmed", "paid", "provisioning_step", "access_available"} {
		if !slices.Contains(kinds(tl), k) {
			t.Errorf("timeline lacks %q: %v", k, kinds(tl))
		}
	}
	// The owner's access is not anybody else's.
	e.must(http.StatusNotFound, "GET", "/v1/orders/"+ref, bob, nil)
	// A customer's session is no support token.
	e.must(http.StatusUnauthorized, "POST", "/v1/support/orders/"+ref+"/end-early", alice,
		map[string]any{"reason": "je veux arrêter"})

	e.must(http.StatusOK, "POST", "/v1/support/orders/"+ref+"/end-early", agentToken,
		map[string]any{"reason": "demande du client, ticket 43"})
	waitStatus(e, alice, ref, "ended")
	_, tl, access = order(e, alice, ref)
	for _, k := range []string{"access_revoked", "ended"} {
		if !slices.Contains(kinds(tl), k) {
			t.Errorf("timeline lacks %q after the end: %v", k, kinds(tl))
		}
	}
	if access != nil && access["revoked_at"] == nil {
		t.Errorf("access still valid after the end: %v", access)
	}
	var released string
	if err := e.db.Get(&released, `SELECT state FROM gpu_reservations WHERE order_ref = $1`, ref); err != nil || released != "released" {
		t.Errorf("capacity not released: %q %v", released, err)
	}
	var audited int
	_ = e.db.Get(&audited, `SELECT count(*) FROM support_actions WHERE target_ref = $1 AND agent = 'e2e-agent' AND outcome = 'done'`, ref)
	if audited != 2 {
		t.Errorf("audited support actions = %d, want 2", audited)
	}
	replayHistory(t, e.tc, "rental-"+ref, "rental_support_paid_end_early.json")
}

// A top-up confirmed by support raises the available balance exactly once,
// then pays a rental.
func TestTopUpCreditedOnceThenPaysRental(t *testing.T) {
	e := newEnv(t)
	carol := register(e, "Carol", "carol@example.com")

	tu := e.must(http.StatusCreated, "POST", "/v1/topups", carol, map[string]any{"amount_cents": 10000})
	ref := str(tu["topup"].(map[string]any)["reference"])
	b := e.must(http.StatusOK, "GET", "/v1/balance", carol, nil)
	if str(b["available_cents"]) != "0" || str(b["pending_topups_cents"]) != "10000" {
		t.Fatalf("balance before confirmation: %v", b)
	}
	// Paying a rental now is refused: a pending top-up is not available.
	o1 := e.must(http.StatusCreated, "POST", "/v1/orders", carol, map[string]any{
		"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "notebook"})
	oref := str(o1["order"].(map[string]any)["reference"])
	waitStatus(e, carol, oref, "awaiting_payment")
	_, out := e.call("POST", "/v1/orders/"+oref+"/pay-from-balance", carol, nil)
	if code := str(out["error"].(map[string]any)["code"]); code != "insufficient_balance" {
		t.Fatalf("pay before credit: %v", out)
	}

	e.must(http.StatusOK, "POST", "/v1/support/topups/"+ref+"/attribute-payment", agentToken,
		map[string]any{"reason": "paiement USDT vérifié à la main"})
	e.waitFor("top-up credited", func() bool {
		t := e.must(http.StatusOK, "GET", "/v1/topups/"+ref, carol, nil)
		return str(t["topup"].(map[string]any)["status"]) == "credited"
	})
	// A second attribution is refused or ignored: credited once.
	e.call("POST", "/v1/support/topups/"+ref+"/attribute-payment", agentToken,
		map[string]any{"reason": "doublon par erreur"})
	b = e.must(http.StatusOK, "GET", "/v1/balance", carol, nil)
	if str(b["available_cents"]) != "10000" || str(b["pending_topups_cents"]) != "0" {
		t.Fatalf("balance after credit: %v", b)
	}

	e.must(http.StatusOK, "POST", "/v1/orders/"+oref+"/pay-from-balance", carol, nil)
	waitStatus(e, carol, oref, "active")
	b = e.must(http.StatusOK, "GET", "/v1/balance", carol, nil)
	if str(b["available_cents"]) != "7643" {
		t.Fatalf("balance after paying 23.57: %v", b)
	}
	var sum int64
	if err := e.db.Get(&sum, `SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entries`); err != nil || sum != 0 {
		t.Fatalf("ledger does not balance: %d %v", sum, err)
	}
	var credits int
	_ = e.db.Get(&credits, `SELECT count(*) FROM ledger_transactions WHERE kind = 'topup'`)
	if credits != 1 {
		t.Fatalf("top-up credited %d times", credits)
	}
	replayHistory(t, e.tc, "topup-"+ref, "topup_support_credited.json")
	replayHistory(t, e.tc, "rental-"+oref, "rental_balance_paid.json")
}
