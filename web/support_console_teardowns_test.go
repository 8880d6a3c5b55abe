package web

import (
	"context"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// endingOrder is a customer's order whose teardown is running (ending).
func (ch *consoleHarness) endingOrder(email string) string {
	ch.t.Helper()
	token, _ := ch.customer(email)
	var created struct {
		Order api.OrderView `json:"order"`
	}
	ch.apiPost(token, "/v1/orders", `{"gpu_model":"rtx-a5000","lots":1,"duration_days":3,"preset":"pytorch"}`, &created)
	if _, err := ch.db.Exec(`UPDATE orders SET status = $2, paid_cents = total_cents WHERE ref = $1`,
		created.Order.Ref, domain.StatusEnding); err != nil {
		ch.t.Fatal(err)
	}
	return created.Order.Ref
}

// teardownStuck writes the "teardown_stuck" event as the rental workflow
// does when a teardown step keeps failing.
func (ch *consoleHarness) teardownStuck(ref, step, failure string) {
	ch.t.Helper()
	if err := ch.db.RecordOrderEvent(context.Background(), domain.OrderEvent{OrderRef: ref, Key: domain.KeyTeardownStuck,
		Kind: domain.EventTeardownStuck, Message: "La fin de location prend du retard.", At: time.Now(),
		Data: map[string]any{"step": step, "error": failure}}); err != nil {
		ch.t.Fatal(err)
	}
}

// A rental whose teardown is stuck (ending, with a "teardown_stuck"
// event) is in the queue's «Fins de location bloquées» with a link to its
// file, the host it still holds, what failed and a word on the customer's
// data and access; an ending order whose teardown runs normally and an
// ended one are not. Once the teardown completes, it leaves the queue
// (and its live part).
func TestConsoleTeardownStuck(t *testing.T) {
	ch := newConsoleHarness(t)
	const failure = "ssh: dial tcp 10.0.0.8:22: i/o timeout"
	stuck := ch.endingOrder("stuck@example.com")
	ch.teardownStuck(stuck, "RevokeAccess", failure)
	if _, err := ch.db.Exec(`INSERT INTO gpu_hosts (id, name, address, host_key_fingerprint, gpu_model, gpu_count, state)
		VALUES (8, 'gpu-host-8', '10.0.0.8', 'SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'rtx-a5000', 1, 'in_use')`); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.db.Exec(`INSERT INTO host_reservations (order_ref, host_id, host_name, unix_user, state)
		VALUES ($1, 8, 'gpu-host-8', 'kd_c8', 'active')`, stuck); err != nil {
		t.Fatal(err)
	}
	running := ch.endingOrder("running@example.com") // teardown running, not stuck
	ended := ch.endingOrder("ended@example.com")
	ch.teardownStuck(ended, "ReleaseCapacity", "boom")
	if _, err := ch.db.Exec(`UPDATE orders SET status = $2 WHERE ref = $1`, ended, domain.StatusEnded); err != nil {
		t.Fatal(err)
	}

	b := ch.browser()
	b.signIn(consoleToken)
	queue := b.get("/support")
	for _, want := range []string{"Fins de location bloquées", "1 fin de location bloquée",
		"la machine peut toujours garder les données du client et son accès. Vérifiez l'hôte depuis le dossier de la commande",
		`<tr data-teardown="` + stuck + `"><th scope="row"><a href="/support/orders/` + stuck + `">` + stuck + `</a></th><td>stuck@example.com</td><td><code>gpu-host-8</code> · NVIDIA RTX A5000 · 1 GPU</td><td>` +
			html.EscapeString("retrait de l'accès du client : "+failure) + `</td>`} {
		if !strings.Contains(queue, want) {
			t.Fatalf("queue lacks %q:\n%s", want, queue)
		}
	}
	for _, ref := range []string{running, ended} {
		if strings.Contains(queue, `data-teardown="`+ref+`"`) {
			t.Fatalf("%s listed as a stuck teardown:\n%s", ref, queue)
		}
	}
	version := liveVersion.FindStringSubmatch(queue)[1]

	// The teardown completes: the order is ended and leaves the queue.
	now := time.Now()
	if err := ch.db.RecordOrderEvent(context.Background(), domain.OrderEvent{OrderRef: stuck, Key: domain.KeyEnded,
		Kind: domain.EventEnded, Message: "Location terminée.", Status: domain.StatusEnded, At: now, EndedAt: &now}); err != nil {
		t.Fatal(err)
	}
	live := b.do(http.MethodGet, "/support/live?v="+version, nil)
	if live.Code != http.StatusOK || strings.Contains(live.Body.String(), `data-teardown="`) ||
		!strings.Contains(live.Body.String(), "Aucune fin de location bloquée.") {
		t.Fatalf("live queue after the teardown: %d %s", live.Code, live.Body.String())
	}
}
