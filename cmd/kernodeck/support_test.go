package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/domain"
)

// supportCall is one request the CLI made.
type supportCall struct {
	method, path, query, auth string
	body                      map[string]any
}

// recordedCall is a call with its Idempotency-Key.
type recordedCall struct {
	supportCall
	key string
}

// supportCLI runs the CLI against a recording support API that answers
// answer(path) (status and body; 200 and an action when status is 0) and
// returns the runner and the calls made.
func supportCLI(t *testing.T, answer func(path string) (int, string)) (run func(args ...string) (int, string), got *[]recordedCall) {
	t.Helper()
	got = &[]recordedCall{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := recordedCall{supportCall{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, auth: r.Header.Get("Authorization")},
			r.Header.Get("Idempotency-Key")}
		if b, _ := io.ReadAll(r.Body); len(b) > 0 {
			_ = json.Unmarshal(b, &c.body)
		}
		*got = append(*got, c)
		status, body := answer(r.URL.Path)
		if status == 0 {
			status, body = http.StatusOK, `{"action":{"id":1}}`
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	t.Setenv("KERNODECK_SUPPORT_TOKEN", "tok-0123456789abcdef")
	t.Setenv("KERNODECK_SUPPORT_TOKEN_FILE", "")
	run = func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := runSupport(context.Background(), append([]string{"--url", srv.URL}, args...), &out, &errb)
		return code, out.String() + errb.String()
	}
	return run, got
}

// checkCalls compares the calls made with want (bodies field by field).
func checkCalls(t *testing.T, got []recordedCall, want []supportCall) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("calls: %+v", got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.method != w.method || g.path != w.path || g.query != w.query || g.auth != w.auth || len(g.body) != len(w.body) {
			t.Errorf("call %d: %+v, want %+v", i, g, w)
		}
		for k, v := range w.body {
			if g.body[k] != v {
				t.Errorf("call %d: %s = %v, want %v", i, k, g.body[k], v)
			}
		}
		// Every action carries a key of its own; reads and answers none.
		action := g.method == http.MethodPost && !strings.HasSuffix(g.path, "/answer")
		if action != domain.IdempotencyKeyValid(g.key) || (!action && g.key != "") {
			t.Errorf("call %d %s: Idempotency-Key %q", i, g.path, g.key)
		}
		for j := range i {
			if g.key != "" && got[j].key == g.key {
				t.Errorf("calls %d and %d share the key %q", j, i, g.key)
			}
		}
	}
}

// An action sent again with --idempotency-key carries that key (the API
// answers its first result without running it twice); when an action
// fails or is in progress, the CLI prints the key to send it again with.
func TestSupportCLIIdempotencyKey(t *testing.T) {
	status := http.StatusServiceUnavailable
	run, got := supportCLI(t, func(string) (int, string) {
		return status, `{"error":{"code":"unavailable","message":"Le service est momentanément indisponible."},"action":{"id":3}}`
	})
	code, out := run("extend", "KD-A", "--days", "1", "--reason", "panne")
	if code != 1 || len(*got) != 1 || !strings.Contains(out, "--idempotency-key "+(*got)[0].key) {
		t.Fatalf("failed action: %d %s %+v", code, out, *got)
	}
	first := (*got)[0].key
	status = http.StatusAccepted
	code, out = run("extend", "KD-A", "--days", "1", "--reason", "panne", "--idempotency-key", first)
	if code != 0 || (*got)[1].key != first || !strings.Contains(out, "--idempotency-key "+first) {
		t.Fatalf("sent again: %d %s %+v", code, out, *got)
	}
}

const bearer = "Bearer tok-0123456789abcdef"

