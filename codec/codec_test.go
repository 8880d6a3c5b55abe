package codec_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/kernodeck/kernodeck/codec"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/secrets"
)

func keyring(t *testing.T) *secrets.Keyring {
	t.Helper()
	k, err := secrets.Parse(secrets.Generate("t1"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestPayloadsAreCiphertextAndRoundTrip(t *testing.T) {
	dc := codec.DataConverter(keyring(t))
	p, err := dc.ToPayload(map[string]string{"password": "very-secret-value"})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(p.Data, []byte("very-secret-value")) || string(p.Metadata[converter.MetadataEncoding]) != codec.Encoding {
		t.Fatalf("payload not sealed: %v", p)
	}
	var back map[string]string
	if err := dc.FromPayload(p, &back); err != nil || back["password"] != "very-secret-value" {
		t.Fatalf("round trip: %v %v", back, err)
	}
}

func TestHandlerNeedsAgentToken(t *testing.T) {
	k := keyring(t)
	const token = "agent-token-0123456789"
	srv := httptest.NewServer(http.StripPrefix("/codec", codec.Handler(k, "/codec", codec.HandlerOptions{
		AgentTokens: map[string]string{token: "alice"}, AllowedOrigins: []string{"http://127.0.0.1:8233"},
	})))
	defer srv.Close()
	sealed, err := (&codec.Codec{Keyring: k}).Encode([]*commonpb.Payload{{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte("json/plain")}, Data: []byte(`"hello"`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := protojson.Marshal(&commonpb.Payloads{Payloads: sealed})
	post := func(auth string) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL+"/codec/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := post(""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	if code, _ := post("Bearer not-an-agent-token-at-all"); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}
	code, out := post("Bearer " + token)
	// "hello" base64-encoded is aGVsbG8i... in the JSON answer.
	if code != http.StatusOK || !strings.Contains(out, "ImhlbGxvIg==") {
		t.Fatalf("decode: %d %s", code, out)
	}
}

// TestUnsealedPayloadsRefused: a payload sent without the keyring (plain
// JSON, as `temporal workflow signal` sends it) does not decode on workers
// and clients; the codec endpoint still shows it as it is.
func TestUnsealedPayloadsRefused(t *testing.T) {
	k := keyring(t)
	plain, err := converter.GetDefaultDataConverter().ToPayload(map[string]string{"TxID": "forged"})
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]string
	if err := codec.DataConverter(k).FromPayload(plain, &v); !errors.Is(err, codec.ErrUnsealed) || v != nil {
		t.Fatalf("unsealed payload decoded: %v %v", v, err)
	}
	// A payload sealed with another keyring is refused too.
	other, err := codec.DataConverter(keyring(t)).ToPayload("x")
	if err != nil {
		t.Fatal(err)
	}
	if err := codec.DataConverter(k).FromPayload(other, &v); err == nil {
		t.Fatal("payload sealed with another key decoded")
	}
	out, err := (&codec.Codec{Keyring: k, AcceptUnsealed: true}).Decode([]*commonpb.Payload{plain})
	if err != nil || string(out[0].GetData()) != string(plain.GetData()) {
		t.Fatalf("history view: %v %v", out, err)
	}
}

// TestCodecSessionCookie: /codec/login puts an opaque session in kd_codec
// (not the token), limited to /codec/, Secure by configuration; the cookie
// decodes for the Web UI's origin, not for another site nor for a form post;
// a token removed from the configuration ends its sessions.
func TestCodecSessionCookie(t *testing.T) {
	k := keyring(t)
	const token = "agent-token-0123456789"
	mk := func(tokens map[string]string) *httptest.Server {
		srv := httptest.NewServer(http.StripPrefix("/codec", codec.Handler(k, "/codec", codec.HandlerOptions{
			AgentTokens: tokens, AllowedOrigins: []string{"http://127.0.0.1:8233"}, CookieSecure: true,
		})))
		t.Cleanup(srv.Close)
		return srv
	}
	srv := mk(map[string]string{token: "alice"})
	resp, err := http.PostForm(srv.URL+"/codec/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == codec.CookieName {
			ck = c
		}
	}
	if resp.StatusCode != http.StatusOK || ck == nil {
		t.Fatalf("login: %d %v", resp.StatusCode, resp.Cookies())
	}
	if strings.Contains(ck.Value, token) || ck.Path != "/codec/" || !ck.Secure || !ck.HttpOnly {
		t.Fatalf("cookie: value holds the token, or wrong attributes: %+v", ck)
	}
	if resp, _ := http.PostForm(srv.URL+"/codec/login", url.Values{"token": {"wrong-token-0123456789"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token on the form: %d", resp.StatusCode)
	}

	sealed, err := (&codec.Codec{Keyring: k}).Encode([]*commonpb.Payload{{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte("json/plain")}, Data: []byte(`"hello"`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := protojson.Marshal(&commonpb.Payloads{Payloads: sealed})
	decode := func(srv *httptest.Server, origin, contentType string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/codec/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.AddCookie(ck)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		origin, ct string
		want       int
	}{
		{"http://127.0.0.1:8233", "application/json", http.StatusOK},
		{"", "application/json", http.StatusOK},
		{"https://evil.example", "application/json", http.StatusForbidden},
		{"http://127.0.0.1:8233", "text/plain", http.StatusUnsupportedMediaType},
	} {
		if got := decode(srv, tc.origin, tc.ct); got != tc.want {
			t.Errorf("origin %q, %s: %d, want %d", tc.origin, tc.ct, got, tc.want)
		}
	}
	// The agent's token is no longer configured: the session is over.
	if got := decode(mk(map[string]string{"another-token-0123456789": "alice"}), "", "application/json"); got != http.StatusUnauthorized {
		t.Fatalf("session of a removed token: %d", got)
	}
}

// TestCodecTokenGuessingThrottled: ten wrong tokens from one address (form
// or bearer, counted in PostgreSQL with the support API's) lock it; the
// right token is then refused from there, not from elsewhere.
func TestCodecTokenGuessingThrottled(t *testing.T) {
	k := keyring(t)
	const token = "agent-token-0123456789"
	db := pgtest.NewDB(t)
	ip := "203.0.113.5"
	// The test's client tells its address in a header (read on the server's
	// goroutines, so not through a shared variable).
	srv := httptest.NewServer(http.StripPrefix("/codec", codec.Handler(k, "/codec", codec.HandlerOptions{
		AgentTokens: map[string]string{token: "alice"}, Throttle: db,
		ClientIP: func(r *http.Request) string { return r.Header.Get("X-Test-Client") },
	})))
	t.Cleanup(srv.Close)
	post := func(path, bearer string, form url.Values) int {
		var req *http.Request
		if form != nil {
			req, _ = http.NewRequest("POST", srv.URL+path, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			req, _ = http.NewRequest("POST", srv.URL+path, strings.NewReader(`{"payloads":[]}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		req.Header.Set("X-Test-Client", ip)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 10 {
		var got int
		if i%2 == 0 {
			got = post("/codec/login", "", url.Values{"token": {fmt.Sprintf("guess-%02d-0123456789", i)}})
		} else {
			got = post("/codec/decode", fmt.Sprintf("guess-%02d-0123456789", i), nil)
		}
		if got != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, got)
		}
	}
	if got := post("/codec/login", "", url.Values{"token": {token}}); got != http.StatusTooManyRequests {
		t.Fatalf("right token from a locked address: %d", got)
	}
	if got := post("/codec/decode", token, nil); got != http.StatusTooManyRequests {
		t.Fatalf("right bearer from a locked address: %d", got)
	}
	ip = "198.51.100.5"
	if got := post("/codec/decode", token, nil); got != http.StatusOK {
		t.Fatalf("right bearer from another address: %d", got)
	}
}
