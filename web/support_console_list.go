package web

// The back office's list, /support/list (issue 39, item 4): every order
// or top-up, newest first, with filters and partial searches, a page at
// a time by keyset, and its CSV export (/support/list.csv, the same
// filters). The services (api/support_cases.go) validate the filter and
// read; this file draws the form and the table, a tab per kind
// (listKinds: orders, top-ups, payouts).

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// caseURL is the console's file of an order or a top-up (the list links
// each row to it).
func caseURL(kind, ref string) string {
	if kind == domain.TargetTopUp {
		return "/support/topups/" + url.PathEscape(ref)
	}
	return "/support/orders/" + url.PathEscape(ref)
}

// rowURL is where the list links a row: an order's or a top-up's file,
// a payout on the payouts' page of its status.
func rowURL(r domain.CaseRow) string {
	if r.Kind == domain.TargetPayout {
		return "/support/payouts?status=" + url.QueryEscape(r.Status) + "#payout-" + url.PathEscape(r.Ref)
	}
	return caseURL(r.Kind, r.Ref)
}

// caseStatus is a row's status for people.
func caseStatus(kind, status string) string {
	if kind == domain.TargetPayout {
		l := domain.PayoutStatus(status).Label()
		if l == "" {
			return status
		}
		return strings.ToUpper(l[:1]) + l[1:]
	}
	return label(statusLabels, status)
}

// listKind is a tab of the list.
type listKind struct {
	Kind, Label, URL string
	Active           bool
}

// listKinds are the list's tabs, in order.
var listKinds = []struct{ Kind, Label string }{
	{domain.TargetOrder, "Commandes"},
	{domain.TargetTopUp, "Recharges"},
	{domain.TargetPayout, "Retraits"},
}

// option is a choice of a select.
type option struct {
	Value, Label string
	Selected     bool
}

type consoleListData struct {
	Query   domain.CaseQuery
	Kind    string
	Tabs    []listKind
	Orders  bool // the kind has a model and may be paid from the balance
	Payouts bool
	// Statuses, Models, Methods: the selects' choices.
	Statuses, Models, Methods []option
	List                      api.CaseList
	// Done: the list was read (the filter was valid).
	Done       bool
	Next, Prev string // pages' URLs
	First      string // the first page's, when not on it
	CSV        string
	Clear      string
}

// listValues is q as the list's URL carries it (no page's cursor).
func listValues(q domain.CaseQuery) url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"type": q.Kind, "statut": q.Status, "modele": q.Model, "moyen": q.Method,
		"du": q.From, "au": q.To, "min": q.Min, "max": q.Max, "ref": q.Ref, "email": q.Email, "nom": q.Name, "txid": q.TxID} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// listURL is the list at path with q, and one more parameter (a page).
func listURL(path string, q domain.CaseQuery, key, value string) string {
	v := listValues(q)
	if key != "" {
		v.Set(key, value)
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// consoleList is the list: its form, and its page unless the filter is
// refused (then the form says why, on its field, and nothing is read).
func (s *Site) consoleList(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	s.showList(c, a, nil)
}

// showList renders the list; exportErr is an export's refusal, said
// above it.
func (s *Site) showList(c *gin.Context, a *agent, exportErr *domain.Error) {
	q := api.CaseQueryOf(c)
	if q.Kind == "" {
		q.Kind = domain.TargetOrder
	}
	d := consoleListData{Query: q, Kind: q.Kind, Orders: q.Kind == domain.TargetOrder, Payouts: q.Kind == domain.TargetPayout}
	for _, k := range listKinds {
		d.Tabs = append(d.Tabs, listKind{Kind: k.Kind, Label: k.Label, Active: k.Kind == q.Kind,
			URL: listURL("/support/list", domain.CaseQuery{Kind: k.Kind}, "", "")})
	}
	d.Statuses = []option{{Value: "", Label: "Tous"}}
	for _, st := range domain.CaseStatuses(q.Kind) {
		d.Statuses = append(d.Statuses, option{Value: st, Label: caseStatus(q.Kind, st), Selected: st == q.Status})
	}
	d.Methods = s.methodOptions(d.Orders, q.Method)
	if d.Orders {
		d.Models = []option{{Value: "", Label: "Tous"}}
		if cat, err := s.svc.Catalog(c.Request.Context()); err == nil {
			for _, m := range cat.Models {
				d.Models = append(d.Models, option{Value: m.Model, Label: m.DisplayName, Selected: m.Model == q.Model})
			}
		}
	}
	d.CSV = listURL("/support/list.csv", q, "", "")
	d.Clear = listURL("/support/list", domain.CaseQuery{Kind: q.Kind}, "", "")
	p := agentPage(a, "Dossiers")
	status := http.StatusOK
	if exportErr != nil {
		p.Error, status = "Export refusé : "+exportErr.Message, statusOf(exportErr)
	}
	l, err := s.svc.ListCases(c.Request.Context(), a, q)
	switch {
	case err == nil:
		d.List, d.Done = l, true
		if l.Next != "" {
			d.Next = listURL("/support/list", q, "apres", l.Next)
		}
		if l.Prev != "" {
			d.Prev = listURL("/support/list", q, "avant", l.Prev)
		}
		if q.After != "" || q.Before != "" {
			d.First = listURL("/support/list", q, "", "")
		}
	case domain.ErrorCode(err) == domain.ECodeInvalid:
		// Said on its field, and above the form (a page's link has none).
		p.fieldError(err)
		if exportErr == nil {
			p.Error, status = "Filtres refusés : "+domain.ErrorMessage(err), http.StatusBadRequest
		}
	default:
		s.consoleFail(c, a, err)
		return
	}
	p.Data = d
	s.render(c, status, "support_list", p)
}

// methodOptions are the payment methods to filter by: the balance
// (orders), then each network with its assets.
func (s *Site) methodOptions(orders bool, selected string) []option {
	out := []option{{Value: "", Label: "Tous"}}
	if orders {
		out = append(out, option{Value: domain.MethodBalance, Label: "Solde prépayé"})
	}
	var networks []string
	for _, m := range domain.Methods {
		if !slices.Contains(networks, m.Network) {
			networks = append(networks, m.Network)
		}
	}
	for _, n := range networks {
		var assets []string
		for _, m := range domain.Methods {
			if m.Network == n {
				assets = append(assets, m.Asset)
			}
		}
		if len(assets) > 1 {
			out = append(out, option{Value: n, Label: domain.NetworkName(n) + " (tous actifs)"})
		}
		for _, as := range assets {
			out = append(out, option{Value: as + "/" + n, Label: methodLabel(as, n)})
		}
	}
	for i := range out {
		out[i].Selected = out[i].Value == selected
	}
	return out
}

// consoleListCSV exports the list's filter as CSV: a refusal (a filter
// not valid, too many rows) comes back on the list's page, before any
// byte of the file.
func (s *Site) consoleListCSV(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	q := api.CaseQueryOf(c)
	err := s.svc.ExportCases(c.Request.Context(), a, q, func() io.Writer {
		api.SetCSVHeaders(c, q.Kind)
		return c.Writer
	})
	if err == nil {
		return
	}
	if c.Writer.Written() {
		s.log.Error("web: support export cut short", "err", err)
		c.Abort()
		return
	}
	var de *domain.Error
	if !errors.As(err, &de) || de.Code == domain.ECodeUnauthorized {
		s.consoleFail(c, a, err)
		return
	}
	s.showList(c, a, de) // the list, with the refusal said above it
}
