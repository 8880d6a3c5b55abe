// Package e2e runs the whole service against a real Temporal dev server and a
// real PostgreSQL: the application as package app assembles it for
// production, with the API over HTTP, the worker with its real activities and
// the local provisioning driver, and the workflow client in between.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/devserver/devservertest"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/notify"
	"github.com/kernodeck/kernodeck/payments"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/provision/localpg"
	"github.com/kernodeck/kernodeck/provision/sshhost"
	"github.com/kernodeck/kernodeck/secrets"
	"github.com/kernodeck/kernodeck/workers"
	"github.com/kernodeck/kernodeck/workflows"
)

const agentToken = "e2e-agent-token-0123456789"

// e2eKeys seals access secrets and Temporal payloads in these tests (a
// test-only key: the replayer needs the same one).
const e2eKeys = "e2e1:ZTJlLXRlc3Qta2V5LW5vdC1mb3ItcHJvZHVjdGlvbiE="

func e2eKeyring(t testing.TB) *secrets.Keyring {
	t.Helper()
	k, err := secrets.Parse(e2eKeys)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// envConfig changes what newEnv runs.
type envConfig struct {
	// provisioner replaces the local driver.
	provisioner func(db *postgres.DB, kr *secrets.Keyring) activities.Provisioner
	// ssh, if set, is the machine driver (and the availability rule).
	ssh func(db *postgres.DB, kr *secrets.Keyring) *sshhost.Driver
	// mail, if set, runs a mail dispatcher in the worker.
	mail *notify.SMTPConfig
	// reminderOffsets replace the default reminders.
	reminderOffsets []time.Duration
	// payments, if set, serves payment requests (activities and API).
	payments func(db *postgres.DB) *payments.Service
}

type env struct {
	t      *testing.T
	addr   string // Temporal frontend
	kr     *secrets.Keyring
	db     *postgres.DB
	tc     client.Client
	api    *httptest.Server
	logger *slog.Logger
	app    *app.App
	// extensionKey is the Idempotency-Key of the next POST of an extension.
	extensionKey string
}

// newEnv starts a Temporal dev server (headless, in memory), a worker and the
// API on a fresh database.
func newEnv(t *testing.T, opts ...func(*envConfig)) *env {
	t.Helper()
	ec := envConfig{reminderOffsets: []time.Duration{48 * time.Hour, 6 * time.Hour}}
	for _, o := range opts {
		o(&ec)
	}
	if testing.Short() {
		t.Skip("end-to-end test: needs the Temporal CLI (scripts/ensure-tools.sh)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	addr := devservertest.Start(t)

	db := pgtest.NewDB(t)
	kr := e2eKeyring(t)
	tc, err := client.Dial(app.ClientOptions(client.Options{HostPort: addr}, kr, nil, logger))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	if err := workers.RegisterSearchAttributes(ctx, tc, "default", logger); err != nil {
		t.Fatal(err)
	}
	var prov activities.Provisioner = &localpg.Provisioner{Store: postgres.LocalGPUs{DB: db}, Host: "gpu-e2e.local", Port: 2222, Keyring: kr}
	if ec.provisioner != nil {
		prov = ec.provisioner(db, kr)
	}
	var ssh *sshhost.Driver
	provisionerName := postgres.ProvisionerLocal
	if ec.ssh != nil {
		prov, ssh, provisionerName = nil, ec.ssh(db, kr), postgres.ProvisionerSSH
	}
	var pay *payments.Service
	if ec.payments != nil {
		pay = ec.payments(db)
	}
	a := app.New(app.Config{DB: db, Temporal: tc, Keyring: kr, Payments: pay,
		Provisioner: prov, SSH: ssh, ProvisionerName: provisionerName,
		Holds:  &app.Holds{}, // capacity held, without limits per account or network
		Logger: logger})
	if ec.mail != nil {
		d, err := a.Dispatcher(app.Mail{PublicURL: "https://kernodeck.test", SMTP: *ec.mail,
			From: "Kernodeck <noreply@kernodeck.test>", Poll: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = d.Run(ctx) }()
	}
	w := a.Worker()
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	h := a.API(api.Config{
		AgentTokens: map[string]string{agentToken: "e2e-agent"},
		// One agent moves any amount alone (four-eyes: api and browser tests).
		SupportLimits: domain.SupportLimits{FourEyesCents: 1 << 50, AgentDailyCapCents: 1 << 51},
		// A customer of the held-order races has ten unpaid orders at once.
		Quotas: api.Quotas{UnpaidOrdersPerAccount: 100},
		Rental: workflows.RentalConfig{
			UnpaidTimeout:        time.Hour,
			ReminderOffsets:      ec.reminderOffsets,
			ProvisioningAttempts: 3,
		},
	}, nil)
	go func() { _ = h.Run(ctx) }()
	hs := httptest.NewServer(h.Handler)
	t.Cleanup(hs.Close)
	t.Cleanup(h.CloseStreams) // before Close, as a graceful shutdown does
	return &env{t: t, addr: addr, kr: kr, db: db, tc: tc, api: hs, logger: logger, app: a}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// call sends a JSON request with a bearer token ("" for none) and decodes the
// JSON answer into a generic map.
func (e *env) call(method, path, token string, body any) (int, map[string]any) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.api.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if method == http.MethodPost && strings.HasPrefix(path, "/v1/support/") {
		req.Header.Set("Idempotency-Key", rand.Text()) // a new support action
	}
	if method == http.MethodPost && strings.HasSuffix(path, "/extensions") {
		req.Header.Set("Idempotency-Key", e.extensionKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	if len(raw) > 0 {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			e.t.Fatalf("%s %s: non-JSON answer %d: %s", method, path, resp.StatusCode, raw)
		}
		if m, ok := v.(map[string]any); ok {
			out = m
		} else {
			out["items"] = v
		}
	}
	return resp.StatusCode, out
}

// must calls and fails the test unless the status is want.
func (e *env) must(want int, method, path, token string, body any) map[string]any {
	e.t.Helper()
	got, out := e.call(method, path, token, body)
	if got != want {
		e.t.Fatalf("%s %s: status %d, want %d: %v", method, path, got, want, out)
	}
	return out
}

// waitFor polls fn until it returns true or the deadline passes.
func (e *env) waitFor(what string, fn func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !fn() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case nil:
		return ""
	default:
		return fmt.Sprint(x)
	}
}
