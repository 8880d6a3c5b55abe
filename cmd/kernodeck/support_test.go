package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The CLI sends each action to the support API with the agent's token; the
// API (tested in package api) audits it and runs the workflow update.
func TestSupportCLIRequests(t *testing.T) {
	type call struct {
		method, path, auth string
		body               map[string]any
	}
	var got []call
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := call{method: r.Method, path: r.URL.Path, auth: r.Header.Get("Authorization")}
		if b, _ := io.ReadAll(r.Body); len(b) > 0 {
			_ = json.Unmarshal(b, &c.body)
		}
		got = append(got, c)
		if strings.HasSuffix(r.URL.Path, "/refund") {
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":{"code":"conflict","message":"Le remboursement dépasserait le montant payé."}}`))
			return
		}
		_, _ = w.Write([]byte(`{"action":{"id":1}}`))
	}))
	defer srv.Close()
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := runSupport(context.Background(), append([]string{"--url", srv.URL, "--token", "tok-0123456789abcdef"}, args...), &out, &errb)
		return code, out.String() + errb.String()
	}
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
	want := []call{
		{"POST", "/v1/support/orders/KD-A/extend", "Bearer tok-0123456789abcdef", map[string]any{"days": 2.0, "reason": "geste commercial"}},
		{"POST", "/v1/support/orders/KD-A/refund", "Bearer tok-0123456789abcdef", map[string]any{"amount_cents": 999999.0, "reason": "trop"}},
		{"GET", "/v1/support/support-requests", "Bearer tok-0123456789abcdef", nil},
		{"POST", "/v1/support/support-requests/7/answer", "Bearer tok-0123456789abcdef", map[string]any{"message": "Réessayez avec pip install notebook."}},
	}
	if len(got) != len(want) {
		t.Fatalf("calls: %+v", got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.method != w.method || g.path != w.path || g.auth != w.auth || len(g.body) != len(w.body) {
			t.Errorf("call %d: %+v, want %+v", i, g, w)
		}
		for k, v := range w.body {
			if g.body[k] != v {
				t.Errorf("call %d: %s = %v, want %v", i, k, g.body[k], v)
			}
		}
	}
}
