package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/codec"
	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/metrics"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/secrets"
)

// The codec endpoint is served by the operators' listener only, wired as
// `api` and `dev` wire it: the public listener answers 404 under /codec/;
// the operators' one decodes for an agent, refuses a multipart login and a
// body over the API's limit, and answers with the API's security headers.
func TestCodecOnTheOperatorsListenerOnly(t *testing.T) {
	db := pgtest.NewDB(t)
	noEnv := func(string) string { return "" }
	cfg, err := config.FromEnv(noEnv)
	if err != nil {
		t.Fatal(err)
	}
	const agentTok = "codec-wiring-agent-token-0123"
	cfg.SupportTokens = map[string]string{agentTok: "alice"}
	pc, err := config.ProvisioningFromEnv(noEnv)
	if err != nil {
		t.Fatal(err)
	}
	k, err := secrets.Parse(secrets.Generate("t1"))
	if err != nil {
		t.Fatal(err)
	}
	prov := provisioning{cfg: pc, keyring: k}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	a := app.New(app.Config{DB: db, Keyring: k, ProvisionerName: pc.Provisioner, Logger: logger})
	h, err := newAPIHandler(cfg, a, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.CloseStreams)
	public := httptest.NewServer(h.Handler)
	t.Cleanup(public.Close)
	m, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	ops := httptest.NewServer(m.Handler(nil, logger, prov.codecRoute(cfg, db)))
	t.Cleanup(ops.Close)

	sealed, err := (&codec.Codec{Keyring: k}).Encode([]*commonpb.Payload{{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte("json/plain")}, Data: []byte(`"hello"`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	payloads, _ := protojson.Marshal(&commonpb.Payloads{Payloads: sealed})
	send := func(base, method, path, contentType, body string, bearer bool) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if bearer {
			req.Header.Set("Authorization", "Bearer "+agentTok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	form := url.Values{"token": {agentTok}}.Encode()

	for _, c := range []struct{ method, path, contentType, body string }{
		{"POST", "/codec/decode", "application/json", string(payloads)},
		{"POST", "/codec/encode", "application/json", string(payloads)},
		{"GET", "/codec/login", "", ""},
		{"POST", "/codec/login", "application/x-www-form-urlencoded", form},
	} {
		if resp := send(public.URL, c.method, c.path, c.contentType, c.body, true); resp.StatusCode != http.StatusNotFound {
			t.Errorf("public listener, %s %s: %d, want 404", c.method, c.path, resp.StatusCode)
		}
	}

	resp := send(ops.URL, "POST", "/codec/decode", "application/json", string(payloads), true)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "ImhlbGxvIg") {
		t.Fatalf("operators' listener, decode: %d %s", resp.StatusCode, b)
	}
	if resp := send(ops.URL, "GET", "/codec/login", "", "", false); resp.StatusCode != http.StatusOK {
		t.Fatalf("operators' listener, login form: %d", resp.StatusCode)
	}
	multipart := "--xx\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\n" + agentTok + "\r\n--xx--\r\n"
	if resp := send(ops.URL, "POST", "/codec/login", "multipart/form-data; boundary=xx", multipart, false); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("multipart login: %d, want 415", resp.StatusCode)
	}
	over := "token=" + strings.Repeat("a", api.DefaultMaxBodyBytes)
	if resp := send(ops.URL, "POST", "/codec/login", "application/x-www-form-urlencoded", over, false); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("login over the API's body limit: %d, want 413", resp.StatusCode)
	}
	loggedIn := send(ops.URL, "POST", "/codec/login", "application/x-www-form-urlencoded", form, false)
	if loggedIn.StatusCode != http.StatusOK {
		t.Fatalf("login: %d", loggedIn.StatusCode)
	}

	// Every header the API sets on its own answers (not the content's) is
	// on the codec's, with the same value.
	apiAnswer := send(public.URL, "GET", "/v1/no-such-route", "", "", false)
	if apiAnswer.StatusCode != http.StatusNotFound {
		t.Fatalf("API 404: %d", apiAnswer.StatusCode)
	}
	contentHeaders := map[string]bool{"Content-Type": true, "Content-Length": true, "Date": true, "Vary": true}
	checked := 0
	for name := range apiAnswer.Header {
		if contentHeaders[name] {
			continue
		}
		checked++
		for _, r := range []*http.Response{resp, loggedIn} {
			if got, want := r.Header.Get(name), apiAnswer.Header.Get(name); got != want {
				t.Errorf("codec answer's %s: %q, the API's: %q", name, got, want)
			}
		}
	}
	if checked < 4 {
		t.Fatalf("only %d security headers on the API's answer: %v", checked, apiAnswer.Header)
	}
}
