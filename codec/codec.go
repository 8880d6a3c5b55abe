// Package codec encrypts every Temporal payload (workflow inputs, activity
// arguments and results, signals, updates, memos, failure details) with
// AES-256-GCM before it leaves the process, so the Temporal server and its
// Web UI only ever hold ciphertext. Operators read payloads through the
// codec HTTP endpoint (Handler), authenticated with support agent tokens.
//
// The seal is also the authenticity check: anyone who can reach the
// Temporal frontend can send a signal or an update, but only a holder of
// the keyring can seal one. Workers and clients therefore refuse unsealed
// payloads (ErrUnsealed): a forged update is rejected before its handler
// runs, a forged signal is dropped by the SDK (logged as a corrupted signal,
// counted in corrupted_signals) and the workflow goes on.
package codec

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

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/secrets"
)

// Metadata of an encrypted payload.
const (
	// Encoding marks a payload this codec sealed.
	Encoding = "binary/encrypted"
	// MetadataKeyID names the keyring key that sealed it.
	MetadataKeyID = "encryption-key-id"
	// MetadataWorkflowID names the workflow a payload was sealed for; the
	// ciphertext is bound to it (associated data), so the name cannot be
	// changed without breaking the seal.
	MetadataWorkflowID = "encryption-workflow-id"
	// aad binds ciphertexts to this use of the keyring.
	aad = "temporal-payload"
)

// ErrMisaddressed is the decoding error of a payload sealed for another
// workflow than the one decoding it: copied out of one workflow's history
// and sent to another.
var ErrMisaddressed = errors.New("codec: payload sealed for another workflow refused")

// ErrUnbound is the decoding error, within a workflow's context, of a
// payload sealed for no workflow (as the codec endpoint sealed before it
// required one): past UnboundUntil, only payloads sealed for the workflow
// decoding them open.
var ErrUnbound = errors.New("codec: payload sealed for no workflow refused")

// ErrUnsealed is the decoding error of a payload this codec did not seal.
var ErrUnsealed = errors.New("codec: unsealed payload refused (only holders of the keyring may send payloads)")

// Codec is a converter.PayloadCodec sealing payloads with a keyring.
type Codec struct {
	Keyring *secrets.Keyring
	// AcceptUnsealed lets unsealed payloads through as they are. Only for
	// showing histories (the codec endpoint, history exports), where a
	// forged payload must stay readable to be investigated; never on a
	// worker or a client.
	AcceptUnsealed bool
	// Logger records each refused payload (nil: slog.Default()).
	Logger *slog.Logger
	// UnboundUntil is when payloads sealed for no workflow stop opening
	// within a workflow's context (zero: they never do). Histories
	// recorded before the binding (history versions below 7, vAddressed)
	// hold such payloads: set it past the close of the last of their runs
	// (kernodeck versions) while any is open.
	UnboundUntil time.Time
	// Now is the clock UnboundUntil is read against (nil: time.Now).
	Now func() time.Time

	// workflowID is the workflow the SDK is encoding or decoding for
	// (WithSerializationContext); "" outside one.
	workflowID string
}

var (
	_ converter.PayloadCodec                         = (*Codec)(nil)
	_ converter.PayloadCodecWithSerializationContext = (*Codec)(nil)
)

// WithSerializationContext binds the codec to the workflow the SDK is
// working for (a workflow's input, signals, updates, queries, results,
// memo, and its activities' payloads): payloads it seals name that
// workflow and are bound to it, and it refuses payloads sealed for
// another. This is the second lock behind the address each input carries
// inside the seal (domain.Addressed).
func (c *Codec) WithSerializationContext(sc converter.SerializationContext) converter.PayloadCodec {
	bound := *c
	switch x := sc.(type) {
	case converter.WorkflowSerializationContext:
		bound.workflowID = x.WorkflowID
	case converter.ActivitySerializationContext:
		bound.workflowID = x.WorkflowID
	default:
		bound.workflowID = ""
	}
	return &bound
}

// aadFor is the associated data of a payload sealed for workflowID: the
// plain "temporal-payload" of payloads sealed before the binding, or
// outside any workflow (the codec endpoint's encode).
func aadFor(workflowID string) []byte {
	if workflowID == "" {
		return []byte(aad)
	}
	return []byte(aad + "\x00" + workflowID)
}

func (c *Codec) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Codec) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// Encode seals each payload (its metadata included) into a new payload.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		raw, err := p.Marshal()
		if err != nil {
			return nil, fmt.Errorf("codec: marshal payload: %w", err)
		}
		id, sealed := c.Keyring.SealBytes(raw, aadFor(c.workflowID))
		md := map[string][]byte{
			converter.MetadataEncoding: []byte(Encoding),
			MetadataKeyID:              []byte(id),
		}
		if c.workflowID != "" {
			md[MetadataWorkflowID] = []byte(c.workflowID)
		}
		out[i] = &commonpb.Payload{Metadata: md, Data: sealed}
	}
	return out, nil
}

// Decode opens sealed payloads. An unsealed one is refused with ErrUnsealed
// (and logged, with its encoding only: never its data), unless
// AcceptUnsealed. Within a workflow's context, a payload sealed for another
// workflow is refused with ErrMisaddressed, and one sealed for no workflow
// with ErrUnbound (until UnboundUntil they still open, for the histories
// recorded before the binding; their inputs' own address is checked by
// the worker).
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc != Encoding {
			if c.AcceptUnsealed {
				out[i] = p
				continue
			}
			c.logger().Warn("unsealed Temporal payload refused: sent without the keyring", "encoding", enc, "bytes", len(p.GetData()))
			return nil, ErrUnsealed
		}
		sealedFor := string(p.GetMetadata()[MetadataWorkflowID])
		if sealedFor == "" && c.workflowID != "" && !c.AcceptUnsealed && !c.now().Before(c.UnboundUntil) {
			c.logger().Warn("Temporal payload sealed for no workflow refused", "workflow", c.workflowID)
			return nil, ErrUnbound
		}
		if sealedFor != "" && c.workflowID != "" && sealedFor != c.workflowID {
			c.logger().Warn("Temporal payload sealed for another workflow refused", "workflow", c.workflowID, "sealed_for", sealedFor)
			return nil, ErrMisaddressed
		}
		raw, err := c.Keyring.OpenBytes(string(p.GetMetadata()[MetadataKeyID]), p.GetData(), aadFor(sealedFor))
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

// Option sets a Codec's field.
type Option func(*Codec)

// UnboundUntil sets Codec.UnboundUntil.
func UnboundUntil(t time.Time) Option { return func(c *Codec) { c.UnboundUntil = t } }

// DataConverter is the default data converter with payloads sealed.
func DataConverter(k *secrets.Keyring, opts ...Option) converter.DataConverter {
	c := &Codec{Keyring: k}
	for _, o := range opts {
		o(c)
	}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
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
