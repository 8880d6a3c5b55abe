package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/kernodeck/kernodeck/metrics"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// deadTemporal is a Temporal client to an address nothing listens on.
func deadTemporal(t *testing.T) client.Client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	tc, err := client.NewLazyClient(client.Options{HostPort: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	return tc
}

// With Temporal down and PostgreSQL up, the api's /readyz answers 200 (it
// serves reads; its writes through a workflow answer 503 themselves), while
// the worker's and the watchers' answer 503 naming Temporal.
func TestReadinessOfTheAPIIsTheDatabaseOnly(t *testing.T) {
	db := pgtest.NewDB(t)
	tc := deadTemporal(t)
	m, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for command, want := range map[string]struct {
		status int
		body   string
	}{
		"api":        {http.StatusOK, "database: ok\n"},
		"worker":     {http.StatusServiceUnavailable, "database: ok\ntemporal: unreachable\n"},
		"chainwatch": {http.StatusServiceUnavailable, "database: ok\ntemporal: unreachable\n"},
	} {
		rec := httptest.NewRecorder()
		m.Handler(readiness(command, db, tc), logger).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		if rec.Code != want.status || rec.Body.String() != want.body {
			t.Errorf("%s /readyz with Temporal down: %d %q, want %d %q", command, rec.Code, rec.Body.String(), want.status, want.body)
		}
	}

	// The database down, the api is not ready either.
	db.Close()
	rec := httptest.NewRecorder()
	m.Handler(readiness("api", db, tc), logger).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "database: unreachable") {
		t.Fatalf("api /readyz with the database closed: %d %q", rec.Code, rec.Body.String())
	}
}
