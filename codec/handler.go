package codec

// The codec server: the HTTP endpoint through which operators' Web UI and
// CLI read (and support seals) payloads, with agent tokens, sessions and
// an audit of every seal.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/secrets"
)

// HandlerOptions configure the codec HTTP endpoint.
type HandlerOptions struct {
	// AgentTokens maps support agent tokens to agent names (as the support API).
	AgentTokens map[string]string
	// AllowedOrigins may call the endpoint from a browser (the Temporal Web
	// UI's origin, e.g. http://127.0.0.1:8233).
	AllowedOrigins []string
	// CookieSecure sets the Secure flag of the session cookie (keep it on
	// in production, behind a TLS proxy too; off for plain-http development).
	CookieSecure bool
	// Throttle counts wrong agent tokens (required in production: the
	// PostgreSQL store); nil counts nothing.
	Throttle Throttle
	// ClientIP tells the client's address (default: the connection's peer;
	// behind a proxy, pass the API's trusted-proxy logic).
	ClientIP func(*http.Request) string
	// SessionTTL is a codec session's lifetime (12 h).
	SessionTTL time.Duration
	// MaxBodyBytes limits request bodies (64 KiB, the API's limit): a
	// larger body is refused before it is read (413).
	MaxBodyBytes int64
	// Audit records each seal as a support action (codec_seal); nil:
	// the endpoint seals nothing.
	Audit Auditor
}

// Auditor writes support actions (postgres.DB).
type Auditor interface {
	InsertSupportAction(ctx context.Context, a domain.SupportAction) (int64, error)
	CompleteSupportAction(ctx context.Context, id int64, outcome, detail string) (domain.SupportAction, error)
}

// Headers of a seal (POST {prefix}/encode): the workflow the payloads are
// sealed for, and why (3 to 2,000 characters, as any support action).
const (
	HeaderWorkflowID = "X-Kernodeck-Workflow-Id"
	HeaderReason     = "X-Kernodeck-Reason"
)

// DefaultMaxBodyBytes is HandlerOptions.MaxBodyBytes's default, the API's.
const DefaultMaxBodyBytes = 64 << 10

// securityHeaders are the API's security headers (api.securityHeaders), on
// every answer of the endpoint, plus a policy letting the login form post
// to itself and nothing else load or frame it.
var securityHeaders = map[string]string{
	"X-Content-Type-Options":  "nosniff",
	"Cache-Control":           "no-store",
	"Referrer-Policy":         "no-referrer",
	"X-Frame-Options":         "DENY",
	"Content-Security-Policy": "default-src 'none'; form-action 'self'; frame-ancestors 'none'",
}

// Throttle is the authentication throttle (postgres.DB).
type Throttle interface {
	ThrottleLocked(ctx context.Context, rules []domain.ThrottleRule) (time.Duration, error)
	Attempt(ctx context.Context, rules []domain.ThrottleRule) (time.Duration, error)
}

// CookieName carries a codec session for the Web UI, which cannot add an
// Authorization header of its own but sends cookies when told to include
// credentials (Data Encoder settings).
const CookieName = "kd_codec"

// session is what the kd_codec cookie holds, sealed with the keyring: a
// random session id, the agent, a fingerprint of the agent's token (so
// removing the token from the configuration ends its sessions) and the
// expiry. Never the token itself. Sealed rather than kept in a table so
// that every API replica accepts it.
type session struct {
	ID      string `json:"sid"`
	Agent   string `json:"agent"`
	Token   string `json:"tok"`
	Expires int64  `json:"exp"`
}

const sessionAAD = "codec-session"

type agent struct {
	hash [sha256.Size]byte
	name string
}

type handler struct {
	keyring *secrets.Keyring
	opts    HandlerOptions
	agents  []agent
	inner   http.Handler
	prefix  string
}

// Handler serves POST {prefix}/encode and {prefix}/decode (Temporal's remote
// codec protocol) to support agents only, plus {prefix}/login, a small form
// that opens a codec session in an HttpOnly cookie for the Web UI. prefix is
// where the handler is mounted ("/codec"): the cookie is limited to it.
//
// Wrong tokens, on the form or as a bearer, are counted with the support
// API's (domain.AgentGuessRule): past the limit the client's network is
// refused before any comparison.
func Handler(k *secrets.Keyring, prefix string, opts HandlerOptions) http.Handler {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.ClientIP == nil {
		opts.ClientIP = func(r *http.Request) string {
			host, _, err := net.SplitHostPort(r.RemoteAddr)
			if err != nil {
				return r.RemoteAddr
			}
			return host
		}
	}
	h := &handler{keyring: k, opts: opts, prefix: strings.TrimRight(prefix, "/"),
		// Unsealed payloads are shown as they are: a forged signal stays
		// readable in the Web UI for whoever investigates it.
		inner: converter.NewPayloadCodecHTTPHandler(&Codec{Keyring: k, AcceptUnsealed: true})}
	for token, name := range opts.AgentTokens {
		if len(token) >= 16 && name != "" {
			h.agents = append(h.agents, agent{hash: sha256.Sum256([]byte(token)), name: name})
		}
	}
	return h
}

