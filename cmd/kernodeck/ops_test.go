package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jmoiron/sqlx"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/devserver/devservertest"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// service is `kernodeck dev` (API, worker, starter, chain watcher) running
// in the test process against a real Temporal dev server, PostgreSQL and a
// Litecoin Core regtest node, with its operations listener.
type service struct {
	t          *testing.T
	api        string // http://host:port
	ops        string // metrics listener
	db         *sqlx.DB
	ltc        *ltcNode
	supportTok string
	stop       func()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// freshDatabaseURL names a database that does not exist yet (`dev` creates
// it); it is dropped when the test ends.
func freshDatabaseURL(t *testing.T) (string, *sqlx.DB) {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "kd_test_" + hex.EncodeToString(b[:])
	u, err := url.Parse(pgtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sqlx.Open("postgres", u.String())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	db, err := sqlx.Open("postgres", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = db.Close()
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		_ = admin.Close()
	})
	return u.String(), db
}

// startService runs `kernodeck dev` with env on top of the test defaults.
func startService(t *testing.T, env map[string]string) *service {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: Temporal dev server, PostgreSQL and litecoind")
	}
	dbURL, db := freshDatabaseURL(t)
	ltc := startLtc(t)
	s := &service{t: t, api: freeAddr(t), ops: freeAddr(t), db: db, ltc: ltc, supportTok: "ops-test-agent-token-0123456789"}
	defaults := map[string]string{
		"KERNODECK_DATABASE_URL":         dbURL,
		"KERNODECK_HTTP_ADDR":            s.api,
		"KERNODECK_METRICS_ADDR":         s.ops,
		"KERNODECK_DEV_DIR":              t.TempDir(),
		"KERNODECK_DEV_NODES":            "",
		"KERNODECK_SUPPORT_TOKENS":       "ops-agent:" + s.supportTok,
		"KERNODECK_RATES":                "static",
		"KERNODECK_STATIC_RATES":         devStaticRates,
		"KERNODECK_LITECOIN_NODE_URL":    ltc.url,
		"KERNODECK_XPUB_LITECOIN":        devnodes.LitecoinRegtestXpub,
		"KERNODECK_LITECOIN_KEY_NETWORK": "litecoin-regtest",
		"KERNODECK_CONFIRMATIONS":        "litecoin=1",
		"KERNODECK_WATCHER_POLL":         "200ms",
		"KERNODECK_STARTER_INTERVAL":     "1s",
		"KERNODECK_LOG_LEVEL":            "warn",
		"TEMPORAL_CONFIG_FILE":           filepath.Join(t.TempDir(), "none.toml"),
	}
	if _, ok := env["TEMPORAL_ADDRESS"]; !ok {
		defaults["TEMPORAL_ADDRESS"] = devservertest.Start(t)
	}
	for k, v := range env {
		defaults[k] = v
	}
	for k, v := range defaults {
		t.Setenv(k, v)
	}
	gin.SetMode(gin.ReleaseMode)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var code int
	logs := &lockedWriter{w: &bytes.Buffer{}}
	go func() {
		defer close(done)
		code = run(ctx, []string{"dev"}, io.Discard, logs)
	}()
	s.stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("dev did not stop within 30 s")
		}
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("service log:\n%s", logs.String())
		}
	})
	s.waitFor(90*time.Second, "the service to be ready", func() bool {
		select {
		case <-done:
			t.Fatalf("dev exited with %d:\n%s", code, logs.String())
		default:
		}
		for _, u := range []string{"http://" + s.ops + "/readyz", "http://" + s.api + "/healthz"} {
			resp, err := http.Get(u)
			if err != nil {
				return false
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return false
			}
		}
		return true
	})
	return s
}

