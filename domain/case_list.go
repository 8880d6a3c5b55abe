package domain

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The back office's list (issue 39, item 4): every order or every top-up,
// newest first, filtered and searched, a page at a time by keyset
// (created_at, ref), never by offset. Payouts are the third kind: a kind
// is its statuses here (caseKinds), its source in postgres.caseSources and
// its tab in the console (web/support_console_list.go).

// caseKind is what differs between the kinds the list shows (TargetOrder,
// TargetTopUp, TargetPayout).
type caseKind struct {
	Statuses []string
	// Orders only: a model, paid from the balance.
	Model bool
}

var caseKinds = map[string]caseKind{
	TargetOrder: {Statuses: []string{StatusAwaitingPayment, StatusPaymentDetected, StatusPaid, StatusWaitingForMachine,
		StatusProvisioning, StatusProvisioningFailed, StatusActive, StatusEnding, StatusEnded, StatusCancelled,
		StatusExpired, StatusRefunded}, Model: true},
	TargetTopUp: {Statuses: []string{TopUpAwaitingPayment, TopUpPaymentDetected, TopUpCredited, TopUpExpired, TopUpCancelled}},
	TargetPayout: {Statuses: []string{string(PayoutRequested), string(PayoutApproved), string(PayoutBatched), string(PayoutSigned),
		string(PayoutSeen), string(PayoutDone), string(PayoutCancelled), string(PayoutDeclined)}},
}

// CaseStatuses are the statuses of kind's list, in their life's order.
func CaseStatuses(kind string) []string { return caseKinds[kind].Statuses }

// MethodBalance filters the orders paid from the balance.
const MethodBalance = "balance"

// CaseListMaxPage bounds a page of the list.
const CaseListMaxPage = 200

// CaseCursor is a row's place in the list's order: (created_at, ref).
type CaseCursor struct {
	CreatedAt time.Time
	Ref       string
}

// String is the cursor as a URL carries it: "<unix µs>.<ref>".
func (c CaseCursor) String() string {
	return strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "." + c.Ref
}

// CaseFilter is what the back office's list shows: one kind, filters
// (all of them at once) and partial searches, a page after (older than)
// or before (newer than) a cursor. Parse it with ParseCaseFilter, which
// validates it; a zero field filters nothing.
type CaseFilter struct {
	Kind   string
	Status string
	// Model: an order's GPU model code.
	Model string
	// Method: "ASSET/network" (a payment request in that asset on that
	// network), "network" (any asset on it) or MethodBalance (orders
	// paid from the balance).
	Method string
	// From and To: created at or after From, before To (UTC instants,
	// from Paris days).
	From, To time.Time
	// MinCents, MaxCents: the order's total or the top-up's amount
	// (nil: no bound).
	MinCents, MaxCents *int64
	// Partial searches: the reference's start (upper case), a fragment of
	// the customer's email or name (lower case), a transaction id's start
	// (as written on chain).
	RefPrefix, Email, Name, TxIDPrefix string
	// After lists the rows older than it; Before those newer (the
	// previous page). At most one.
	After, Before *CaseCursor
	// Limit is the page's size (CaseListMaxPage at most).
	Limit int
}

// CaseQuery is the list's filter as a form or a URL gives it: strings,
// dates as 03/12/2026 or 2026-12-03 (Paris days), amounts in USD ("12,50"
// or "12.50").
type CaseQuery struct {
	Kind, Status, Model, Method string
	From, To                    string
	Min, Max                    string
	Ref, Email, Name, TxID      string
	After, Before               string
}

var (
	modelCode     = regexp.MustCompile(`^[a-z0-9-]{1,40}$`)
	refSearch     = regexp.MustCompile(`^[A-Z0-9-]{2,20}$`)
	refFull       = regexp.MustCompile(`^[A-Z]{2}-[A-Z0-9]{4,20}$`)
	txidSearch    = regexp.MustCompile(`^[A-Za-z0-9]{4,128}$`)
	usdInput      = regexp.MustCompile(`^[0-9]{1,9}([.,][0-9]{1,2})?$`)
	cursorPattern = regexp.MustCompile(`^([0-9]{1,19})\.([A-Z]{2}-[A-Z0-9]{4,20})$`)
)