// agentOf returns the agent whose token hashes to sum ("" if none),
// comparing every configured token in constant time.
func (h *handler) agentOf(sum [sha256.Size]byte) string {
	name := ""
	for _, a := range h.agents {
		if subtle.ConstantTimeCompare(sum[:], a.hash[:]) == 1 {
			name = a.name
		}
	}
	return name
}

func fingerprint(sum [sha256.Size]byte) string { return hex.EncodeToString(sum[:16]) }

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for k, v := range securityHeaders {
		w.Header().Set(k, v)
	}
	// A declared length over the limit is refused before anything is read
	// (an unauthenticated caller must not make the server spool a body).
	if r.ContentLength > h.opts.MaxBodyBytes {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	origin := r.Header.Get("Origin")
	allowedOrigin := origin != "" && slices.Contains(h.opts.AllowedOrigins, origin)
	if allowedOrigin {
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
		h.login(w, r)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	rule := domain.AgentGuessRule(domain.ClientNetwork(h.opts.ClientIP(r)))
	if h.locked(w, r, rule) {
		return
	}
	name := ""
	if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && token != "" {
		if name = h.agentOf(sha256.Sum256([]byte(token))); name == "" {
			h.wrongToken(w, r, rule)
			return
		}
	} else if c, err := r.Cookie(CookieName); err == nil {
		// A cookie is sent by the browser whoever asks: only the allowed
		// origins (the Web UI) may use it, with a JSON body (no form post).
		if origin != "" && !allowedOrigin {
			http.Error(w, "origin not allowed", http.StatusForbidden)
			return
		}
		name = h.sessionAgent(c.Value)
	}
	if name == "" {
		http.Error(w, "support agent token required", http.StatusUnauthorized)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "Content-Type: application/json required", http.StatusUnsupportedMediaType)
		return
	}
	if !h.readBody(w, r) {
		return
	}
	if strings.HasSuffix(r.URL.Path, "/encode") {
		h.seal(w, r, name)
		return
	}
	h.inner.ServeHTTP(w, r)
}

// seal answers an encode: only for the workflow named in
// HeaderWorkflowID, with a reason, each one audited as a support action
// before anything is sealed. A payload sealed for no workflow opens in
// none (Codec.UnboundUntil), and one sealed for a workflow in no other.
func (h *handler) seal(w http.ResponseWriter, r *http.Request, agent string) {
	wid := strings.TrimSpace(r.Header.Get(HeaderWorkflowID))
	reason := strings.TrimSpace(r.Header.Get(HeaderReason))
	switch {
	case wid == "" || len(wid) > 1000:
		http.Error(w, "encode seals only for a named workflow: send its ID in "+HeaderWorkflowID, http.StatusBadRequest)
		return
	case len([]rune(reason)) < 3 || len([]rune(reason)) > 2000:
		http.Error(w, "encode needs a reason of 3 to 2000 characters in "+HeaderReason, http.StatusBadRequest)
		return
	case h.opts.Audit == nil:
		http.Error(w, "encode is not audited here: refused", http.StatusForbidden)
		return
	}
	ctx := r.Context()
	id, err := h.opts.Audit.InsertSupportAction(ctx, domain.SupportAction{Agent: agent, Action: domain.ActionCodecSeal,
		TargetRef: wid, Reason: reason, Params: []byte(`{}`)})
	if err != nil {
		slog.Error("codec seal not audited: refused", "agent", agent, "workflow", wid, "err", err)
		http.Error(w, "encode could not be audited: refused", http.StatusServiceUnavailable)
		return
	}
	slog.Info("codec seal", "agent", agent, "workflow", wid, "action", id)
	bound := (&Codec{Keyring: h.keyring}).WithSerializationContext(converter.WorkflowSerializationContext{
		Namespace: r.Header.Get("X-Namespace"), WorkflowID: wid})
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	converter.NewPayloadCodecHTTPHandler(bound).ServeHTTP(rec, r)
	outcome := "done"
	if rec.status >= 300 {
		outcome = "failed"
	}
	if _, err := h.opts.Audit.CompleteSupportAction(context.WithoutCancel(ctx), id, outcome, fmt.Sprintf("HTTP %d", rec.status)); err != nil {
		slog.Error("codec seal outcome not recorded", "action", id, "err", err)
	}
}

