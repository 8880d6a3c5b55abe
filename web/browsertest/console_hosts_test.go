package browsertest

import (
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/domain"
)

// The operators' view of hosts in Chromium: the inventory (a host its
// last customer made dirty, a host an order holds), a retire through the
// confirmation page, audited; then a form of another site, posted by the
// agent's own browser with the session's CSRF token, is refused.
func TestSupportConsoleHosts(t *testing.T) {
	s := newShop(t, shopOptions{roles: map[string]domain.SupportRoles{apptest.AgentName: {domain.RoleOperator}}})
	customer := browser(t)
	s.register(t, customer, "Eve", "eve@example.com")
	ref := s.orderThroughSite(t, customer, "rtx-a5000", 1, 3)
	const fp = "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	s.execSQL(t, `INSERT INTO gpu_hosts (id, name, address, host_key_fingerprint, gpu_model, gpu_count, state, note) VALUES
		(901, 'gpu-a5000-01', '203.0.113.10', '`+fp+`', 'rtx-a5000', 1, 'in_use', ''),
		(902, 'gpu-a5000-02', '203.0.113.11', '`+fp+`', 'rtx-a5000', 1, 'broken',
			'réparation refusée, nettoyage incomplet : kd_c2 (`+ref+`) : processus 4242 (xmrig) survivant à SIGKILL ; du fait du client : tâche cron installée'),
		(903, 'gpu-h100-01', '203.0.113.12', '`+fp+`', 'h100-80g', 8, 'available', '')`)
	s.execSQL(t, `INSERT INTO host_reservations (order_ref, host_id, host_name, unix_user, state) VALUES ($1, 901, 'gpu-a5000-01', 'kd_c1', 'active')`, ref)
	s.execSQL(t, `INSERT INTO host_reservations (order_ref, host_id, host_name, unix_user, state, released_at, failure, customer_flag)
		VALUES ($1, 902, 'gpu-a5000-02', 'kd_c2', 'released', now(), 'processus 4242 (xmrig) survivant à SIGKILL', 'tâche cron installée')`, ref)

	agent := browser(t)
	run(t, agent, "sign in",
		chromedp.Navigate(s.srv.URL+"/support/hosts"),
		typeIn("#token", apptest.AgentToken),
		click(`form[action="/support/login"] button[type=submit]`),
		visible("article.host-card"),
	)
	if got := text(t, agent, `[data-host="gpu-a5000-02"] .host-check`); !strings.Contains(got, "traces restées (processus 4242 (xmrig) survivant à SIGKILL)") ||
		!strings.Contains(got, "sali par le client : tâche cron installée") {
		t.Fatalf("last check of the dirty host: %q", got)
	}
	if got := text(t, agent, `[data-host="gpu-a5000-02"] .host-state`); !strings.HasPrefix(got, "en panne : réparation refusée") {
		t.Fatalf("broken host: %q", got)
	}
	if got := text(t, agent, `[data-host="gpu-a5000-01"] .host-order`); !strings.HasPrefix(got, ref+" depuis le ") {
		t.Fatalf("reservation: %q", got)
	}
	screenshots(t, agent, "console-hosts")

	card := `[data-host="gpu-h100-01"] `
	run(t, agent, "retire form",
		click(card+`details.action summary`),
		typeIn(card+`textarea[name=reason]`, "ventilateur bruyant, intervention demain"),
		click(card+`button[type=submit]`),
		visible("ul.changes"),
	)
	if got := text(t, agent, "ul.changes"); !strings.Contains(got, "L'hôte gpu-h100-01 (8 × NVIDIA H100 80GB, disponible aujourd'hui) sort de la rotation") {
		t.Fatalf("confirmation: %q", got)
	}
	run(t, agent, "confirm", click(`form.actions button[type=submit]`), visible(".alert.notice"))
	if got := text(t, agent, ".alert.notice"); !strings.Contains(got, "Retrait d'un hôte de la rotation, gpu-h100-01) : effectuée") {
		t.Fatalf("after the retire: %q", got)
	}
	if got := text(t, agent, card+".host-state"); got != "en retrait : par watchtest-agent : ventilateur bruyant, intervention demain" {
		t.Fatalf("retired host: %q", got)
	}
	if got := text(t, agent, "table.host-actions tbody"); !strings.Contains(got, "watchtest-agent") || !strings.Contains(got, "ventilateur bruyant") {
		t.Fatalf("audit: %q", got)
	}

	// Another site's page posts a repair form to the console, from the
	// agent's own browser (signed in, same site for the cookie) and even
	// with the session's CSRF token: its Origin is refused.
	csrf := eval[string](t, agent, `document.querySelector("input[name=csrf]").value`)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><form method="post" action="%s/support/hosts/gpu-h100-01/act">
			<input name="csrf" value="%s"><input name="action" value="repair"><input name="reason" value="pirate"></form>
			<script>document.forms[0].submit()</script>`, s.srv.URL, template.HTMLEscapeString(csrf))
	}))
	t.Cleanup(evil.Close)
	run(t, agent, "another site's form", chromedp.Navigate(evil.URL))
	waitText(t, agent, "body", "Requête refusée : elle provient d'un autre site que Kernodeck.")
	var n int
	if err := s.env.DB.Get(&n, `SELECT count(*) FROM support_actions WHERE reason = 'pirate'`); err != nil || n != 0 {
		t.Fatalf("another site's form acted: %d %v", n, err)
	}
	run(t, agent, "inventory", chromedp.Navigate(s.srv.URL+"/support/hosts"), visible("article.host-card"))
	if got := text(t, agent, card+".host-state"); !strings.HasPrefix(got, "en retrait") {
		t.Fatalf("the host after another site's form: %q", got)
	}
}
