// Package codec encrypts every Temporal payload (workflow inputs, activity
// arguments and results, signals, updates, memos, failure details) with
// AES-256-GCM before it leaves the process, so the Temporal server and its
// Web UI only ever hold ciphertext. Operators read payloads through the
// codec HTTP endpoint (Handler), authenticated with support agent tokens.
package codec

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/kernodeck/kernodeck/secrets"
)

// Metadata of an encrypted payload.
const (
	// Encoding marks a payload this codec sealed.
	Encoding = "binary/encrypted"
	// MetadataKeyID names the keyring key that sealed it.
	MetadataKeyID = "encryption-key-id"
	// aad binds ciphertexts to this use of the keyring.
	aad = "temporal-payload"
)

// Codec is a converter.PayloadCodec sealing payloads with a keyring.
type Codec struct {
	Keyring *secrets.Keyring
}

var _ converter.PayloadCodec = (*Codec)(nil)

// Encode seals each payload (its metadata included) into a new payload.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		raw, err := p.Marshal()
		if err != nil {
			return nil, fmt.Errorf("codec: marshal payload: %w", err)
		}
		id, sealed := c.Keyring.SealBytes(raw, []byte(aad))
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(Encoding),
				MetadataKeyID:              []byte(id),
			},
			Data: sealed,
		}
	}
	return out, nil
}

// Decode opens sealed payloads and leaves the others as they are (payloads
// written before encryption was turned on).
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
			out[i] = p
			continue
		}
		raw, err := c.Keyring.OpenBytes(string(p.GetMetadata()[MetadataKeyID]), p.GetData(), []byte(aad))
		if err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		var dec commonpb.Payload
		if err := dec.Unmarshal(raw); err != nil {
			return nil, fmt.Errorf("codec: unmarshal payload: %w", err)
		}
		out[i] = &dec
	}
	return out, nil
}

// DataConverter is the default data converter with payloads sealed.
func DataConverter(k *secrets.Keyring) converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), &Codec{Keyring: k})
}

// FailureConverter also seals failure messages and stack traces (they can
// quote customer data), using the sealed data converter.
func FailureConverter(k *secrets.Keyring) converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter:          DataConverter(k),
		EncodeCommonAttributes: true,
	})
}

// HandlerOptions configure the codec HTTP endpoint.
type HandlerOptions struct {
	// AgentTokens maps support agent tokens to agent names (as the support API).
	AgentTokens map[string]string
	// AllowedOrigins may call the endpoint from a browser (the Temporal Web
	// UI's origin, e.g. http://127.0.0.1:8233).
	AllowedOrigins []string
}

// CookieName carries an agent token for the Web UI, which cannot add an
// Authorization header of its own but sends cookies when told to include
// credentials (Data Encoder settings).
const CookieName = "kd_codec"

// Handler serves POST {prefix}/encode and {prefix}/decode (Temporal's remote
// codec protocol) to support agents only, plus {prefix}/login, a small form
// that stores the agent token in an HttpOnly cookie for the Web UI.
func Handler(k *secrets.Keyring, opts HandlerOptions) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(&Codec{Keyring: k})
	hashes := make([][sha256.Size]byte, 0, len(opts.AgentTokens))
	for token := range opts.AgentTokens {
		if len(token) >= 16 {
			hashes = append(hashes, sha256.Sum256([]byte(token)))
		}
	}
	authorized := func(token string) bool {
		if token == "" {
			return false
		}
		h := sha256.Sum256([]byte(token))
		ok := false
		for _, want := range hashes {
			ok = subtle.ConstantTimeCompare(h[:], want[:]) == 1 || ok
		}
		return ok
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if origin := r.Header.Get("Origin"); origin != "" && slices.Contains(opts.AllowedOrigins, origin) {
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Access-Control-Allow-Credentials", "true")
			w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Namespace")
			w.Header().Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			w.Header().Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions { // CORS preflight carries no credentials
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/login") {
			login(w, r, authorized)
			return
		}
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if token == "" {
			if c, err := r.Cookie(CookieName); err == nil {
				token = c.Value
			}
		}
		if !authorized(token) {
			http.Error(w, "support agent token required", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	})
}

const loginForm = `<!doctype html><meta charset="utf-8"><title>Kernodeck codec</title>
<form method="post"><label>Jeton d'agent support <input type="password" name="token" autocomplete="off"></label>
<button>Valider</button></form>`

func login(w http.ResponseWriter, r *http.Request, authorized func(string) bool) {
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(loginForm))
	case http.MethodPost:
		token := r.PostFormValue("token")
		if !authorized(token) {
			http.Error(w, "unknown agent token", http.StatusUnauthorized)
			return
		}
		// Same site as the Web UI on another port of the same host: Lax is
		// enough for the UI's credentialed fetches.
		http.SetCookie(w, &http.Cookie{
			Name: CookieName, Value: token, Path: "/", HttpOnly: true,
			Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode, MaxAge: 12 * 3600,
		})
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok: the Temporal Web UI can now decode payloads from this browser\n"))
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}
