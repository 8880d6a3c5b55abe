package codec_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/kernodeck/kernodeck/codec"
)

// bigBody is a body of n bytes made on demand (nothing held in memory),
// counting what the server read of it.
type bigBody struct {
	head    string // first bytes, then filler
	n, read int64
	reads   *atomic.Int64
}

func newBigBody(head string, n int64) *bigBody {
	return &bigBody{head: head, n: n, reads: &atomic.Int64{}}
}

func (b *bigBody) Read(p []byte) (int, error) {
	if b.read >= b.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), b.n-b.read)]
	for i := range p {
		if off := b.read + int64(i); off < int64(len(b.head)) {
			p[i] = b.head[off]
		} else {
			p[i] = 'A'
		}
	}
	b.read += int64(len(p))
	b.reads.Add(int64(len(p)))
	return len(p), nil
}

const agentTok = "agent-token-0123456789"

// The endpoint's refusals of large and non-urlencoded bodies: a 96 MiB
// multipart login is answered without a byte read nor a file spooled, a
// body without a length is cut at the limit, and every answer carries the
// API's security headers.
func TestHandlerRefusesLargeAndMultipartBodies(t *testing.T) {
	// Multipart parts over the memory limit would be spooled here.
	spool := t.TempDir()
	t.Setenv("TMPDIR", spool)
	const limit = 64 << 10
	k := keyring(t)
	h := codec.Handler(k, "/codec", codec.HandlerOptions{
		AgentTokens: map[string]string{agentTok: "alice"}, MaxBodyBytes: limit,
	})
	const huge = 96 << 20
	multipart := "--xx\r\nContent-Disposition: form-data; name=\"token\"; filename=\"t\"\r\n\r\n"

	cases := []struct {
		name, path, contentType, head string
		length                        int64 // declared; -1: none (chunked)
		bearer                        bool
		status                        int
		maxRead                       int64
	}{
		{"multipart login, declared length", "/codec/login", "multipart/form-data; boundary=xx", multipart, huge, false, http.StatusRequestEntityTooLarge, 0},
		{"multipart login, no length", "/codec/login", "multipart/form-data; boundary=xx", multipart, -1, false, http.StatusUnsupportedMediaType, 0},
		{"JSON login", "/codec/login", "application/json", `{"token":"`, -1, false, http.StatusUnsupportedMediaType, 0},
		{"urlencoded login over the limit, declared", "/codec/login", "application/x-www-form-urlencoded", "token=", huge, false, http.StatusRequestEntityTooLarge, 0},
		{"urlencoded login over the limit, no length", "/codec/login", "application/x-www-form-urlencoded", "token=", -1, false, http.StatusRequestEntityTooLarge, limit + 1},
		{"decode without a token, declared", "/codec/decode", "application/json", `{"payloads":[`, huge, false, http.StatusRequestEntityTooLarge, 0},
		{"decode without a token, no length", "/codec/decode", "application/json", `{"payloads":[`, -1, false, http.StatusUnauthorized, 0},
		{"decode by an agent over the limit", "/codec/decode", "application/json", `{"payloads":[`, -1, true, http.StatusRequestEntityTooLarge, limit + 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := newBigBody(tc.head, huge)
			req := httptest.NewRequest("POST", tc.path, body)
			req.ContentLength = tc.length
			req.Header.Set("Content-Type", tc.contentType)
			if tc.bearer {
				req.Header.Set("Authorization", "Bearer "+agentTok)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body.String())
			}
			if got := body.reads.Load(); got > tc.maxRead {
				t.Fatalf("read %d bytes of the body, at most %d expected", got, tc.maxRead)
			}
			checkSecurityHeaders(t, rec.Header())
			if len(rec.Result().Cookies()) != 0 {
				t.Fatal("a refused login set a cookie")
			}
		})
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Fatalf("files spooled: %v", left)
	}

	// Within the limits the endpoint still works: the form, the login, and
	// a decode by an agent.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/codec/login", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "<form") {
		t.Fatalf("form: %d %s", rec.Code, rec.Body.String())
	}
	checkSecurityHeaders(t, rec.Header())
	req := httptest.NewRequest("POST", "/codec/login", strings.NewReader("token="+agentTok))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || len(rec.Result().Cookies()) != 1 {
		t.Fatalf("login: %d %s", rec.Code, rec.Body.String())
	}
	sealed, err := (&codec.Codec{Keyring: k}).Encode([]*commonpb.Payload{{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte("json/plain")}, Data: []byte(`"hello"`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := protojson.Marshal(&commonpb.Payloads{Payloads: sealed})
	req = httptest.NewRequest("POST", "/codec/decode", strings.NewReader(string(raw)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+agentTok)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "ImhlbGxvIg") { // "hello" in base64
		t.Fatalf("decode: %d %s", rec.Code, rec.Body.String())
	}
}

func checkSecurityHeaders(t *testing.T, h http.Header) {
	t.Helper()
	for k, v := range map[string]string{
		"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store",
		"Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
	} {
		if h.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, h.Get(k), v)
		}
	}
	if !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy: %q", h.Get("Content-Security-Policy"))
	}
}
