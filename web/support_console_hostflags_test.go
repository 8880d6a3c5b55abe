package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/domain"
)

// A host its customer made dirty on purpose (issue 20: the teardown's
// report on the reservation) is in support's queue with the order, the
// customer, the host and what they did; the order's file shows it as open
// with the action to close it; once closed (confirmation page, audit row)
// it leaves the queue and the file says when it was closed.
func TestConsoleHostFlag(t *testing.T) {
	ch := newConsoleHarness(t, domain.RoleOperator)
	ref, _ := ch.lateOrder("flag@example.com")
	const flag = "/home/kd_c9 : le client en a donné des fichiers à d'autres uids (100000 )"
	if _, err := ch.db.Exec(`INSERT INTO gpu_hosts (id, name, address, host_key_fingerprint, gpu_model, gpu_count, state, note)
		VALUES (9, 'gpu-host-9', '10.0.0.9', 'SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'rtx-a5000', 1, 'available', '')`); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.db.Exec(`INSERT INTO host_reservations (order_ref, host_id, host_name, unix_user, state, released_at, customer_flag, customer_flag_at)
		VALUES ($1, 9, 'gpu-host-9', 'kd_c9', 'released', now(), $2, now())`, ref, flag); err != nil {
		t.Fatal(err)
	}
	b := ch.browser()
	b.signIn(consoleToken)
	queue := b.get("/support")
	for _, want := range []string{"Machines salies par le client", "1 signalement ouvert",
		`<tr data-host-flag="` + ref + `"><th scope="row"><a href="/support/orders/` + ref + `">` + ref + `</a></th><td>flag@example.com</td><td><code>gpu-host-9</code> · disponible</td><td>` +
			strings.ReplaceAll(flag, "'", "&#39;") + `</td>`} {
		if !strings.Contains(queue, want) {
			t.Fatalf("queue lacks %q:\n%s", want, queue)
		}
	}
	file := b.get("/support/orders/" + ref)
	for _, want := range []string{"Sali par le client : ", "signalement ouvert", `value="close-host-flag"`} {
		if !strings.Contains(file, want) {
			t.Fatalf("file lacks %q:\n%s", want, file)
		}
	}
	form := url.Values{"csrf": {agentCSRF(t, file)}, "action": {"close-host-flag"}, "reason": {"client averti par e-mail"}}
	rec := b.do(http.MethodPost, "/support/orders/"+ref+"/confirm", form)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "Le signalement de l&#39;hôte gpu-host-9") {
		t.Fatalf("confirmation: %d %s", rec.Code, rec.Body.String())
	}
	if rec = b.do(http.MethodPost, "/support/orders/"+ref+"/act", b.confirmed("/support/orders/"+ref+"/confirm", form)); rec.Code != http.StatusSeeOther {
		t.Fatalf("close: %d %s", rec.Code, rec.Body.String())
	}
	if n := ch.count(`SELECT count(*) FROM support_actions WHERE action = 'close_host_flag' AND agent = 'alice' AND outcome = 'done'`); n != 1 {
		t.Fatalf("audit rows: %d", n)
	}
	if queue = b.get("/support"); !strings.Contains(queue, "Aucune machine salie par un client.") {
		t.Fatalf("closed flag still in the queue:\n%s", queue)
	}
	if file = b.get("/support/orders/" + ref); !strings.Contains(file, "signalement clos le") || strings.Contains(file, `value="close-host-flag"`) {
		t.Fatalf("file after the close:\n%s", file)
	}
}
