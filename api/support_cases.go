package api

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// The back office's list (issue 39, item 4): every order or top-up, with
// filters and partial searches (domain.CaseFilter), a page at a time by
// keyset, and its CSV export. GET /v1/support/cases and
// /v1/support/cases.csv and the console (/support/list) call these
// services.

// CaseListStore reads the list (postgres.ListCases).
type CaseListStore interface {
	ListCases(ctx context.Context, f domain.CaseFilter) ([]domain.CaseRow, error)
	// CountCases counts the rows f matches, up to limit.
	CountCases(ctx context.Context, f domain.CaseFilter, limit int) (int, error)
}

// DefaultCasePageSize is a page of the list (Config.CasePageSize).
const DefaultCasePageSize = 50

// DefaultExportMaxRows bounds an export (Config.ExportMaxRows): a filter
// matching more is refused before anything is written (never a file cut
// short without a word).
const DefaultExportMaxRows = 50_000

// exportPage is how many rows an export reads at a time.
const exportPage = domain.CaseListMaxPage

// CaseList is a page of the list, newest first: Next lists older rows
// (the next page's "apres"), Prev newer ones (its "avant"); "" when there
// are none.
type CaseList struct {
	Kind string           `json:"kind"`
	Rows []domain.CaseRow `json:"rows"`
	Next string           `json:"next,omitempty"`
	Prev string           `json:"prev,omitempty"`
}

// ListCases is the page of the list q asks for (Config.CasePageSize rows).
func (s *Server) ListCases(ctx context.Context, a *Agent, q domain.CaseQuery) (CaseList, error) {
	if err := requireAgent(a); err != nil {
		return CaseList{}, err
	}
	size := s.cfg.CasePageSize
	f, err := domain.ParseCaseFilter(q, size)
	if err != nil {
		return CaseList{}, err
	}
	f.Limit++ // one more: is there a page beyond?
	rows, err := s.stores.Cases.ListCases(ctx, f)
	if err != nil {
		return CaseList{}, err
	}
	out := CaseList{Kind: f.Kind, Rows: rows}
	more := len(rows) > size
	if f.Before != nil {
		// The rows just newer than the cursor, newest first: the extra
		// one is the newest.
		if more {
			out.Rows = rows[1:]
		}
		if len(out.Rows) > 0 {
			out.Next = out.Rows[len(out.Rows)-1].Cursor().String()
			if more {
				out.Prev = out.Rows[0].Cursor().String()
			}
		}
		return out, nil
	}
	if more {
		out.Rows = rows[:size]
		out.Next = out.Rows[size-1].Cursor().String()
	}
	if f.After != nil && len(out.Rows) > 0 {
		out.Prev = out.Rows[0].Cursor().String()
	}
	return out, nil
}

// caseCSVHeader names the export's columns: dates in UTC (RFC 3339) and
// in Paris, amounts in USD with a point, codes as the API writes them.
var caseCSVHeader = []string{"type", "reference", "statut", "cree_le_utc", "cree_le_paris", "client_email", "client_prenom",
	"client_nom", "modele_gpu", "gpus", "duree_jours", "montant_usd", "recu_usd", "paye_par", "actif", "reseau"}

