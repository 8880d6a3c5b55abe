package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kernodeck/kernodeck/domain"
)

// The back office's list (issue 39, item 4; domain.CaseFilter): orders,
// top-ups or payouts with their customer, newest first, a page at a time
// by keyset on (created_at, ref) (migrations 00071 and 00072's indexes),
// never by offset: a page is as quick at the thousandth as at the first,
// and rows created meanwhile neither shift nor repeat a page.

// caseSource is one kind's rows in the list's columns ("x" the row, "a"
// its account, "li" its latest payment request: a lateral read per row
// listed), its amount column, and how its method and txid filters read.
type caseSource struct {
	query, amount string
	// method: an asset ("" for any) on a network.
	method func(w *caseWhere, asset, network string)
	// txid: the rows paid by (or paying) a transaction id matching pattern.
	txid func(w *caseWhere, pattern string)
}

// requestedIn: a payment request of the row in asset on network.
func requestedIn(w *caseWhere, asset, network string) {
	if asset == "" {
		w.add("EXISTS (SELECT 1 FROM payment_intents i WHERE i.target_ref = x.ref AND i.network = ?)", network)
		return
	}
	w.add("EXISTS (SELECT 1 FROM payment_intents i WHERE i.target_ref = x.ref AND i.network = ? AND i.asset = ?)", network, asset)
}

// paidByTxID: a payment a watcher recorded, or an amount queued for
// support; the references first (the txid indexes), then their rows.
func paidByTxID(w *caseWhere, pattern string) {
	w.add(`x.ref IN (SELECT i.target_ref FROM chain_payments p JOIN payment_intents i ON i.id = p.intent_id
			WHERE p.txid LIKE ? ESCAPE '\'
		UNION SELECT e.target_ref FROM payment_exceptions e WHERE e.txid LIKE ? ESCAPE '\' AND e.txid <> '')`, pattern, pattern)
}

var caseSources = map[string]caseSource{
	domain.TargetOrder: {query: `SELECT 'order' AS kind, x.ref, x.status, x.account_id, a.email, a.first_name, a.last_name,
			x.gpu_model AS model, x.total_gpus, x.duration_days, x.total_cents AS amount_cents, x.paid_cents,
			COALESCE(x.payment_method, '') AS paid_by, ` + latestIntent + `, x.created_at
		FROM orders x JOIN accounts a ON a.id = x.account_id ` + latestIntentJoin,
		amount: "x.total_cents", method: requestedIn, txid: paidByTxID},
	domain.TargetTopUp: {query: `SELECT 'topup' AS kind, x.ref, x.status, x.account_id, a.email, a.first_name, a.last_name,
			'' AS model, 0 AS total_gpus, 0 AS duration_days, x.amount_cents, COALESCE(x.received_cents, 0) AS paid_cents,
			'' AS paid_by, ` + latestIntent + `, x.created_at
		FROM topups x JOIN accounts a ON a.id = x.account_id ` + latestIntentJoin,
		amount: "x.amount_cents", method: requestedIn, txid: paidByTxID},
	// A payout's amount is what it holds from the balance; it is sent
	// (paid_cents) once done; its asset and network are its own.
	domain.TargetPayout: {query: `SELECT 'payout' AS kind, x.ref, x.status, x.account_id, a.email, a.first_name, a.last_name,
			'' AS model, 0 AS total_gpus, 0 AS duration_days, x.amount_cents,
			CASE WHEN x.status = 'done' THEN x.amount_cents ELSE 0 END AS paid_cents, '' AS paid_by, x.asset, x.network, x.created_at
		FROM payouts x JOIN accounts a ON a.id = x.account_id`,
		amount: "x.amount_cents",
		method: func(w *caseWhere, asset, network string) {
			w.add("x.network = ?", network)
			if asset != "" {
				w.add("x.asset = ?", asset)
			}
		},
		txid: func(w *caseWhere, pattern string) { w.add(`x.txid LIKE ? ESCAPE '\'`, pattern) }},
}

// latestIntent is the asset and network of a row's latest payment request.
const (
	latestIntent     = `COALESCE(li.asset, '') AS asset, COALESCE(li.network, '') AS network`
	latestIntentJoin = `LEFT JOIN LATERAL (SELECT i.asset, i.network FROM payment_intents i WHERE i.target_ref = x.ref
			ORDER BY i.seq DESC LIMIT 1) li ON true`
)

