package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// BenchmarkOrderRead is GET /v1/orders/{ref} of an active-looking order
// (13 timeline events with data, its access row) through the whole handler
// against PostgreSQL, as `kdload api` reads it: the API's share of a read
// (the statement, decoding its parts, the customer view, encoding).
// "cached" runs the listener that keeps the order's view and the session
// cached (as `kernodeck api` does): the read then runs no statement, and
// its JSON comes from the memo (api.answerMemo).
// go test -run '^$' -bench OrderRead -benchmem ./api/
func BenchmarkOrderRead(b *testing.B) {
	b.Run("whole", func(b *testing.B) { benchmarkOrderRead(b, false) })
	b.Run("cached", func(b *testing.B) { benchmarkOrderRead(b, true) })
	b.Run("healthz", func(b *testing.B) {
		h := newHarness(b)
		req := httptest.NewRequest("GET", "/healthz", nil)
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("%d %s", rec.Code, rec.Body)
			}
		}
	})
}

func benchmarkOrderRead(b *testing.B, cached bool) {
	h := newHarness(b)
	c := h.register("bench@example.com")
	ref := h.order(c)
	if _, err := h.db.Exec(`INSERT INTO timeline_events (ref, idem_key, kind, message, data)
		SELECT $1, 'bench:' || g, 'provisioning_step', 'Étape de préparation ' || g || ' terminée.',
			jsonb_build_object('step', 'prepare', 'attempt', 1, 'n', g, 'duration_ms', 1234)
		FROM generate_series(1, 12) g`, ref); err != nil {
		b.Fatal(err)
	}
	if _, err := h.db.Exec(`INSERT INTO order_access (order_ref, host, port, username, password, gpu_model_seen,
		gpu_count_seen, driver_version, cuda_version) VALUES ($1, 'gpu1.example.net', 22, 'kd', 'p', 'RTX A5000', 2, '550.54', '12.4')`, ref); err != nil {
		b.Fatal(err)
	}
	if cached {
		pgtest.Listen(b, h.db)
	}
	req := httptest.NewRequest("GET", "/v1/orders/"+ref, nil)
	req.Header.Set("Authorization", "Bearer "+c.auth.bearer)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}
