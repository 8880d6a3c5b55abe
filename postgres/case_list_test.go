package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// caseRefs are the references of rows.
func caseRefs(rows []domain.CaseRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Ref
	}
	return out
}

// listAll pages through the list with f, page size n, and returns every
// reference in order; then back from the last page to the first with
// Before, which must give the same pages.
func listAll(t *testing.T, db *postgres.DB, f domain.CaseFilter, n int) []string {
	t.Helper()
	ctx := context.Background()
	f.Limit = n
	var all []string
	var pages [][]string
	for {
		rows, err := db.ListCases(ctx, f)
		require.NoError(t, err)
		require.LessOrEqual(t, len(rows), n)
		if len(rows) == 0 {
			break
		}
		pages = append(pages, caseRefs(rows))
		all = append(all, caseRefs(rows)...)
		c := rows[len(rows)-1].Cursor()
		f.After, f.Before = &c, nil
	}
	// Backwards: from the last page's first row, each previous page.
	for i := len(pages) - 1; i > 0; i-- {
		first := pages[i][0]
		rows, err := db.ListCases(ctx, domain.CaseFilter{Kind: f.Kind, Status: f.Status, Model: f.Model, Method: f.Method,
			From: f.From, To: f.To, MinCents: f.MinCents, MaxCents: f.MaxCents, RefPrefix: f.RefPrefix, Email: f.Email,
			Name: f.Name, TxIDPrefix: f.TxIDPrefix, Limit: n, Before: cursorOf(t, db, f.Kind, first)})
		require.NoError(t, err)
		require.Equal(t, pages[i-1], caseRefs(rows), "page %d seen backwards", i-1)
	}
	return all
}

func cursorOf(t *testing.T, db *postgres.DB, kind, ref string) *domain.CaseCursor {
	t.Helper()
	table := map[string]string{domain.TargetOrder: "orders", domain.TargetTopUp: "topups", domain.TargetPayout: "payouts"}[kind]
	c := domain.CaseCursor{Ref: ref}
	require.NoError(t, db.Get(&c.CreatedAt, `SELECT created_at FROM `+table+` WHERE ref = $1`, ref))
	return &c
}

