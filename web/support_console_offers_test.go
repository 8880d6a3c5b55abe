package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// An order's file offers only what its workflow may take in its status
// (the API's allowed_actions, from the phase table): an active rental can
// be extended or ended; a cancelled order nothing, «Prolonger» included,
// and a form left open from before is refused in French on its
// confirmation page, with nothing sent to the API.
func TestConsoleOffersOnlyWhatTheStatusAllows(t *testing.T) {
	ch := newConsoleHarness(t)
	ref, _ := ch.lateOrder("offers@example.com")
	setStatus := func(status string) {
		t.Helper()
		if _, err := ch.db.Exec(`UPDATE orders SET status = $2 WHERE ref = $1`, ref, status); err != nil {
			t.Fatal(err)
		}
	}
	b := ch.browser()
	b.signIn(consoleToken)

	// Awaiting payment (late): attribute, cancel, refund; no extension.
	file := b.get("/support/orders/" + ref)
	for action, want := range map[string]bool{"attribute-payment": true, "cancel": true, "refund": true, "count-exception": true,
		"refund-exception": true, "extend": false, "end-early": false, "retry-provisioning": false} {
		if got := strings.Contains(file, `name="action" value="`+action+`"`); got != want {
			t.Errorf("awaiting payment: %s offered %v, want %v", action, got, want)
		}
	}

	setStatus("active")
	file = b.get("/support/orders/" + ref)
	if !strings.Contains(file, "<summary>Prolonger la location</summary>") || !strings.Contains(file, `value="end-early"`) ||
		strings.Contains(file, `value="count-exception"`) || strings.Contains(file, `value="cancel"`) {
		t.Fatalf("active rental's actions:\n%s", file)
	}
	csrf := agentCSRF(t, file)

	setStatus("cancelled")
	file = b.get("/support/orders/" + ref)
	for _, offered := range []string{"Prolonger", `value="extend"`, `value="end-early"`, `value="cancel"`, `value="refund"`, `value="attribute-payment"`} {
		if strings.Contains(file, offered) {
			t.Fatalf("a cancelled order offers %q:\n%s", offered, file)
		}
	}
	if !strings.Contains(file, "Aucune action du support n'est possible sur ce dossier au statut « Annulée »") {
		t.Fatalf("no word on why nothing is offered:\n%s", file)
	}
	// What the queue settles stays offered: the late payment's refund.
	if !strings.Contains(file, `value="refund-exception"`) {
		t.Fatalf("the queued amount's refund is gone:\n%s", file)
	}
	// «2 jours de plus» from the page left open while it was active.
	rec := b.do(http.MethodPost, "/support/orders/"+ref+"/confirm",
		url.Values{"csrf": {csrf}, "action": {"extend"}, "days": {"2"}, "reason": {"panne de deux jours"}})
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(),
		"Action refusée : « Prolonger la location » n&#39;est pas possible sur cette commande au statut « Annulée »") {
		t.Fatalf("extension of a cancelled order: %d %s", rec.Code, rec.Body.String())
	}
	if n := ch.count(`SELECT count(*) FROM support_actions`); n != 0 || len(ch.wf.recorded()) != 0 {
		t.Fatalf("an action not offered acted: %d rows, calls %v", n, ch.wf.recorded())
	}
}