func (s *service) waitFor(limit time.Duration, what string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// call sends a JSON request to the API and decodes the answer.
func (s *service) call(method, path, token string, body any) (int, map[string]any) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+s.api+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if method == http.MethodPost && strings.HasPrefix(path, "/v1/support/") {
		req.Header.Set("Idempotency-Key", rand.Text()) // a new support action
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (s *service) must(want int, method, path, token string, body any) map[string]any {
	s.t.Helper()
	got, out := s.call(method, path, token, body)
	if got != want {
		s.t.Fatalf("%s %s: %d, want %d: %v", method, path, got, want, out)
	}
	return out
}

// customer registers a customer and returns its bearer token.
func (s *service) customer(email string) string {
	out := s.must(http.StatusCreated, "POST", "/v1/auth/register", "", map[string]any{
		"first_name": "Ops", "last_name": "Test", "email": email,
		"password": "a sufficiently long passphrase", "bearer": true})
	// Confirmed as if the mailed link were opened (not what these tests are about).
	if _, err := s.db.Exec(`UPDATE accounts SET email_verified_at = now() WHERE lower(email) = lower($1)`, email); err != nil {
		s.t.Fatal(err)
	}
	return out["token"].(string)
}

// newOrder creates a 3-day RTX A5000 order and waits for its workflow.
func (s *service) newOrder(token string) string {
	out := s.must(http.StatusCreated, "POST", "/v1/orders", token, map[string]any{
		"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"})
	ref := out["order"].(map[string]any)["reference"].(string)
	s.waitStatus(token, ref, "awaiting_payment")
	return ref
}

func (s *service) status(token, ref string) string {
	_, out := s.call("GET", "/v1/orders/"+ref, token, nil)
	o, _ := out["order"].(map[string]any)
	st, _ := o["status"].(string)
	return st
}

func (s *service) waitStatus(token, ref, want string) {
	s.t.Helper()
	s.waitFor(90*time.Second, "order "+ref+" "+want, func() bool { return s.status(token, ref) == want })
}

// payOnChain asks for a Litecoin payment request and pays it on regtest.
func (s *service) payOnChain(token, ref string) {
	s.t.Helper()
	pi := s.must(http.StatusCreated, "POST", "/v1/orders/"+ref+"/payment-intents", token,
		map[string]any{"asset": "LTC", "network": "litecoin"})["payment_intent"].(map[string]any)
	s.ltc.pay(pi["address"].(string), pi["amount"].(string))
}

// scrape reads and parses the operations listener's /metrics.
func (s *service) scrape() (map[string]*dto.MetricFamily, string) {
	s.t.Helper()
	resp, err := http.Get("http://" + s.ops + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("/metrics: %d %s", resp.StatusCode, raw)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		s.t.Fatalf("/metrics is not the Prometheus text format: %v", err)
	}
	return fams, string(raw)
}

// value finds the sample of fam whose labels include want; histograms give
// their count. ok is false when there is none.
func value(fams map[string]*dto.MetricFamily, fam string, want map[string]string) (float64, bool) {
	f := fams[fam]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// --- Litecoin Core regtest ---

type ltcNode struct {
	t   *testing.T
	url string
}

func startLtc(t *testing.T) *ltcNode {
	t.Helper()
	const bin = "/usr/lib/litecoin/litecoind"
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s not found: run scripts/ensure-tools.sh", bin)
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "-regtest", "-datadir="+t.TempDir(), "-server", "-listen=0", "-rpcbind=127.0.0.1",
		"-rpcallowip=127.0.0.1", "-rpcport="+port, "-rpcuser=u", "-rpcpassword=p", "-txindex=1",
		"-fallbackfee=0.0001", "-printtoconsole=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	n := &ltcNode{t: t, url: "http://u:p@" + addr}
	deadline := time.Now().Add(60 * time.Second)
	for n.try("getblockchaininfo", nil, nil) != nil {
		if time.Now().After(deadline) {
			t.Fatal("litecoind did not answer within 60 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	n.call("createwallet", []any{"test"}, nil)
	n.mine(101) // mature coins to pay with
	return n
}

func (n *ltcNode) try(method string, params []any, out any) error {
	return devnodes.RPC(context.Background(), n.url, method, params, out)
}

func (n *ltcNode) call(method string, params []any, out any) {
	n.t.Helper()
	if err := n.try(method, params, out); err != nil {
		n.t.Fatal(err)
	}
}

func (n *ltcNode) mine(blocks int) {
	n.t.Helper()
	var addr string
	n.call("getnewaddress", nil, &addr)
	n.call("generatetoaddress", []any{blocks, addr}, nil)
}

func (n *ltcNode) height() int64 {
	var h int64
	n.call("getblockcount", nil, &h)
	return h
}

// pay sends amount (whole LTC, exact) to address and mines it.
func (n *ltcNode) pay(address, amount string) {
	n.t.Helper()
	n.call("sendtoaddress", []any{address, json.Number(amount)}, nil)
	n.mine(1)
}

// lockedWriter serialises the service's log lines from its goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.w)
}
