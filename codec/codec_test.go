package codec_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/kernodeck/kernodeck/codec"
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
	srv := httptest.NewServer(http.StripPrefix("/codec", codec.Handler(k, codec.HandlerOptions{
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