// The back office's list from PostgreSQL: every filter and partial search
// alone and together, and keyset pages of every size over rows whose
// created_at ties, forwards and backwards: each row once, none missed,
// in (created_at, ref) order, newest first; a row created while an agent
// pages shifts nothing.
func TestListCasesFiltersSearchesAndPages(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	zoe, err := db.CreateAccount(ctx, domain.Account{FirstName: "Zoé", LastName: "Lambert", Email: "Zoe.Lambert@Example.org"}, "h")
	require.NoError(t, err)
	max, err := db.CreateAccount(ctx, domain.Account{FirstName: "Max", LastName: "Durand", Email: "max@durand.test"}, "h")
	require.NoError(t, err)

	// Twelve orders, three created in each of four instants (ties), in
	// December (Paris: UTC+1); models, statuses and ways of paying vary.
	base := time.Date(2026, 12, 3, 22, 30, 0, 0, time.UTC) // 23:30 in Paris on the 3rd
	var orders []domain.Order
	for i := range 12 {
		acc, model, lots := zoe.ID, "rtx-a5000", 1
		if i%2 == 1 {
			acc, model, lots = max.ID, "b200", 2
		}
		o := mkOrder(t, db, acc, model, lots)
		at := base.Add(time.Duration(i/3) * time.Hour) // 22:30, 23:30 (the 4th in Paris), 00:30, 01:30 UTC
		_, err := db.Exec(`UPDATE orders SET created_at = $2 WHERE ref = $1`, o.Ref, at)
		require.NoError(t, err)
		o.CreatedAt = at
		orders = append(orders, o)
	}
	_, err = db.Exec(`UPDATE orders SET status = 'active', payment_method = 'balance' WHERE ref IN ($1, $2)`, orders[0].Ref, orders[5].Ref)
	require.NoError(t, err)
	seedIntent(t, db, "PI-LTC1", orders[2].Ref, zoe.ID, "ltc-addr-1", 1)
	_, err = db.Exec(`UPDATE payment_intents SET asset = 'LTC', network = 'litecoin' WHERE id = 'PI-LTC1'`)
	require.NoError(t, err)
	seedIntent(t, db, "PI-BTC1", orders[3].Ref, max.ID, "btc-addr-1", 2)
	_, err = db.Exec(`INSERT INTO chain_payments (network, txid, output_index, asset, intent_id, address, amount_base, amount_cents, late, state)
		VALUES ('bitcoin', 'abcdef0123456789', 0, 'BTC', 'PI-BTC1', 'btc-addr-1', 36262, 2357, false, 'confirmed')`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO payment_exceptions (target_kind, target_ref, account_id, reason, payment_key, network, txid, amount_cents)
		VALUES ('order', $1, $2, 'late', 'ethereum:0xfeedbeef:0', 'ethereum', '0xfeedbeef', 100)`, orders[4].Ref, zoe.ID)
	require.NoError(t, err)

	// All of them, newest first, ties by reference (descending).
	want := make([]string, 12)
	for i, o := range orders {
		want[i] = o.Ref
	}
	newestFirst := func(refs []string) []string {
		byRef := map[string]domain.Order{}
		for _, o := range orders {
			byRef[o.Ref] = o
		}
		out := append([]string(nil), refs...)
		for i := range out {
			for j := i + 1; j < len(out); j++ {
				a, b := byRef[out[i]], byRef[out[j]]
				if b.CreatedAt.After(a.CreatedAt) || (b.CreatedAt.Equal(a.CreatedAt) && b.Ref > a.Ref) {
					out[i], out[j] = out[j], out[i]
				}
			}
		}
		return out
	}
	all := newestFirst(want)
	order := domain.CaseFilter{Kind: domain.TargetOrder}
	for _, n := range []int{1, 2, 3, 4, 5, 12, 200} {
		require.Equal(t, all, listAll(t, db, order, n), "pages of %d", n)
	}

	// A row created while the agent pages: page 2 is the same, and the
	// new row is on top of page 1.
	order.Limit = 4
	p1, err := db.ListCases(ctx, order)
	require.NoError(t, err)
	late := mkOrder(t, db, max.ID, "rtx-a5000", 1)
	c := p1[3].Cursor()
	p2, err := db.ListCases(ctx, domain.CaseFilter{Kind: domain.TargetOrder, Limit: 4, After: &c})
	require.NoError(t, err)
	require.Equal(t, all[4:8], caseRefs(p2))
	top, err := db.ListCases(ctx, domain.CaseFilter{Kind: domain.TargetOrder, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, late.Ref, top[0].Ref)
	// From now on it is max's 13th order, two days older than the rest.
	late.CreatedAt = base.Add(-48 * time.Hour)
	_, err = db.Exec(`UPDATE orders SET created_at = $2 WHERE ref = $1`, late.Ref, late.CreatedAt)
	require.NoError(t, err)
	orders = append(orders, late)

	only := func(idx ...int) []string {
		var refs []string
		for _, i := range idx {
			refs = append(refs, orders[i].Ref)
		}
		return newestFirst(refs)
	}
	cents := func(v int64) *int64 { return &v }
	for name, tc := range map[string]struct {
		f    domain.CaseFilter
		want []string
	}{
		"status":              {domain.CaseFilter{Status: domain.StatusActive}, only(0, 5)},
		"model":               {domain.CaseFilter{Model: "b200"}, only(1, 3, 5, 7, 9, 11)},
		"paid from balance":   {domain.CaseFilter{Method: domain.MethodBalance}, only(0, 5)},
		"asset on network":    {domain.CaseFilter{Method: "LTC/litecoin"}, only(2)},
		"network":             {domain.CaseFilter{Method: domain.NetworkBitcoin}, only(3)},
		"another asset there": {domain.CaseFilter{Method: "USDT/ethereum"}, nil},
		// The 4th of December in Paris: 23:00Z on the 3rd to 23:00Z on the 4th.
		"a Paris day": {domain.CaseFilter{From: time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC),
			To: time.Date(2026, 12, 4, 23, 0, 0, 0, time.UTC)}, only(3, 4, 5, 6, 7, 8, 9, 10, 11)},
		"before a day":                   {domain.CaseFilter{To: time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC)}, only(0, 1, 2, 12)},
		"amounts":                        {domain.CaseFilter{MinCents: cents(orders[0].TotalCents), MaxCents: cents(orders[0].TotalCents)}, only(0, 2, 4, 6, 8, 10, 12)},
		"above an amount":                {domain.CaseFilter{MinCents: cents(orders[0].TotalCents + 1)}, only(1, 3, 5, 7, 9, 11)},
		"email fragment":                 {domain.CaseFilter{Email: "lambert@exa"}, only(0, 2, 4, 6, 8, 10)},
		"name fragment":                  {domain.CaseFilter{Name: "max dur"}, only(1, 3, 5, 7, 9, 11, 12)},
		"accented name":                  {domain.CaseFilter{Name: "zoé"}, only(0, 2, 4, 6, 8, 10)},
		"reference prefix":               {domain.CaseFilter{RefPrefix: orders[7].Ref[:len(orders[7].Ref)-1]}, only(7)},
		"txid of a payment":              {domain.CaseFilter{TxIDPrefix: "abcdef01"}, only(3)},
		"txid of a queued":               {domain.CaseFilter{TxIDPrefix: "0xfeed"}, only(4)},
		"txid with no match":             {domain.CaseFilter{TxIDPrefix: "abcdef02"}, nil},
		"a LIKE wildcard is a character": {domain.CaseFilter{Email: "%"}, nil},
		"everything at once": {domain.CaseFilter{Model: "b200", Status: domain.StatusActive, Method: domain.MethodBalance,
			Name: "durand", Email: "@durand", From: base, MinCents: cents(1)}, only(5)},
	} {
		tc.f.Kind = domain.TargetOrder
		if tc.f.Email == "%" {
			tc.f.Email = "%%%" // three characters, all wildcards if unescaped
		}
		got := listAll(t, db, tc.f, 2)
		if len(tc.want) == 0 {
			require.Empty(t, got, name)
		} else {
			require.Equal(t, tc.want, got, name)
		}
		n, err := db.CountCases(ctx, tc.f, 100)
		require.NoError(t, err)
		require.Equal(t, len(tc.want), n, name)
	}
	n, err := db.CountCases(ctx, domain.CaseFilter{Kind: domain.TargetOrder}, 5)
	require.NoError(t, err)
	require.Equal(t, 5, n, "counted up to the limit")

	// Top-ups: their own statuses and amounts, the customer searched alike.
	for i, amount := range []int64{10000, 50000, 200000} {
		tu, err := db.CreateTopUp(ctx, zoe.ID, amount)
		require.NoError(t, err)
		_, err = db.Exec(`UPDATE topups SET created_at = $2 WHERE ref = $1`, tu.Ref, base)
		require.NoError(t, err)
		if i == 2 {
			_, err = db.Exec(`UPDATE topups SET status = 'credited', received_cents = amount_cents WHERE ref = $1`, tu.Ref)
			require.NoError(t, err)
		}
	}
	tus := listAll(t, db, domain.CaseFilter{Kind: domain.TargetTopUp, Email: "zoe."}, 2)
	require.Len(t, tus, 3)
	credited, err := db.ListCases(ctx, domain.CaseFilter{Kind: domain.TargetTopUp, Status: domain.TopUpCredited, MinCents: cents(100000), Limit: 10})
	require.NoError(t, err)
	require.Len(t, credited, 1)
	require.Equal(t, int64(200000), credited[0].PaidCents)
	require.Equal(t, "Zoe.Lambert@Example.org", credited[0].Email)
	require.Equal(t, "topup", credited[0].Kind)

	rows, err := db.ListCases(ctx, domain.CaseFilter{Kind: domain.TargetOrder, Method: "LTC/litecoin", Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{"LTC", "litecoin"}, []string{rows[0].Asset, rows[0].Network}, "the latest request's method")

	// A filter that is not valid runs nothing.
	_, err = db.ListCases(ctx, domain.CaseFilter{Kind: domain.TargetOrder, Status: "lost", Limit: 10})
	require.Equal(t, domain.ECodeInvalid, domain.ErrorCode(err), fmt.Sprint(err))
}

// Payouts are the list's third kind: their own statuses, asset and
// network (the method filter reads the payout's), amount and txid, with
// keyset pages over ties as the others.
func TestListCasesPayouts(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	zoe := mkAccount(t, db, "zoe.payouts@example.com")
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for i, p := range []struct {
		ref, asset, network, status, txid string
		cents                             int64
	}{
		{"PO-AAAA0001", "LTC", "litecoin", "requested", "", 5000},
		{"PO-AAAA0002", "LTC", "litecoin", "done", "ltc0abc1", 20000},
		{"PO-AAAA0003", "ETH", "ethereum", "signed", "0xdeadbeef", 12000},
		{"PO-AAAA0004", "USDT", "ethereum", "declined", "", 9000},
	} {
		var txid any
		if p.txid != "" {
			txid = p.txid
		}
		_, err := db.Exec(`INSERT INTO payouts (ref, account_id, asset, network, address, amount_cents, fee_cents, decimals,
			amount_base, rate, rate_at, status, needs_two, txid, request_key, created_at)
			VALUES ($1, $2, $3, $4, 'addr-of-twenty-chars-or-more', $5, 10, 8, 1000, 90, now(), $6, false, $7, $1, $8)`,
			p.ref, zoe.ID, p.asset, p.network, p.cents, p.status, txid, at.Add(time.Duration(i/2)*time.Minute))
		require.NoError(t, err)
	}
	all := listAll(t, db, domain.CaseFilter{Kind: domain.TargetPayout}, 1)
	require.Equal(t, []string{"PO-AAAA0004", "PO-AAAA0003", "PO-AAAA0002", "PO-AAAA0001"}, all)
	cents := func(v int64) *int64 { return &v }
	for name, tc := range map[string]struct {
		f    domain.CaseFilter
		want []string
	}{
		"status":         {domain.CaseFilter{Status: string(domain.PayoutDone)}, []string{"PO-AAAA0002"}},
		"network":        {domain.CaseFilter{Method: domain.NetworkEthereum}, []string{"PO-AAAA0004", "PO-AAAA0003"}},
		"asset":          {domain.CaseFilter{Method: "USDT/ethereum"}, []string{"PO-AAAA0004"}},
		"txid":           {domain.CaseFilter{TxIDPrefix: "0xdead"}, []string{"PO-AAAA0003"}},
		"amount":         {domain.CaseFilter{MinCents: cents(10000), MaxCents: cents(15000)}, []string{"PO-AAAA0003"}},
		"customer":       {domain.CaseFilter{Email: "payouts@"}, all},
		"reference":      {domain.CaseFilter{RefPrefix: "PO-AAAA0001"}, []string{"PO-AAAA0001"}},
		"another person": {domain.CaseFilter{Name: "nobody"}, nil},
	} {
		tc.f.Kind = domain.TargetPayout
		got := listAll(t, db, tc.f, 1)
		if tc.want == nil {
			require.Empty(t, got, name)
			continue
		}
		require.Equal(t, tc.want, got, name)
	}
	rows, err := db.ListCases(ctx, domain.CaseFilter{Kind: domain.TargetPayout, Status: string(domain.PayoutDone), Limit: 5})
	require.NoError(t, err)
	require.Equal(t, domain.CaseRow{Kind: "payout", Ref: "PO-AAAA0002", Status: "done", AccountID: zoe.ID, Email: zoe.Email,
		FirstName: zoe.FirstName, LastName: zoe.LastName, AmountCents: 20000, PaidCents: 20000, Asset: "LTC", Network: "litecoin",
		CreatedAt: rows[0].CreatedAt}, rows[0])
}
