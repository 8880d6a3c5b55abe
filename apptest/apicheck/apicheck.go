// Package apicheck checks that a running Kernodeck api serves: ready, its
// catalog, a registration and the reads of that account, and support's
// view of an order. Tests run it against an api started in an unusual
// way (the previous release's binary on the new schema, a least-privilege
// database role).
package apicheck

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// API is a started api.
type API struct {
	// HTTP and Ops are its API and operations (/readyz) addresses.
	HTTP, Ops string
	// AgentToken is one of its KERNODECK_SUPPORT_TOKENS; OrderRef an order
	// in its database, which support's view must show.
	AgentToken, OrderRef string
	// Exited answers an error once the process has ended, nil before.
	Exited func() error
	// Output is its log, shown when the check fails.
	Output func() string
}

// Serves waits up to 60 s for a to be ready (/readyz 200 and /healthz 200
// on its API address), then checks GET /v1/catalog, POST
// /v1/auth/register (bearer), GET /v1/me, /v1/orders and /v1/balance with
// that session, and GET /v1/support/orders/{OrderRef} with the agent's
// token. A failure is the test's, with the api's output.
func Serves(t testing.TB, a API) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("the api's output:\n%s", a.Output())
		}
	}()
	base := "http://" + a.HTTP
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := a.Exited(); err != nil {
			t.Fatalf("the api exited: %v", err)
		}
		ready, _ := Get(t, "http://"+a.Ops+"/readyz", "")
		live, _ := Get(t, base+"/healthz", "")
		if ready == http.StatusOK && live == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the api not ready in 60 s (/readyz %d, /healthz %d)", ready, live)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := Get(t, base+"/v1/catalog", ""); code != http.StatusOK {
		t.Errorf("GET /v1/catalog: %d %s", code, body)
	}
	reg, _ := json.Marshal(map[string]any{"first_name": "Grace", "last_name": "Hopper",
		"email":    "grace-" + strings.ReplaceAll(a.HTTP, ":", "-") + "@example.com",
		"password": "a long enough password", "bearer": true})
	resp, err := http.Post(base+"/v1/auth/register", "application/json", bytes.NewReader(reg))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var session struct {
		Token string `json:"token"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &session) != nil || session.Token == "" {
		t.Fatalf("POST /v1/auth/register: %d %s", resp.StatusCode, body)
	}
	for _, path := range []string{"/v1/me", "/v1/orders", "/v1/balance"} {
		if code, body := Get(t, base+path, session.Token); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
	if code, body := Get(t, base+"/v1/support/orders/"+a.OrderRef, a.AgentToken); code != http.StatusOK || !strings.Contains(body, a.OrderRef) {
		t.Errorf("GET /v1/support/orders/%s: %d %s", a.OrderRef, code, body)
	}
	if err := a.Exited(); err != nil {
		t.Errorf("the api exited: %v", err)
	}
}

// Get answers a GET's status and body (0 and the error when nothing
// answers), with a bearer token when token is not empty.
func Get(t testing.TB, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// FreeAddr is a loopback address nothing listens on (for now).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