// caseWhere builds a filter's conditions with numbered arguments.
type caseWhere struct {
	conds []string
	args  []any
}

// add appends cond, whose "?" are the next arguments.
func (w *caseWhere) add(cond string, args ...any) {
	for _, a := range args {
		w.args = append(w.args, a)
		cond = strings.Replace(cond, "?", "$"+strconv.Itoa(len(w.args)), 1)
	}
	w.conds = append(w.conds, cond)
}

func (w *caseWhere) sql() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// caseQuery is the filter's source and conditions (no order, no limit).
func caseQuery(f domain.CaseFilter) (string, *caseWhere, error) {
	if err := f.Validate(); err != nil {
		return "", nil, err
	}
	k := caseSources[f.Kind]
	src := k.query
	w := &caseWhere{}
	if f.Status != "" {
		w.add("x.status = ?", f.Status)
	}
	if f.Model != "" {
		w.add("x.gpu_model = ?", f.Model)
	}
	asset, network := f.MethodParts()
	switch {
	case f.Method == domain.MethodBalance:
		w.add("x.payment_method = ?", domain.MethodBalance)
	case network != "":
		k.method(w, asset, network)
	}
	if !f.From.IsZero() {
		w.add("x.created_at >= ?", f.From)
	}
	if !f.To.IsZero() {
		w.add("x.created_at < ?", f.To)
	}
	if f.MinCents != nil {
		w.add(k.amount+" >= ?", *f.MinCents)
	}
	if f.MaxCents != nil {
		w.add(k.amount+" <= ?", *f.MaxCents)
	}
	if f.RefPrefix != "" {
		w.add(`x.ref LIKE ? ESCAPE '\'`, likePrefix(f.RefPrefix)+"%")
	}
	if f.Email != "" {
		w.add(`lower(a.email) LIKE ? ESCAPE '\'`, "%"+likePrefix(f.Email)+"%")
	}
	if f.Name != "" {
		w.add(`lower(a.first_name || ' ' || a.last_name) LIKE ? ESCAPE '\'`, "%"+likePrefix(f.Name)+"%")
	}
	if f.TxIDPrefix != "" {
		k.txid(w, likePrefix(f.TxIDPrefix)+"%")
	}
	return src, w, nil
}

// ListCases is a page of the list: at most f.Limit rows, newest first,
// older than f.After or (the previous page) newer than f.Before.
func (db *DB) ListCases(ctx context.Context, f domain.CaseFilter) ([]domain.CaseRow, error) {
	src, w, err := caseQuery(f)
	if err != nil {
		return nil, err
	}
	order := "DESC"
	switch {
	case f.After != nil:
		w.add("(x.created_at, x.ref) < (?, ?)", f.After.CreatedAt, f.After.Ref)
	case f.Before != nil:
		w.add("(x.created_at, x.ref) > (?, ?)", f.Before.CreatedAt, f.Before.Ref)
		order = "ASC" // the rows just newer, then turned round
	}
	q := src + w.sql()
	args := append(w.args, f.Limit)
	q += fmt.Sprintf(" ORDER BY x.created_at %s, x.ref %s LIMIT $%d", order, order, len(args))
	out := []domain.CaseRow{}
	if err := db.SelectContext(ctx, &out, q, args...); err != nil {
		return nil, fmt.Errorf("list %s: %w", f.Kind, err)
	}
	if order == "ASC" {
		slices.Reverse(out)
	}
	return out, nil
}

// CountCases counts the rows f matches (cursor and limit aside), up to
// limit: what an export would write, without reading more than that.
func (db *DB) CountCases(ctx context.Context, f domain.CaseFilter, limit int) (int, error) {
	f.After, f.Before, f.Limit = nil, nil, 1 // the page aside
	src, w, err := caseQuery(f)
	if err != nil {
		return 0, err
	}
	args := append(w.args, limit)
	var n int
	if err := db.GetContext(ctx, &n, fmt.Sprintf("SELECT count(*) FROM (%s%s LIMIT $%d) m", src, w.sql(), len(args)), args...); err != nil {
		return 0, fmt.Errorf("count %s: %w", f.Kind, err)
	}
	return n, nil
}
