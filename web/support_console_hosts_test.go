package web

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/domain"
)

// The operators' view of hosts: state and why (a host a customer made
// dirty included), the order holding a host, the last release check; repair
// and retire go through a confirmation page to the inventory's code, are
// audited, and refusals say why in French.
func TestConsoleHosts(t *testing.T) {
	ch := newConsoleHarness(t, domain.RoleOperator)
	ref, _ := ch.lateOrder("hosts@example.com")
	const fp = "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	for _, q := range []string{
		`INSERT INTO gpu_hosts (id, name, address, host_key_fingerprint, gpu_model, gpu_count, state, note) VALUES
			(1, 'gpu-busy', '10.0.0.1', '` + fp + `', 'rtx-a5000', 1, 'in_use', ''),
			(2, 'gpu-dirty', '10.0.0.2', '` + fp + `', 'rtx-a5000', 1, 'available',
				'remise en service automatique ; le client de la commande ` + ref + ` avait sali la machine : processus resté : xmrig'),
			(3, 'gpu-drained', '10.0.0.3', '` + fp + `', 'h100-80g', 8, 'draining', 'ventilateur changé')`,
		`INSERT INTO host_reservations (order_ref, host_id, host_name, unix_user, state, created_at) VALUES ($1, 1, 'gpu-busy', 'kd_c1', 'active', now() - interval '1 hour')`,
		`INSERT INTO host_reservations (order_ref, host_id, host_name, unix_user, state, released_at, customer_flag, cleaned_at)
			VALUES ($1, 2, 'gpu-dirty', 'kd_c2', 'released', now() - interval '10 minutes', 'processus resté : xmrig', now() - interval '10 minutes')`,
	} {
		var err error
		if strings.Contains(q, "$1") {
			_, err = ch.db.Exec(q, ref)
		} else {
			_, err = ch.db.Exec(q)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	b := ch.browser()
	if rec := b.do(http.MethodGet, "/support/hosts", nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("signed out: %d", rec.Code)
	}
	b.signIn(consoleToken)
	page := b.get("/support/hosts")
	for _, want := range []string{
		`data-host="gpu-busy" data-state="in_use"`, `<a href="/support/orders/` + ref + `">` + ref + `</a> depuis le`,
		`avait sali la machine : processus resté : xmrig`, `sali par le client : processus resté : xmrig`,
		`en retrait : <span class="host-note">ventilateur changé</span>`, "aucune location terminée sur cet hôte",
	} {
		if !strings.Contains(page, want) {
			t.Fatalf("hosts page lacks %q:\n%s", want, page)
		}
	}
	csrf := agentCSRF(t, page)

	// No reason: refused before anything is recorded.
	rec := b.do(http.MethodPost, "/support/hosts/gpu-drained/confirm", url.Values{"csrf": {csrf}, "action": {"repair"}, "reason": {""}})
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "Indiquez la raison") {
		t.Fatalf("no reason: %d", rec.Code)
	}
	// Repair: confirmation, then the inventory's code puts it back.
	form := url.Values{"csrf": {csrf}, "action": {"repair"}, "reason": {"ventilateur remplacé, testé"}}
	rec = b.do(http.MethodPost, "/support/hosts/gpu-drained/confirm", form)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "revient en rotation") {
		t.Fatalf("confirmation: %d %s", rec.Code, rec.Body.String())
	}
	if n := ch.count(`SELECT count(*) FROM support_actions`); n != 0 {
		t.Fatalf("the confirmation page acted: %d rows", n)
	}
	rec = b.do(http.MethodPost, "/support/hosts/gpu-drained/act", b.confirmed("/support/hosts/gpu-drained/confirm", form))
	if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/support/hosts?action=") {
		t.Fatalf("repair: %d %s", rec.Code, rec.Body.String())
	}
	if n := ch.count(`SELECT count(*) FROM gpu_hosts WHERE name = 'gpu-drained' AND state = 'available' AND note = 'par alice : ventilateur remplacé, testé'`); n != 1 {
		t.Fatal("the repair did not put the host back")
	}
	if n := ch.count(`SELECT count(*) FROM support_actions WHERE action = 'repair_host' AND target_ref = 'host:gpu-drained'
		AND agent = 'alice' AND reason = 'ventilateur remplacé, testé' AND outcome = 'done'`); n != 1 {
		t.Fatalf("audit rows: %d", n)
	}
	loc, _, _ := strings.Cut(rec.Header().Get("Location"), "#") // a browser keeps the fragment
	page = b.get(loc)
	if !strings.Contains(page, "(Remise en service d&#39;un hôte, gpu-drained) : effectuée.") {
		t.Fatalf("no notice (%s):\n%s", rec.Header().Get("Location"), page[strings.Index(page, "<main"):][:600])
	}

	// A host an order holds: the repair is refused (stable code, French
	// message), audited as rejected, the host unchanged.
	rec = b.do(http.MethodPost, "/support/hosts/gpu-busy/act", b.confirmed("/support/hosts/gpu-busy/confirm",
		url.Values{"csrf": {csrf}, "action": {"repair"}, "reason": {"essai"}}))
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "Une commande occupe cet hôte") {
		t.Fatalf("busy host: %d %s", rec.Code, rec.Body.String())
	}
	if n := ch.count(`SELECT count(*) FROM support_actions WHERE target_ref = 'host:gpu-busy' AND outcome = 'rejected' AND detail LIKE 'host_busy: %'`); n != 1 {
		t.Fatalf("busy refusal not audited: %d", n)
	}
	// Retire: out of rotation; the rental keeps its host.
	rec = b.do(http.MethodPost, "/support/hosts/gpu-busy/confirm", url.Values{"csrf": {csrf}, "action": {"retire"}, "reason": {"disque à changer"}})
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "La commande "+ref+" qui l&#39;occupe le garde") {
		t.Fatalf("retire confirmation: %d %s", rec.Code, rec.Body.String())
	}
	rec = b.do(http.MethodPost, "/support/hosts/gpu-busy/act", b.confirmed("/support/hosts/gpu-busy/confirm",
		url.Values{"csrf": {csrf}, "action": {"retire"}, "reason": {"disque à changer"}}))
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("retire: %d %s", rec.Code, rec.Body.String())
	}
	if n := ch.count(`SELECT count(*) FROM gpu_hosts h JOIN host_reservations r ON r.host_id = h.id AND r.state = 'active'
		WHERE h.name = 'gpu-busy' AND h.state = 'draining'`); n != 1 {
		t.Fatal("retire did not drain the host, or took it from its order")
	}
	// Unknown host; forged form without the session's CSRF token.
	rec = b.do(http.MethodPost, "/support/hosts/nope/confirm", url.Values{"csrf": {csrf}, "action": {"retire"}, "reason": {"essai"}})
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "Hôte introuvable.") {
		t.Fatalf("unknown host: %d", rec.Code)
	}
	forged := b.confirmed("/support/hosts/gpu-dirty/confirm", url.Values{"csrf": {csrf}, "action": {"retire"}, "reason": {"essai"}})
	forged.Set("csrf", "forged")
	rec = b.do(http.MethodPost, "/support/hosts/gpu-dirty/act", forged)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("forged CSRF: %d", rec.Code)
	}
	if n := ch.count(`SELECT count(*) FROM support_actions`); n != 3 {
		t.Fatalf("audit rows: %d, want 3", n)
	}
}