// ParseCaseFilter reads and checks q: an unknown kind, status or method,
// a date that is not one, a period or an amount range the wrong way
// round, a search too short are refused with a French message naming the
// field (code invalid); nothing is listed then.
func ParseCaseFilter(q CaseQuery, limit int) (CaseFilter, error) {
	f := CaseFilter{Kind: strings.TrimSpace(q.Kind), Status: strings.TrimSpace(q.Status), Model: strings.TrimSpace(q.Model),
		Method: strings.TrimSpace(q.Method), Limit: limit}
	if f.Kind == "" {
		f.Kind = TargetOrder
	}
	var err error
	if f.From, err = parisDay("du", q.From, 0); err != nil {
		return f, err
	}
	if f.To, err = parisDay("au", q.To, 1); err != nil {
		return f, err
	}
	if f.MinCents, err = usdBound("min", q.Min); err != nil {
		return f, err
	}
	if f.MaxCents, err = usdBound("max", q.Max); err != nil {
		return f, err
	}
	f.RefPrefix = strings.ToUpper(strings.TrimSpace(q.Ref))
	f.Email = strings.ToLower(strings.TrimSpace(q.Email))
	f.Name = strings.ToLower(strings.Join(strings.Fields(q.Name), " "))
	f.TxIDPrefix = strings.TrimSpace(q.TxID)
	if f.After, err = parseCursor("apres", q.After); err != nil {
		return f, err
	}
	if f.Before, err = parseCursor("avant", q.Before); err != nil {
		return f, err
	}
	return f, f.Validate()
}

// Validate checks a filter (ParseCaseFilter calls it).
func (f CaseFilter) Validate() error {
	k, ok := caseKinds[f.Kind]
	switch {
	case !ok:
		return FieldError("type", "Type de dossier inconnu : choisissez les commandes, les recharges ou les retraits.")
	case f.Status != "" && !slices.Contains(k.Statuses, f.Status):
		return FieldError("statut", fmt.Sprintf("Statut inconnu pour ce type de dossier : %q.", f.Status))
	case f.Model != "" && !k.Model:
		return FieldError("modele", "Le modèle de GPU ne filtre que les commandes.")
	case f.Model != "" && !modelCode.MatchString(f.Model):
		return FieldError("modele", "Modèle de GPU inconnu.")
	case f.Method == MethodBalance && !k.Model:
		return FieldError("moyen", "Le paiement par le solde ne concerne que les commandes.")
	case f.Method != "" && f.Method != MethodBalance && !knownMethod(f.Method):
		return FieldError("moyen", "Moyen de paiement inconnu : choisissez un actif sur son réseau, un réseau ou le solde.")
	case !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To):
		return FieldError("au", "La période est à l'envers : la date de fin précède la date de début.")
	case f.MinCents != nil && f.MaxCents != nil && *f.MinCents > *f.MaxCents:
		return FieldError("max", "Le montant maximum est inférieur au montant minimum.")
	case f.RefPrefix != "" && !refSearch.MatchString(f.RefPrefix):
		return FieldError("ref", "Indiquez le début d'une référence : 2 à 20 lettres, chiffres ou tirets (KD-7QX…).")
	case f.Email != "" && (len([]rune(f.Email)) < 3 || len(f.Email) > 254):
		return FieldError("email", "Indiquez au moins 3 caractères de l'email (254 au plus).")
	case f.Name != "" && (len([]rune(f.Name)) < 3 || len(f.Name) > 201):
		return FieldError("nom", "Indiquez au moins 3 caractères du nom ou du prénom.")
	case f.TxIDPrefix != "" && !txidSearch.MatchString(f.TxIDPrefix):
		return FieldError("txid", "Indiquez le début d'un identifiant de transaction : 4 à 128 lettres ou chiffres.")
	case f.After != nil && f.Before != nil:
		return FieldError("apres", "Une page suit ou précède une autre, pas les deux.")
	case f.Limit < 1 || f.Limit > CaseListMaxPage:
		return FieldError("limite", fmt.Sprintf("Une page compte de 1 à %d dossiers.", CaseListMaxPage))
	}
	return nil
}

// MethodParts splits Method: its asset ("" for a network alone or the
// balance) and its network ("" for the balance).
func (f CaseFilter) MethodParts() (asset, network string) {
	if f.Method == MethodBalance {
		return "", ""
	}
	if a, n, ok := strings.Cut(f.Method, "/"); ok {
		return a, n
	}
	return "", f.Method
}