// The CLI sends each action to the support API with the agent's token; the
// API (tested in package api) audits it and runs the workflow update.
func TestSupportCLIRequests(t *testing.T) {
	run, got := supportCLI(t, func(path string) (int, string) {
		if strings.HasSuffix(path, "/refund") {
			return http.StatusConflict, `{"error":{"code":"conflict","message":"Le remboursement dépasserait le montant payé."}}`
		}
		return 0, ""
	})
	if code, out := run("extend", "KD-A", "--days", "2", "--reason", "geste commercial"); code != 0 {
		t.Fatalf("extend: %d %s", code, out)
	}
	if code, out := run("refund", "KD-A", "--amount-cents", "999999", "--reason", "trop"); code != 1 || !strings.Contains(out, "409") {
		t.Fatalf("refused refund: %d %s", code, out)
	}
	if code, _ := run("requests"); code != 0 {
		t.Fatal("requests")
	}
	if code, _ := run("answer", "7", "--message", "Réessayez avec pip install notebook."); code != 0 {
		t.Fatal("answer")
	}
	if code, _ := run("bogus", "KD-A"); code != 2 {
		t.Fatal("unknown action accepted")
	}
	checkCalls(t, *got, []supportCall{
		{"POST", "/v1/support/orders/KD-A/extend", "", bearer, map[string]any{"days": 2.0, "reason": "geste commercial"}},
		{"POST", "/v1/support/orders/KD-A/refund", "", bearer, map[string]any{"amount_cents": 999999.0, "reason": "trop"}},
		{"GET", "/v1/support/support-requests", "", bearer, nil},
		{"POST", "/v1/support/support-requests/7/answer", "", bearer, map[string]any{"message": "Réessayez avec pip install notebook."}},
	})
}

// The exception queue's subcommands: list, refund (all or part), count,
// value (or returned on chain), resolve, and find by any identifier; a
// refusal comes back as exit code 1 with the API's French message.
func TestSupportCLIExceptions(t *testing.T) {
	run, got := supportCLI(t, func(path string) (int, string) {
		switch {
		case path == "/v1/support/exceptions":
			return http.StatusOK, `{"exceptions":[{"id":17,"reason":"late","remaining_cents":2357}]}`
		case path == "/v1/support/find":
			return http.StatusOK, `{"results":[{"kind":"order","reference":"KD-A"}]}`
		case strings.HasSuffix(path, "/18/refund"):
			return http.StatusConflict, `{"error":{"code":"conflict","message":"Ce montant en attente n'a plus que 0.00 USD à rembourser."}}`
		}
		return 0, ""
	})
	steps := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"exceptions"}, 0, `"remaining_cents": 2357`},
		{[]string{"refund-exception", "17", "--reason", "remboursement au solde"}, 0, ""},
		{[]string{"refund-exception", "18", "--amount-cents", "500", "--reason", "une partie"}, 1, "n'a plus que 0.00 USD"},
		{[]string{"count-exception", "19", "--amount-cents", "1000", "--reason", "compté"}, 0, ""},
		{[]string{"value-exception", "20", "--amount-cents", "500", "--reason", "cours du jour"}, 0, ""},
		{[]string{"value-exception", "21", "--returned-on-chain", "--reason", "renvoyé"}, 0, ""},
		{[]string{"resolve-exception", "22", "--reason", "vu"}, 0, ""},
		{[]string{"find", "alice@example.com"}, 0, `"reference": "KD-A"`},
		{[]string{"find", "bc1q addr/with?odd&chars"}, 0, ""},
	}
	for _, s := range steps {
		if code, out := run(s.args...); code != s.code || !strings.Contains(out, s.out) {
			t.Fatalf("%v: exit %d, want %d: %s", s.args, code, s.code, out)
		}
	}
	checkCalls(t, *got, []supportCall{
		{"GET", "/v1/support/exceptions", "", bearer, nil},
		{"POST", "/v1/support/exceptions/17/refund", "", bearer, map[string]any{"amount_cents": 0.0, "reason": "remboursement au solde"}},
		{"POST", "/v1/support/exceptions/18/refund", "", bearer, map[string]any{"amount_cents": 500.0, "reason": "une partie"}},
		{"POST", "/v1/support/exceptions/19/count", "", bearer, map[string]any{"amount_cents": 1000.0, "reason": "compté"}},
		{"POST", "/v1/support/exceptions/20/value", "", bearer, map[string]any{"amount_cents": 500.0, "reason": "cours du jour"}},
		{"POST", "/v1/support/exceptions/21/value", "", bearer, map[string]any{"amount_cents": 0.0, "returned_on_chain": true, "reason": "renvoyé"}},
		{"POST", "/v1/support/exceptions/22/resolve", "", bearer, map[string]any{"reason": "vu"}},
		{"GET", "/v1/support/find", "q=alice%40example.com", bearer, nil},
		{"GET", "/v1/support/find", "q=bc1q+addr%2Fwith%3Fodd%26chars", bearer, nil},
	})
}