// The console's forms act only for a signed-in agent posting from this
// site: signed out, or from another Origin (even with the session's CSRF
// token), nothing is recorded; and a console session is no customer's.
func TestConsoleFormsRefused(t *testing.T) {
	ch := newConsoleHarness(t, domain.RoleOperator)
	ref, accountID := ch.lateOrder("forms@example.com")
	if _, err := ch.db.Exec(`INSERT INTO gpu_hosts (name, address, host_key_fingerprint, gpu_model, gpu_count)
		VALUES ('gpu-1', '10.0.0.1', 'SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'rtx-a5000', 1)`); err != nil {
		t.Fatal(err)
	}
	req, err := ch.db.CreateSupportRequest(context.Background(), domain.SupportRequest{OrderRef: ref, AccountID: accountID, Message: "Aide"})
	if err != nil {
		t.Fatal(err)
	}
	agentBrowser := ch.browser()
	agentBrowser.signIn(consoleToken)
	csrf := agentCSRF(t, agentBrowser.get("/support/orders/"+ref))
	answer := "/support/support-requests/" + strconv.FormatInt(req.ID, 10) + "/answer"
	forms := map[string]url.Values{
		"/support/orders/" + ref + "/confirm": {"csrf": {csrf}, "action": {"end-early"}, "reason": {"essai interdit"}},
		"/support/orders/" + ref + "/act":     {"csrf": {csrf}, "action": {"end-early"}, "reason": {"essai interdit"}},
		answer:                                {"csrf": {csrf}, "ref": {ref}, "message": {"réponse interdite"}},
		"/support/hosts/gpu-1/act":            {"csrf": {csrf}, "action": {"retire"}, "reason": {"essai interdit"}},
		"/support/logout":                     {"csrf": {csrf}},
	}
	nothingDone := func(who string) {
		t.Helper()
		if n := ch.count(`SELECT count(*) FROM support_actions`) + len(ch.wf.recorded()) +
			ch.count(`SELECT count(*) FROM support_requests WHERE status <> 'open'`) +
			ch.count(`SELECT count(*) FROM gpu_hosts WHERE state <> 'available'`); n != 0 {
			t.Fatalf("%s: something was done (%d)", who, n)
		}
	}
	// Signed out (no cookie): sent to the sign-in page.
	for path, form := range forms {
		rec := ch.browser().do(http.MethodPost, path, form)
		if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/support/login") {
			t.Fatalf("signed out, %s: %d %q", path, rec.Code, rec.Header().Get("Location"))
		}
	}
	nothingDone("signed out")
	// The agent's own browser, but a form of another site.
	agentBrowser.origin = "https://evil.example"
	for path, form := range forms {
		if rec := agentBrowser.do(http.MethodPost, path, form); rec.Code != http.StatusForbidden {
			t.Fatalf("cross-site %s: %d", path, rec.Code)
		}
	}
	nothingDone("cross-site")
	agentBrowser.origin = ""
	agentBrowser.get("/support") // still signed in

	// The console session is no customer's: the customer pages ask for a
	// customer's login, and their forms create nothing.
	for _, path := range []string{"/orders", "/orders/" + ref, "/balance"} {
		rec := agentBrowser.do(http.MethodGet, path, nil)
		if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/login") {
			t.Fatalf("agent on %s: %d %q", path, rec.Code, rec.Header().Get("Location"))
		}
	}
	for path, form := range map[string]url.Values{
		"/orders/" + ref + "/support": {"csrf": {csrf}, "message": {"écrit par un agent"}},
		"/orders":                     {"csrf": {csrf}, "gpu_model": {"rtx-a5000"}, "lots": {"1"}, "duration_days": {"3"}, "preset": {"pytorch"}},
		"/topups":                     {"csrf": {csrf}, "amount": {"50"}},
	} {
		rec := agentBrowser.do(http.MethodPost, path, form)
		if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/login") {
			t.Fatalf("agent posting %s: %d %q", path, rec.Code, rec.Header().Get("Location"))
		}
	}
	if n := ch.count(`SELECT count(*) FROM support_requests`) + ch.count(`SELECT count(*) FROM orders`) + ch.count(`SELECT count(*) FROM topups`); n != 2 {
		t.Fatalf("the agent created customer records: %d rows, want the 2 of the setup", n)
	}
	nothingDone("agent as a customer")
}