func knownMethod(m string) bool {
	asset, network, pair := strings.Cut(m, "/")
	if !pair {
		network = m
	}
	for _, x := range Methods {
		if x.Network == network && (!pair || x.Asset == asset) {
			return true
		}
	}
	return false
}

// parisDay is the instant a Paris day starts (03/12/2026 as people
// write it, or 2026-12-03), plus days: "au" is inclusive, so its bound is
// the next day's start.
func parisDay(field, v string, days int) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	d, err := time.ParseInLocation("2/1/2006", v, paris)
	if err != nil {
		d, err = time.ParseInLocation("2006-01-02", v, paris)
	}
	if err != nil || d.Year() < 2000 || d.Year() > 2200 {
		return time.Time{}, FieldError(field, "Date invalide : écrivez-la jour/mois/année, en chiffres.")
	}
	return d.AddDate(0, 0, days).UTC(), nil
}

// usdBound reads an amount in USD ("12,50", "12.50", "12") as cents.
func usdBound(field, v string) (*int64, error) {
	// "1 000,50 USD" as the console writes amounts.
	v = strings.NewReplacer("\u202f", "", "\u00a0", "", " ", "").Replace(strings.TrimSuffix(strings.TrimSpace(v), "USD"))
	if v == "" {
		return nil, nil
	}
	if !usdInput.MatchString(v) {
		return nil, FieldError(field, fmt.Sprintf("Montant invalide : %q (en USD, par exemple 23,57).", v))
	}
	whole, frac, _ := strings.Cut(strings.ReplaceAll(v, ",", "."), ".")
	w, _ := strconv.ParseInt(whole, 10, 64)
	c, _ := strconv.ParseInt((frac + "00")[:2], 10, 64)
	cents := w*100 + c
	return &cents, nil
}

// parseCursor reads a page's cursor ("<unix µs>.<ref>").
func parseCursor(field, v string) (*CaseCursor, error) {
	if v == "" {
		return nil, nil
	}
	m := cursorPattern.FindStringSubmatch(v)
	var us int64
	var err error
	if m != nil {
		us, err = strconv.ParseInt(m[1], 10, 64)
	}
	if m == nil || err != nil || !refFull.MatchString(m[2]) {
		return nil, FieldError(field, "Lien de page invalide : revenez à la première page de la liste.")
	}
	return &CaseCursor{CreatedAt: time.UnixMicro(us).UTC(), Ref: m[2]}, nil
}

// CaseRow is one order or top-up of the list, with its customer.
type CaseRow struct {
	Kind      string `json:"kind" db:"kind"`
	Ref       string `json:"reference" db:"ref"`
	Status    string `json:"status" db:"status"`
	AccountID int64  `json:"account_id" db:"account_id"`
	Email     string `json:"customer_email" db:"email"`
	FirstName string `json:"customer_first_name" db:"first_name"`
	LastName  string `json:"customer_last_name" db:"last_name"`
	// Model, TotalGPUs, DurationDays: an order's ("", 0 for a top-up).
	Model        string `json:"gpu_model,omitempty" db:"model"`
	TotalGPUs    int    `json:"total_gpus,omitempty" db:"total_gpus"`
	DurationDays int    `json:"duration_days,omitempty" db:"duration_days"`
	// AmountCents is the order's total or the top-up's amount; PaidCents
	// what it received (counted).
	AmountCents int64 `json:"amount_cents" db:"amount_cents"`
	PaidCents   int64 `json:"paid_cents" db:"paid_cents"`
	// PaidBy is an order's way of payment once paid (crypto, balance,
	// support); Asset and Network its latest payment request's.
	PaidBy    string    `json:"paid_by,omitempty" db:"paid_by"`
	Asset     string    `json:"asset,omitempty" db:"asset"`
	Network   string    `json:"network,omitempty" db:"network"`
	CreatedAt time.Time `json:"created_at" db:"created_at"`
}

// Cursor is the row's place in the list.
func (r CaseRow) Cursor() CaseCursor { return CaseCursor{CreatedAt: r.CreatedAt, Ref: r.Ref} }

// CSVCell is s as a CSV cell safe to open in a spreadsheet: a cell it
// would read as a formula (starting with =, +, -, @, a tab or a carriage
// return) is prefixed with an apostrophe, as OWASP advises against CSV
// injection. Customers write their names and emails: every exported cell
// goes through it.
func CSVCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