// statusRecorder keeps the status an inner handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// readBody reads r's body up to the limit and puts it back in memory; over
// the limit it answers 413 and returns false, having read at most one byte
// more than the limit (a body sent without a length).
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "cannot read the request body", http.StatusBadRequest)
		}
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return true
}

// sessionAgent opens a kd_codec cookie: the agent's name while the session
// runs and its token is still configured, else "".
func (h *handler) sessionAgent(value string) string {
	raw, err := h.keyring.Open(value, sessionAAD)
	if err != nil {
		return ""
	}
	var s session
	if json.Unmarshal([]byte(raw), &s) != nil || time.Now().Unix() >= s.Expires {
		return ""
	}
	for _, a := range h.agents {
		if subtle.ConstantTimeCompare([]byte(fingerprint(a.hash)), []byte(s.Token)) == 1 && a.name == s.Agent {
			return a.name
		}
	}
	return ""
}

// locked answers 429 when the client's network is locked for token guessing.
func (h *handler) locked(w http.ResponseWriter, r *http.Request, rule domain.ThrottleRule) bool {
	if h.opts.Throttle == nil {
		return false
	}
	retry, err := h.opts.Throttle.ThrottleLocked(r.Context(), []domain.ThrottleRule{rule})
	if err != nil {
		http.Error(w, "throttle unavailable", http.StatusServiceUnavailable)
		return true
	}
	if retry > 0 {
		tooMany(w, retry)
		return true
	}
	return false
}

func tooMany(w http.ResponseWriter, retry time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int((retry+time.Second-1)/time.Second)))
	http.Error(w, "too many wrong agent tokens from your address", http.StatusTooManyRequests)
}

// wrongToken counts a wrong token and answers 401 (429 once locked).
func (h *handler) wrongToken(w http.ResponseWriter, r *http.Request, rule domain.ThrottleRule) {
	if h.opts.Throttle != nil {
		retry, err := h.opts.Throttle.Attempt(r.Context(), []domain.ThrottleRule{rule})
		if err != nil {
			http.Error(w, "throttle unavailable", http.StatusServiceUnavailable)
			return
		}
		if retry > 0 {
			tooMany(w, retry)
			return
		}
	}
	http.Error(w, "unknown agent token", http.StatusUnauthorized)
}

const loginForm = `<!doctype html><meta charset="utf-8"><title>Kernodeck codec</title>
<form method="post"><label>Jeton d'agent support <input type="password" name="token" autocomplete="off"></label>
<button>Valider</button></form>`

func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(loginForm))
	case http.MethodPost:
		// The form is urlencoded: anything else, multipart above all (its
		// parser spools large parts to disk), is refused unread.
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
			http.Error(w, "Content-Type: application/x-www-form-urlencoded required", http.StatusUnsupportedMediaType)
			return
		}
		if !h.readBody(w, r) {
			return
		}
		body, _ := io.ReadAll(r.Body) // in memory since readBody
		form, err := url.ParseQuery(string(body))
		if err != nil {
			http.Error(w, "malformed form", http.StatusBadRequest)
			return
		}
		rule := domain.AgentGuessRule(domain.ClientNetwork(h.opts.ClientIP(r)))
		if h.locked(w, r, rule) {
			return
		}
		sum := sha256.Sum256([]byte(form.Get("token")))
		name := h.agentOf(sum)
		if name == "" {
			h.wrongToken(w, r, rule)
			return
		}
		id := make([]byte, 16)
		_, _ = rand.Read(id) // never fails on Linux
		raw, _ := json.Marshal(session{ID: base64.RawURLEncoding.EncodeToString(id), Agent: name,
			Token: fingerprint(sum), Expires: time.Now().Add(h.opts.SessionTTL).Unix()})
		// Same site as the Web UI on another port of the same host: Lax is
		// enough for the UI's credentialed fetches. Path: the codec only.
		http.SetCookie(w, &http.Cookie{
			Name: CookieName, Value: h.keyring.Seal(string(raw), sessionAAD), Path: h.prefix + "/", HttpOnly: true,
			Secure: h.opts.CookieSecure, SameSite: http.SameSiteLaxMode, MaxAge: int(h.opts.SessionTTL.Seconds()),
		})
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok: the Temporal Web UI can now decode payloads from this browser\n"))
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}
