package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// SessionCookie is the name of the session cookie. The __Host- prefix
// makes browsers accept it only with Secure, Path=/ and no Domain, so no
// other host (a sibling subdomain, a plain-http page) can set or shadow it.
const SessionCookie = "__Host-kd_session"

// DevSessionCookie is its name when Config.CookieSecure is off (local
// plain-http development): browsers refuse a __Host- cookie without Secure.
const DevSessionCookie = "kd_session"

// cookieName is the session cookie's name under this configuration; only
// that name is read (a plain kd_session is ignored when Secure is on, or
// the prefix would protect nothing).
func (s *Server) cookieName() string {
	if s.cfg.CookieSecure {
		return SessionCookie
	}
	return DevSessionCookie
}

// CSRFHeader carries the session's CSRF token on cookie-authenticated
// state-changing requests.
const CSRFHeader = "X-CSRF-Token"

// Context keys.
const (
	ctxAccount   = "kd.account"
	ctxCSRF      = "kd.csrf"
	ctxTokenHash = "kd.token_hash"
	ctxAgent     = "kd.agent"
)

// newToken returns 32 random bytes, base64url-encoded.
func newToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// tokenHash is what the store keeps of a session token.
func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(token), true
}

func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// customerAuth accepts a customer session from "Authorization: Bearer" or
// the session cookie. Cookie-authenticated state-changing requests must
// carry the session's CSRF token in X-CSRF-Token; bearer requests cannot be
// forged cross-site and are exempt.
func (s *Server) customerAuth(c *gin.Context) {
	token, viaCookie := s.sessionToken(c.Request)
	if !s.authenticate(c, token, viaCookie) {
		return
	}
	c.Next()
}

// sessionToken is the request's session token: the bearer token if an
// Authorization header is present, else the cookie's.
func (s *Server) sessionToken(r *http.Request) (token string, viaCookie bool) {
	token, viaHeader := bearerToken(r)
	if !viaHeader {
		if ck, err := r.Cookie(s.cookieName()); err == nil {
			return ck.Value, true
		}
	}
	return token, false
}

// authenticate checks the session token (customerAuth's rules) and records
// the account in c; otherwise it answers and returns false.
func (s *Server) authenticate(c *gin.Context, token string, viaCookie bool) bool {
	if token == "" {
		s.fail(c, errSessionRequired)
		return false
	}
	h := tokenHash(token)
	read := s.stores.Accounts.SessionAccount
	if strings.HasSuffix(c.FullPath(), "/events") {
		// A live stream is the page reconnecting by itself, not the
		// customer: it must not keep an idle session alive.
		read = s.stores.Accounts.PeekSession
	}
	acc, csrf, err := read(c.Request.Context(), h)
	if domain.ErrorCode(err) == domain.ECodeNotFound {
		s.refuseSession(c, viaCookie)
		return false
	}
	if err != nil {
		s.fail(c, err)
		return false
	}
	if viaCookie && unsafeMethod(c.Request.Method) &&
		subtle.ConstantTimeCompare([]byte(c.GetHeader(CSRFHeader)), []byte(csrf)) != 1 {
		s.fail(c, errCSRF)
		return false
	}
	c.Set(ctxAccount, acc)
	c.Set(ctxCSRF, csrf)
	c.Set(ctxTokenHash, h)
	return true
}

// refuseSession answers a session that is unknown, expired or logged out.
func (s *Server) refuseSession(c *gin.Context, viaCookie bool) {
	if viaCookie {
		s.clearSessionCookie(c)
	}
	s.fail(c, domain.Errorf(domain.ECodeUnauthorized, "Votre session a expiré ou n'est plus valide. Connectez-vous."))
}

func account(c *gin.Context) domain.Account {
	return c.MustGet(ctxAccount).(domain.Account)
}

// agentAuth accepts only a configured support agent token as "Authorization:
// Bearer" (agentByToken: its comparison and its throttle); a customer
// session is never accepted here.
func (s *Server) agentAuth(c *gin.Context) {
	token, _ := bearerToken(c.Request)
	name, err := s.agentByToken(c.Request.Context(), token, domain.ClientNetwork(c.ClientIP()))
	if err == errAgentRequired {
		c.Header("WWW-Authenticate", `Bearer realm="kernodeck-support"`)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Set(ctxAgent, name)
	c.Next()
}

// checkOrigin refuses a state-changing request whose Origin header names
// another site than the API's own host (or Config.AllowedOrigins): with
// the CSRF token of cookie sessions and the JSON content type, a third-party
// page can neither act with a customer's cookie nor log a browser into the
// attacker's account. Requests without Origin (non-browser clients) pass.
func (s *Server) checkOrigin(c *gin.Context) {
	origin := c.GetHeader("Origin")
	if origin == "" || !unsafeMethod(c.Request.Method) || slices.Contains(s.cfg.AllowedOrigins, origin) {
		c.Next()
		return
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, c.Request.Host) {
		s.fail(c, errOrigin)
		return
	}
	c.Next()
}

// sessionResponse answers register, login and /me.
type sessionResponse struct {
	Account   domain.Account `json:"account"`
	CSRFToken string         `json:"csrf_token"`
	ExpiresAt *time.Time     `json:"expires_at,omitempty"`
	// Token is returned only when asked for ("bearer": true), for clients
	// that send it as "Authorization: Bearer" instead of a cookie.
	Token string `json:"token,omitempty"`
	// tokenHash names the session in the store (CustomerSession).
	tokenHash []byte
}

// startSession creates a session for acc and either sets the cookie or,
// for a bearer client, returns the token in the body.
func (s *Server) startSession(c *gin.Context, acc domain.Account, bearer bool) (sessionResponse, error) {
	token, err := newToken()
	if err != nil {
		return sessionResponse{}, err
	}
	csrf, err := newToken()
	if err != nil {
		return sessionResponse{}, err
	}
	expires := time.Now().Add(s.cfg.SessionTTL).UTC().Truncate(time.Second)
	if err := s.stores.Accounts.CreateSession(c.Request.Context(), tokenHash(token), acc.ID, csrf, expires, s.cfg.SessionIdle, client(c)); err != nil {
		return sessionResponse{}, err
	}
	resp := sessionResponse{Account: acc, CSRFToken: csrf, ExpiresAt: &expires}
	if bearer {
		resp.Token = token
	} else {
		http.SetCookie(c.Writer, &http.Cookie{
			Name: s.cookieName(), Value: token, Path: "/",
			Expires: expires, MaxAge: int(s.cfg.SessionTTL.Seconds()),
			HttpOnly: true, Secure: s.cfg.CookieSecure, SameSite: http.SameSiteLaxMode,
		})
	}
	return resp, nil
}

func (s *Server) clearSessionCookie(c *gin.Context) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name: s.cookieName(), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: s.cfg.CookieSecure, SameSite: http.SameSiteLaxMode,
	})
}

// hash runs argon2id under the concurrency bound.
func (s *Server) hash(ctx context.Context, password string) (string, error) {
	select {
	case s.hashSem <- struct{}{}:
		defer func() { <-s.hashSem }()
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return hashPassword(password, s.cfg.Argon2)
}

func (s *Server) verify(ctx context.Context, encoded, password string) (bool, error) {
	select {
	case s.hashSem <- struct{}{}:
		defer func() { <-s.hashSem }()
	case <-ctx.Done():
		return false, ctx.Err()
	}
	return verifyPassword(encoded, password)
}
