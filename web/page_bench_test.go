package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/memo"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// BenchmarkOrderPage is GET /orders/{ref} of an active order (13 timeline
// events, its access row) as a browser reads it (its session cookie,
// gzip), with the listener that keeps the order's view cached running as
// in `kernodeck api`: the site's share of a page (the session's statement,
// the template, the compression).
// go test -run '^$' -bench OrderPage -benchmem ./web/
func BenchmarkOrderPage(b *testing.B) {
	sh := newSiteHarness(b)
	br, ref := sh.activeOrder("bench-page@example.com")
	pgtest.Listen(b, sh.db)

	req := httptest.NewRequest("GET", "/orders/"+ref, nil)
	req.AddCookie(br.cookie)
	req.Header.Set("Accept-Encoding", "gzip")
	// remembered: the page unchanged since the last read (tracked.go);
	// made: every read makes it again.
	for _, made := range []bool{false, true} {
		b.Run(map[bool]string{false: "remembered", true: "made"}[made], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if made {
					sh.site.madePages = memo.New[madePage](madePages)
				}
				rec := httptest.NewRecorder()
				sh.h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// activeOrder is an active order of a new account (email): 13 timeline
// events and its access row, as a customer reads it most.
func (sh *siteHarness) activeOrder(email string) (*browser, string) {
	t := sh.t
	t.Helper()
	br := sh.signedIn(email, true)
	ctx := context.Background()
	var accountID int64
	if err := sh.db.Get(&accountID, `SELECT id FROM accounts WHERE email = $1`, email); err != nil {
		t.Fatal(err)
	}
	item, err := sh.db.CatalogItem(ctx, "rtx-a5000")
	if err != nil {
		t.Fatal(err)
	}
	q, err := domain.PriceQuote(item, domain.Configuration{Model: "rtx-a5000", Lots: 1, DurationDays: 3, Preset: "pytorch"})
	if err != nil {
		t.Fatal(err)
	}
	o, err := sh.db.CreateOrder(ctx, accountID, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`INSERT INTO timeline_events (ref, idem_key, kind, message, data)
			SELECT $1, 'bench:' || g, 'provisioning_step', 'Étape de préparation ' || g || ' terminée.',
				jsonb_build_object('step', 'prepare', 'attempt', 1, 'n', g, 'duration_ms', 1234)
			FROM generate_series(1, 12) g`,
		`INSERT INTO order_access (order_ref, host, port, username, gpu_model_seen, gpu_count_seen, driver_version,
			cuda_version) VALUES ($1, 'gpu1.example.net', 22, 'kd', 'RTX A5000', 1, '550.54', '12.4')`,
		`UPDATE orders SET status = 'active', paid_cents = total_cents, paid_at = now(), period_start = now(),
			period_end = now() + interval '3 days' WHERE ref = $1`,
	} {
		if _, err := sh.db.Exec(stmt, o.Ref); err != nil {
			t.Fatal(err)
		}
	}
	return br, o.Ref
}
