package api_test

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// The back office's list through /v1/support/cases: a page with its
// customer, filters and searches; a filter that is not valid is refused
// with its field named in French, nothing read; customers are refused.
// The export (/v1/support/cases.csv) writes a header and every row the
// filters match, its cells safe from spreadsheet formulas (a customer's
// name "=HYPERLINK(...)"), and refuses, before writing anything, a
// filter matching more rows than an export holds.
func TestSupportCasesListAndExport(t *testing.T) {
	h := newHarness(t, func(c *api.Config, _ *api.Deps) { c.ExportMaxRows, c.CasePageSize = 3, 2 })
	zoe := h.register("zoe.cases@example.com")
	_, err := h.db.Exec(`UPDATE accounts SET first_name = '=HYPERLINK("http://evil.example","x")', last_name = '+Lambert' WHERE id = $1`, zoe.id)
	require.NoError(t, err)
	max := h.register("max.cases@example.com")
	r1, r2, r3 := h.order(zoe), h.order(zoe), h.order(max)
	_, err = h.db.Exec(`UPDATE orders SET status = 'active' WHERE ref = $1`, r2)
	require.NoError(t, err)

	get := func(path string, a auth) resp {
		t.Helper()
		return h.do("GET", path, nil, a)
	}
	// Pages of two, newest first: next, then prev back to the first.
	page := func(q string) ([]string, string, string) {
		t.Helper()
		r := get("/v1/support/cases"+q, agent)
		require.Equal(t, http.StatusOK, r.Code, r.Body.String())
		var refs []string
		for _, row := range r.body["rows"].([]any) {
			refs = append(refs, row.(map[string]any)["reference"].(string))
		}
		next, _ := r.body["next"].(string)
		prev, _ := r.body["prev"].(string)
		return refs, next, prev
	}
	p1, next, prev := page("")
	require.Equal(t, r3, p1[0], "newest first")
	require.Len(t, p1, 2)
	require.Empty(t, prev)
	p2, next2, prev2 := page("?apres=" + url.QueryEscape(next))
	require.Len(t, p2, 1)
	require.Empty(t, next2, "the last page")
	require.ElementsMatch(t, []string{r1, r2, r3}, append(p1, p2...))
	back, _, prevBack := page("?avant=" + url.QueryEscape(prev2))
	require.Equal(t, p1, back, "prev leads back to the first page")
	require.Empty(t, prevBack, "which has none before it")

	active := get("/v1/support/cases?statut=active&email="+url.QueryEscape("ZOE.CASES"), agent)
	require.Equal(t, http.StatusOK, active.Code, active.Body.String())
	require.Len(t, active.body["rows"], 1)
	row := active.body["rows"].([]any)[0].(map[string]any)
	require.Equal(t, r2, row["reference"])
	require.Equal(t, "zoe.cases@example.com", row["customer_email"])

	for q, field := range map[string]string{"statut=lost": "statut", "du=2026-02-30": "du", "min=10&max=5": "max",
		"type=refund": "type", "email=zo": "email"} {
		r := get("/v1/support/cases?"+q, agent)
		require.Equal(t, http.StatusBadRequest, r.Code, "%s: %s", q, r.Body.String())
		require.Equal(t, domain.ECodeInvalid, r.errCode())
		require.Equal(t, field, r.errField(), q)
	}
	require.Equal(t, http.StatusUnauthorized, get("/v1/support/cases", zoe.auth).Code)
	require.Equal(t, http.StatusUnauthorized, get("/v1/support/cases.csv", zoe.web).Code)

	csvOf := func(q string) [][]string {
		t.Helper()
		r := get("/v1/support/cases.csv?"+q, agent)
		require.Equal(t, http.StatusOK, r.Code, r.Body.String())
		require.Equal(t, "text/csv; charset=utf-8", r.Header().Get("Content-Type"))
		require.Contains(t, r.Header().Get("Content-Disposition"), `attachment; filename="kernodeck-commandes-`)
		lines, err := csv.NewReader(strings.NewReader(r.Body.String())).ReadAll()
		require.NoError(t, err)
		return lines
	}
	lines := csvOf("email=zoe.cases")
	require.Len(t, lines, 3, "a header and zoe's two orders")
	require.Equal(t, []string{"type", "reference", "statut", "cree_le_utc", "cree_le_paris", "client_email", "client_prenom",
		"client_nom", "modele_gpu", "gpus", "duree_jours", "montant_usd", "recu_usd", "paye_par", "actif", "reseau"}, lines[0])
	require.ElementsMatch(t, []string{r1, r2}, []string{lines[1][1], lines[2][1]})
	for _, l := range lines[1:] {
		require.Equal(t, `'=HYPERLINK("http://evil.example","x")`, l[6], "a formula is neutralised")
		require.Equal(t, "'+Lambert", l[7])
		require.Equal(t, "order", l[0])
		require.Regexp(t, `^\d+\.\d{2}$`, l[11])
	}

	// Three orders: as many as an export holds. A fourth makes the same
	// export too large: refused, no file.
	require.Len(t, csvOf(""), 4)
	h.order(max)
	big := get("/v1/support/cases.csv", agent)
	require.Equal(t, http.StatusUnprocessableEntity, big.Code, big.Body.String())
	require.Equal(t, domain.ECodeExportTooLarge, big.errCode())
	require.Contains(t, big.Body.String(), "Rien n'a été exporté")
	require.Len(t, csvOf("email=max.cases"), 3)
}
