package browsertest

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/domain"
)

// The back office in Chromium, on the whole service (issue 39, item 4):
// an agent (no other role) opens « Dossiers », pages through every order
// two at a time and back, filters by model and a fragment of the
// customer's name, sees a period the wrong way round refused on its field
// with nothing listed, downloads the filtered list as CSV (its rows are
// the page's, a customer's formula neutralised), and is refused the
// hosts page in French, its link absent. The pages read in French under
// the strict CSP and pass the page checks.
func TestSupportConsoleBackOffice(t *testing.T) {
	s := newShop(t, shopOptions{casePageSize: 2})
	ctx := s.env.Ctx
	zoe, err := s.env.DB.CreateAccount(ctx, domain.Account{FirstName: "Zoé", LastName: "Lambert", Email: "zoe.liste@example.com"}, "h")
	if err != nil {
		t.Fatal(err)
	}
	max, err := s.env.DB.CreateAccount(ctx, domain.Account{FirstName: "=cmd|' /C calc'!A0", LastName: "Durand", Email: "max.liste@example.com"}, "h")
	if err != nil {
		t.Fatal(err)
	}
	var all, maxB200 []string
	for i, acc := range []int64{zoe.ID, max.ID, zoe.ID, max.ID, zoe.ID} {
		model := "rtx-a5000"
		if acc == max.ID {
			model = "b200"
		}
		item, err := s.env.DB.CatalogItem(ctx, model)
		if err != nil {
			t.Fatal(err)
		}
		q, err := domain.PriceQuote(item, domain.Configuration{Model: model, Lots: 1, DurationDays: 3, Preset: "python"})
		if err != nil {
			t.Fatal(err)
		}
		o, err := s.env.DB.CreateOrder(ctx, acc, q)
		if err != nil {
			t.Fatal(err)
		}
		// Two by two in the same second: ties on created_at, by reference.
		s.execSQL(t, `UPDATE orders SET created_at = now() - make_interval(mins => $2) WHERE ref = $1`, o.Ref, i/2)
		all = append(all, o.Ref)
		if acc == max.ID {
			maxB200 = append(maxB200, o.Ref)
		}
	}

	agent := browser(t)
	s.consoleSignIn(t, agent, apptest.AgentToken)
	if n := eval[int](t, agent, `document.querySelectorAll('nav a[href="/support/hosts"]').length`); n != 0 {
		t.Fatalf("an agent's console links the hosts")
	}
	run(t, agent, "the hosts page", chromedp.Navigate(s.srv.URL+"/support/hosts"), visible(".alert.error"))
	if got := text(t, agent, ".alert.error"); !strings.Contains(got, "Réservé au rôle « opérateur »") || !strings.Contains(got, "Rien n'a été changé") {
		t.Fatalf("hosts page for an agent: %q", got)
	}

	rows := func() []string {
		t.Helper()
		return eval[[]string](t, agent, `[...document.querySelectorAll("table.cases tbody tr")].map(r => r.dataset.case)`)
	}
	loadedBy(t, agent, "the list", click(`nav a[href="/support/list"]`))
	cspWatch(t, agent)
	checkConsoleFrench(t, agent, "the list")
	screenshots(t, agent, "console-list")
	var seen []string
	for page := 1; ; page++ {
		got := rows()
		if len(got) == 0 || len(got) > 2 {
			t.Fatalf("page %d: %v", page, got)
		}
		seen = append(seen, got...)
		if eval[int](t, agent, `document.querySelectorAll('a[rel="next"]').length`) == 0 {
			break
		}
		loadedBy(t, agent, "next page", click(`a[rel="next"]`))
	}
	if len(seen) != len(all) || !sameSet(seen, all) {
		t.Fatalf("pages show %v, the orders are %v", seen, all)
	}
	last := rows()
	loadedBy(t, agent, "previous page", click(`a[rel="prev"]`))
	if got := rows(); !slices.Equal(got, seen[len(seen)-len(last)-2:len(seen)-len(last)]) {
		t.Fatalf("the previous page shows %v, it showed %v", got, seen)
	}

	loadedBy(t, agent, "the orders' tab", click(`nav.filters a[href="/support/list?type=order"]`))
	run(t, agent, "filter", setSelect("#modele", "b200"), typeIn("#nom", "durand"))
	loadedBy(t, agent, "the filtered list", click(`form.list-filters button[type=submit]`))
	if got := rows(); !sameSet(got, maxB200) {
		t.Fatalf("b200 and durand: %v, want %v", got, maxB200)
	}
	if got := text(t, agent, "table.cases tbody"); !strings.Contains(got, "NVIDIA B200") || !strings.Contains(got, "max.liste@example.com") {
		t.Fatalf("rows read %q", got)
	}
	checkConsoleFrench(t, agent, "the filtered list")
	checkPage(t, agent, "the filtered list")

	// The CSV of this filter, downloaded by the button.
	dir := download(t, agent, "the CSV", click(`a[href^="/support/list.csv"]`))
	files, _ := filepath.Glob(filepath.Join(dir, "kernodeck-commandes-*.csv"))
	if len(files) != 1 {
		entries, _ := os.ReadDir(dir)
		t.Fatalf("downloaded: %v", entries)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	lines, err := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
	if err != nil || len(lines) != 1+len(maxB200) || lines[0][1] != "reference" {
		t.Fatalf("csv: %q %v", lines, err)
	}
	var csvRefs []string
	for _, l := range lines[1:] {
		csvRefs = append(csvRefs, l[1])
		if l[6] != "'=cmd|' /C calc'!A0" || l[5] != "max.liste@example.com" || l[8] != "b200" {
			t.Fatalf("csv line %q", l)
		}
	}
	if !slices.Equal(csvRefs, rows()) {
		t.Fatalf("csv rows %v, page rows %v", csvRefs, rows())
	}

	// A period the wrong way round: said on its field, nothing listed.
	run(t, agent, "a period the wrong way round",
		chromedp.Navigate(s.srv.URL+"/support/list?du=05%2F12%2F2026&au=04%2F12%2F2026"), visible("#au-error"))
	if got := text(t, agent, "#au-error"); !strings.Contains(got, "La période est à l'envers") {
		t.Fatalf("period error %q", got)
	}
	if n := eval[int](t, agent, `document.querySelectorAll("table.cases").length`); n != 0 {
		t.Fatal("a refused filter still lists")
	}
	if v := eval[[]string](t, agent, `window.kdCSP || []`); len(v) > 0 {
		t.Errorf("the CSP blocked %q", v)
	}
}

// loadedBy runs act (a click that loads a page) and waits until the
// browser shows the new page, loaded: a check made sooner would read the
// page before.
func loadedBy(t *testing.T, ctx context.Context, what string, act chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	resp, err := chromedp.RunResponse(sctx, act)
	if err != nil {
		failPage(t, ctx, what, err)
	}
	if resp.Status != http.StatusOK {
		failPage(t, ctx, what, fmt.Errorf("answered %d", resp.Status))
	}
}

// sameSet: a and b hold the same strings, each once.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y) && len(slices.Compact(x)) == len(a)
}
