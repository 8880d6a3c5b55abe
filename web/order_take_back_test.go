package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/kernodeck/kernodeck/workflows"
)

// takeBackWorkflows records the refunds asked and answers the refundable.
type takeBackWorkflows struct {
	startNothing
	mu      sync.Mutex
	refunds []workflows.Refund
}

func (w *takeBackWorkflows) Refundable(context.Context, string) (int64, error) { return 155900, nil }

func (w *takeBackWorkflows) Refund(_ context.Context, _ string, r workflows.Refund) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refunds = append(w.refunds, r)
	return nil
}

// A paid order waiting for a machine shows its place in line and a link to
// a confirmation page whose form takes the payment back to the balance;
// without the CSRF token, or for another customer, nothing is refunded.
func TestTakeBackFromTheLineOnItsPage(t *testing.T) {
	wf := &takeBackWorkflows{}
	sh := newSiteHarness(t, wf)
	ada := sh.signedIn("ada@example.com", true)
	rec := ada.do("POST", "/orders", url.Values{"csrf": {ada.csrf(ada.do("GET", "/compte", nil).Body.String())},
		"gpu_model": {"b200"}, "lots": {"1"}, "duration_days": {"7"}, "preset": {"python"}})
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("order: %d %s", rec.Code, rec.Body.String())
	}
	orderPath, _, _ := strings.Cut(rec.Header().Get("Location"), "#")
	if page := ada.do("GET", orderPath, nil).Body.String(); strings.Contains(page, orderPath+"/take-back") {
		t.Fatalf("an unpaid order offers to take its payment back")
	}
	ref := strings.TrimPrefix(orderPath, "/orders/")
	// Two paid orders of the model wait: one paid earlier than ada's.
	if _, err := sh.db.Exec(`UPDATE orders SET status = 'waiting_for_machine', paid_cents = total_cents, paid_at = now() WHERE ref = $1`, ref); err != nil {
		t.Fatal(err)
	}
	bob := sh.signedIn("bob@example.com", true)
	rec = bob.do("POST", "/orders", url.Values{"csrf": {bob.csrf(bob.do("GET", "/compte", nil).Body.String())},
		"gpu_model": {"b200"}, "lots": {"1"}, "duration_days": {"7"}, "preset": {"python"}})
	bobPath, _, _ := strings.Cut(rec.Header().Get("Location"), "#")
	if _, err := sh.db.Exec(`UPDATE orders SET status = 'waiting_for_machine', paid_cents = total_cents, paid_at = now() - interval '1 hour'
		WHERE ref = $1`, strings.TrimPrefix(bobPath, "/orders/")); err != nil {
		t.Fatal(err)
	}
	page := ada.do("GET", orderPath, nil).Body.String()
	for _, want := range []string{`data-position="2"`, "en position 2", `href="` + orderPath + `/take-back"`, "commencera à la livraison"} {
		if !strings.Contains(page, want) {
			t.Errorf("the waiting order's page lacks %q", want)
		}
	}

	confirm := ada.do("GET", orderPath+"/take-back", nil).Body.String()
	if !strings.Contains(confirm, "Reprendre mon paiement") {
		t.Fatalf("confirmation page: %s", confirm)
	}
	mallory := sh.signedIn("mallory@example.com", true)
	malloryCSRF := mallory.csrf(mallory.do("GET", "/compte", nil).Body.String())
	for name, r := range map[string]int{
		"no CSRF":        ada.do("POST", orderPath+"/take-back", url.Values{}).Code,
		"another site":   ada.postFrom("https://evil.example", orderPath+"/take-back", url.Values{"csrf": {ada.csrf(confirm)}}).Code,
		"another's post": mallory.do("POST", orderPath+"/take-back", url.Values{"csrf": {malloryCSRF}}).Code,
	} {
		if r != http.StatusForbidden && r != http.StatusNotFound {
			t.Errorf("%s: %d", name, r)
		}
	}
	if len(wf.refunds) != 0 {
		t.Fatalf("refunded by a refused request: %v", wf.refunds)
	}
	rec = ada.do("POST", orderPath+"/take-back", url.Values{"csrf": {ada.csrf(confirm)}})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != orderPath+"?info=taken-back" {
		t.Fatalf("take back: %d %s", rec.Code, rec.Body.String())
	}
	if len(wf.refunds) != 1 || wf.refunds[0].AmountCents != 155900 {
		t.Fatalf("refunds %v", wf.refunds)
	}
}