// The token is read from the environment or a file only: --token, in any
// spelling and place, is refused with a message saying what to use, before
// any request and without echoing the token.
func TestSupportCLITokenNeverAnArgument(t *testing.T) {
	run, got := supportCLI(t, func(string) (int, string) { return 0, "" })
	const secret = "tok-on-the-command-line-0123"
	for _, args := range [][]string{
		{"--token", secret, "show", "KD-A"},
		{"--token=" + secret, "show", "KD-A"},
		{"-token", secret, "show", "KD-A"},
		{"show", "KD-A", "--token", secret},
		{"extend", "KD-A", "--days", "2", "--reason", "x", "-token=" + secret},
	} {
		code, out := run(args...)
		if code != 2 || !strings.Contains(out, "--token is refused") || !strings.Contains(out, "KERNODECK_SUPPORT_TOKEN") ||
			!strings.Contains(out, "--token-file") || strings.Contains(out, secret) {
			t.Fatalf("%v: exit %d: %s", args, code, out)
		}
	}
	if len(*got) != 0 {
		t.Fatalf("requests made: %+v", *got)
	}
	// A value that merely reads "--token" is not the flag.
	if code, out := run("answer", "7", "--message", "--token"); code != 0 {
		t.Fatalf("answer: %d %s", code, out)
	}
	if len(*got) != 1 || (*got)[0].body["message"] != "--token" {
		t.Fatalf("calls: %+v", *got)
	}
}

func TestSupportCLITokenFromEnvironmentOrFile(t *testing.T) {
	run, got := supportCLI(t, func(string) (int, string) { return 0, "" })
	dir := t.TempDir()
	file := dir + "/token"
	if err := os.WriteFile(file, []byte("tok-from-a-file-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := run("show", "KD-A"); code != 0 { // KERNODECK_SUPPORT_TOKEN
		t.Fatalf("env: %d %s", code, out)
	}
	if code, out := run("--token-file", file, "show", "KD-A"); code != 0 {
		t.Fatalf("--token-file: %d %s", code, out)
	}
	t.Setenv("KERNODECK_SUPPORT_TOKEN_FILE", file)
	if code, out := run("show", "KD-A"); code != 0 {
		t.Fatalf("KERNODECK_SUPPORT_TOKEN_FILE: %d %s", code, out)
	}
	checkCalls(t, *got, []supportCall{
		{"GET", "/v1/support/orders/KD-A", "", bearer, nil},
		{"GET", "/v1/support/orders/KD-A", "", "Bearer tok-from-a-file-0123456789", nil},
		{"GET", "/v1/support/orders/KD-A", "", "Bearer tok-from-a-file-0123456789", nil},
	})

	t.Setenv("KERNODECK_SUPPORT_TOKEN_FILE", "")
	for _, tc := range []struct {
		content, want string
	}{
		{"", "one token expected"},
		{"a\nb\n", "one token expected"},
	} {
		if err := os.WriteFile(file, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, out := run("--token-file", file, "show", "KD-A"); code != 2 || !strings.Contains(out, tc.want) {
			t.Fatalf("%q: %d %s", tc.content, code, out)
		}
	}
	if code, out := run("--token-file", dir+"/missing", "show", "KD-A"); code != 2 || !strings.Contains(out, "agent token file") {
		t.Fatalf("missing file: %d %s", code, out)
	}
	t.Setenv("KERNODECK_SUPPORT_TOKEN", "")
	if code, out := run("show", "KD-A"); code != 2 || !strings.Contains(out, "no agent token") {
		t.Fatalf("no token: %d %s", code, out)
	}
	if len(*got) != 3 {
		t.Fatalf("refused runs made requests: %+v", *got)
	}
}
