package web

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/domain"
)

// The back office's list from PostgreSQL: orders with their customer and
// a link to each file, a status filter, a search by email, a filter
// refused on its field (400, no table), the top-ups' tab, and the CSV of
// the same filters with a formula in a name neutralised; an export
// refused comes back on the list in French.
func TestConsoleList(t *testing.T) {
	ch := newConsoleHarness(t)
	ref, accountID := ch.lateOrder("liste@example.com")
	if _, err := ch.db.Exec(`UPDATE accounts SET first_name = '@SUM(A1)' WHERE id = $1`, accountID); err != nil {
		t.Fatal(err)
	}
	b := ch.browser()
	b.signIn(consoleToken)

	page := b.get("/support/list")
	for _, want := range []string{`<tr data-case="` + ref + `">`, `href="/support/orders/` + ref + `"`, "liste@example.com",
		"BTC sur Bitcoin", "23,57 USD", `href="/support/list.csv?type=order"`, "Dossiers"} {
		if !strings.Contains(page, want) {
			t.Fatalf("list lacks %q:\n%s", want, page)
		}
	}
	if p := b.get("/support/list?statut=active"); strings.Contains(p, `data-case="`) || !strings.Contains(p, "Aucun dossier ne correspond") {
		t.Fatalf("an active filter shows the awaiting order:\n%s", p)
	}
	if p := b.get("/support/list?email=LISTE%40EX"); !strings.Contains(p, `data-case="`+ref+`"`) {
		t.Fatalf("the email search misses it:\n%s", p)
	}
	rec := b.do(http.MethodGet, "/support/list?du=05%2F12%2F2026&au=04%2F12%2F2026", nil)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `id="au-error"`) ||
		!strings.Contains(rec.Body.String(), "La période est à l&#39;envers") || strings.Contains(rec.Body.String(), `data-case="`) {
		t.Fatalf("a period the wrong way round: %d\n%s", rec.Code, rec.Body.String())
	}
	if p := b.get("/support/list?type=topup"); strings.Contains(p, `data-case="`+ref+`"`) || strings.Contains(p, `id="modele"`) {
		t.Fatalf("the top-ups' tab shows an order or a model:\n%s", p)
	}
	// The payouts' tab: a payout with its status in French, linked to
	// the payouts' page of that status.
	if _, err := ch.db.Exec(`INSERT INTO payouts (ref, account_id, asset, network, address, amount_cents, fee_cents, decimals,
		amount_base, rate, rate_at, status, needs_two, request_key)
		VALUES ('PO-LISTE0001', $1, 'LTC', 'litecoin', 'ltc1qaddressoftwentyormore', 5000, 10, 8, 1000, 90, now(), 'approved', false, 'k1')`,
		accountID); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/support/list?type=payout&moyen=LTC%2Flitecoin"); !strings.Contains(p, `href="/support/payouts?status=approved#payout-PO-LISTE0001"`) ||
		!strings.Contains(p, "Validé, en attente d&#39;envoi") || strings.Contains(p, `data-case="`+ref+`"`) {
		t.Fatalf("the payouts' tab:\n%s", p)
	}

	rec = b.do(http.MethodGet, "/support/list.csv?email=liste", nil)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/csv; charset=utf-8" {
		t.Fatalf("csv: %d %s", rec.Code, rec.Body.String())
	}
	lines, err := csv.NewReader(strings.NewReader(rec.Body.String())).ReadAll()
	if err != nil || len(lines) != 2 || lines[1][1] != ref || lines[1][6] != "'@SUM(A1)" || lines[1][14] != "BTC" {
		t.Fatalf("csv lines %q %v", lines, err)
	}
	rec = b.do(http.MethodGet, "/support/list.csv?statut=lost", nil)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "Export refusé : Statut inconnu") {
		t.Fatalf("an export refused: %d %s", rec.Code, rec.Body.String())
	}
}

// What a role cannot do, the console does not offer, and the server
// refuses in French: an agent's pages have no hosts link nor host flags,
// the hosts page answers 403, a review forced past the hidden buttons is
// refused before its confirmation; an operator's have the hosts.
func TestConsoleRolesHide(t *testing.T) {
	ch := newConsoleHarness(t)
	b := ch.browser()
	b.signIn(consoleToken)
	queue := b.get("/support")
	if strings.Contains(queue, `href="/support/hosts"`) || strings.Contains(queue, "Machines salies par le client") ||
		!strings.Contains(queue, "rôle agent") {
		t.Fatalf("an agent's queue offers the hosts:\n%s", queue)
	}
	rec := b.do(http.MethodGet, "/support/hosts", nil)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "Réservé au rôle « opérateur »") {
		t.Fatalf("an agent's hosts page: %d %s", rec.Code, rec.Body.String())
	}

	// A review forced past the hidden buttons: refused, no confirmation.
	rec = b.do(http.MethodPost, "/support/approvals/1/confirm", url.Values{"csrf": {agentCSRF(t, queue)}, "action": {"approve"},
		"reason": {"je valide"}})
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "Réservé au rôle « senior »") ||
		strings.Contains(rec.Body.String(), "Confirmer") {
		t.Fatalf("an agent's approval: %d %s", rec.Code, rec.Body.String())
	}

	op := newConsoleHarness(t, domain.RoleOperator)
	ob := op.browser()
	ob.signIn(consoleToken)
	if q := ob.get("/support"); !strings.Contains(q, `href="/support/hosts"`) || !strings.Contains(q, "Machines salies par le client") ||
		!strings.Contains(q, "rôles agent, opérateur") {
		t.Fatalf("an operator's queue lacks the hosts:\n%s", q)
	}
}