// ExportCases checks q and the rows it matches (ExportMaxRows at most:
// more are refused, nothing written), then writes every row to w as CSV,
// newest first, a page at a time (a keyset walk: no transaction held, a
// row created meanwhile is not written). Every cell goes through
// domain.CSVCell.
func (s *Server) ExportCases(ctx context.Context, a *Agent, q domain.CaseQuery, start func() io.Writer) error {
	if err := requireAgent(a); err != nil {
		return err
	}
	q.After, q.Before = "", ""
	f, err := domain.ParseCaseFilter(q, exportPage)
	if err != nil {
		return err
	}
	n, err := s.stores.Cases.CountCases(ctx, f, s.cfg.ExportMaxRows+1)
	if err != nil {
		return err
	}
	if n > s.cfg.ExportMaxRows {
		return domain.Errorf(domain.ECodeExportTooLarge,
			"Plus de %s dossiers correspondent à ces filtres : resserrez-les (période, statut, client…) pour exporter. Rien n'a été exporté.",
			domain.FrenchInt(int64(s.cfg.ExportMaxRows)))
	}
	cw := csv.NewWriter(start())
	if err := cw.Write(caseCSVHeader); err != nil {
		return err
	}
	written := 0
	for written <= s.cfg.ExportMaxRows {
		rows, err := s.stores.Cases.ListCases(ctx, f)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := cw.Write(caseCSVRow(r)); err != nil {
				return err
			}
		}
		written += len(rows)
		cw.Flush()
		if err := cw.Error(); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if len(rows) < f.Limit {
			break
		}
		c := rows[len(rows)-1].Cursor()
		f.After = &c
	}
	s.log.Info("support export", "agent", a.Agent, "kind", f.Kind, "rows", written)
	return nil
}

// caseCSVRow is r's line of the export.
func caseCSVRow(r domain.CaseRow) []string {
	num := func(n int) string {
		if n == 0 {
			return ""
		}
		return strconv.Itoa(n)
	}
	cells := []string{r.Kind, r.Ref, r.Status, r.CreatedAt.UTC().Format(time.RFC3339),
		domain.InParis(r.CreatedAt).Format("2006-01-02 15:04"), r.Email, r.FirstName, r.LastName, r.Model,
		num(r.TotalGPUs), num(r.DurationDays), domain.FormatUSD(r.AmountCents), domain.FormatUSD(r.PaidCents),
		r.PaidBy, r.Asset, r.Network}
	for i, c := range cells {
		cells[i] = domain.CSVCell(c)
	}
	return cells
}

// CaseQueryOf reads the list's filter from the request's query (the
// console's names, which the API shares: type, statut, modele, moyen, du,
// au, min, max, ref, email, nom, txid, apres, avant).
func CaseQueryOf(c *gin.Context) domain.CaseQuery {
	return domain.CaseQuery{Kind: c.Query("type"), Status: c.Query("statut"), Model: c.Query("modele"), Method: c.Query("moyen"),
		From: c.Query("du"), To: c.Query("au"), Min: c.Query("min"), Max: c.Query("max"), Ref: c.Query("ref"),
		Email: c.Query("email"), Name: c.Query("nom"), TxID: c.Query("txid"), After: c.Query("apres"), Before: c.Query("avant")}
}

// supportCases is GET /v1/support/cases.
func (s *Server) supportCases(c *gin.Context) {
	l, err := s.ListCases(c.Request.Context(), agentOf(c), CaseQueryOf(c))
	s.answer(c, http.StatusOK, l, err)
}

// supportCasesCSV is GET /v1/support/cases.csv.
func (s *Server) supportCasesCSV(c *gin.Context) {
	q := CaseQueryOf(c)
	err := s.ExportCases(c.Request.Context(), agentOf(c), q, func() io.Writer {
		SetCSVHeaders(c, q.Kind)
		return c.Writer
	})
	if err != nil && !c.Writer.Written() {
		s.fail(c, err)
		return
	}
	if err != nil {
		s.log.Error("support export cut short", "err", err) // the client gets a file with fewer rows, and a broken connection
		c.Abort()
	}
}

// SetCSVHeaders starts an export's answer: CSV, as an attachment named
// for its kind and time.
func SetCSVHeaders(c *gin.Context, kind string) {
	name := map[string]string{domain.TargetTopUp: "recharges", domain.TargetPayout: "retraits"}[kind]
	if name == "" {
		name = "commandes"
	}
	c.Header("Content-Type", "text/csv; charset=utf-8")
	c.Header("Content-Disposition", fmt.Sprintf(`attachment; filename="kernodeck-%s-%s.csv"`, name, time.Now().UTC().Format("20060102-150405")))
	c.Header("Cache-Control", "no-store")
	c.Status(http.StatusOK)
}
