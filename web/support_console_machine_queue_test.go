package web

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// The console's line for machines: each line (model and size) in payment
// order with positions, the customer, the amount paid, when and how long
// ago in French, and a link to the order's file, whose status reads in
// French; an order served leaves the page and the others move up; the page
// is for agents only.
func TestConsoleMachineQueue(t *testing.T) {
	ch := newConsoleHarness(t)
	order := func(email string, lots int) string {
		token, _ := ch.customer(email)
		var created struct {
			Order api.OrderView `json:"order"`
		}
		ch.apiPost(token, "/v1/orders", fmt.Sprintf(`{"gpu_model":"rtx-a5000","lots":%d,"duration_days":3,"preset":"pytorch"}`, lots), &created)
		return created.Order.Ref
	}
	early := order("early@example.com", 1)
	late := order("late@example.com", 1)
	pair := order("pair@example.com", 2)
	for ref, ago := range map[string]string{early: "2 hours 5 minutes 30 seconds", late: "12 minutes 10 seconds", pair: "3 days 4 hours"} {
		if _, err := ch.db.Exec(`UPDATE orders SET status = $2, paid_cents = total_cents, paid_at = now() - $3::interval WHERE ref = $1`,
			ref, domain.StatusWaitingForMachine, ago); err != nil {
			t.Fatal(err)
		}
	}

	b := ch.browser()
	if rec := b.do(http.MethodGet, "/support/machine-queue", nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("signed out: %d", rec.Code)
	}
	b.signIn(consoleToken)
	page := b.get("/support/machine-queue")
	row := func(ref string) string {
		t.Helper()
		m := regexp.MustCompile(`<tr data-waiting="` + ref + `">.*?</tr>`).FindString(page)
		if m == "" {
			t.Fatalf("no row for %s:\n%s", ref, page)
		}
		return m
	}
	for ref, want := range map[string][]string{
		early: {`<td class="num">1</td>`, `<a href="/support/orders/` + early + `">` + early + `</a>`, "early@example.com",
			"NVIDIA RTX A5000 · 1 GPU", "23,57 USD", " UTC)</td>", "<td>2 h 05 min</td>"},
		late: {`<td class="num">2</td>`, "late@example.com", "<td>12 min</td>"},
		pair: {`<td class="num">1</td>`, "NVIDIA RTX A5000 · 2 GPU", "pair@example.com", "<td>3 j 4 h</td>"},
	} {
		r := row(ref)
		for _, w := range want {
			if !strings.Contains(r, w) {
				t.Errorf("row of %s lacks %q: %s", ref, w, r)
			}
		}
	}
	if !strings.Contains(page, "3 commandes payées attendent une machine.") ||
		strings.Index(page, `data-line="rtx-a5000/1"`) > strings.Index(page, `data-line="rtx-a5000/2"`) ||
		strings.Index(page, row(early)) > strings.Index(page, row(late)) {
		t.Fatalf("lines or their order:\n%s", page)
	}
	if file := b.get("/support/orders/" + late); !strings.Contains(file, `<dd class="file-status">En attente d&#39;une machine</dd>`) {
		t.Fatalf("the order's file lacks its status in French:\n%s", file)
	}

	// The first is served: it leaves the line, the next moves up.
	if _, err := ch.db.Exec(`UPDATE orders SET status = $2 WHERE ref = $1`, early, domain.StatusProvisioning); err != nil {
		t.Fatal(err)
	}
	page = b.get("/support/machine-queue")
	if strings.Contains(page, `data-waiting="`+early+`"`) || !strings.Contains(row(late), `<td class="num">1</td>`) ||
		!strings.Contains(page, "2 commandes payées attendent une machine.") {
		t.Fatalf("after the first served:\n%s", page)
	}
	if !strings.Contains(page, `href="/support/machine-queue"`) {
		t.Fatal("the console's navigation lacks the line for machines")
	}
}

func TestFrenchWait(t *testing.T) {
	for secs, want := range map[int64]string{
		0: "moins d'une minute", 59: "moins d'une minute", 60: "1 min", 59*60 + 59: "59 min",
		3600: "1 h", 2*3600 + 5*60: "2 h 05 min", 86400: "1 j", 3*86400 + 4*3600 + 59*60: "3 j 4 h",
	} {
		if got := frenchWait(secs); got != want {
			t.Errorf("frenchWait(%d) = %q, want %q", secs, got, want)
		}
	}
}
