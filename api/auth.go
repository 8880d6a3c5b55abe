package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/mail"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// SessionCookie is the name of the session cookie.
const SessionCookie = "kd_session"

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
// the kd_session cookie. Cookie-authenticated state-changing requests must
// carry the session's CSRF token in X-CSRF-Token; bearer requests cannot be
// forged cross-site and are exempt.
func (s *Server) customerAuth(c *gin.Context) {
	token, viaHeader := bearerToken(c.Request)
	viaCookie := false
	if !viaHeader {
		if ck, err := c.Request.Cookie(SessionCookie); err == nil {
			token, viaCookie = ck.Value, true
		}
	}
	if token == "" {
		s.fail(c, errSessionRequired)
		return
	}
	h := tokenHash(token)
	acc, csrf, err := s.store.SessionAccount(c.Request.Context(), h)
	if domain.ErrorCode(err) == domain.ECodeNotFound {
		if viaCookie {
			s.clearSessionCookie(c)
		}
		s.fail(c, domain.Errorf(domain.ECodeUnauthorized, "Votre session a expiré ou n'est plus valide. Connectez-vous."))
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	if viaCookie && unsafeMethod(c.Request.Method) &&
		subtle.ConstantTimeCompare([]byte(c.GetHeader(CSRFHeader)), []byte(csrf)) != 1 {
		s.fail(c, errCSRF)
		return
	}
	c.Set(ctxAccount, acc)
	c.Set(ctxCSRF, csrf)
	c.Set(ctxTokenHash, h)
	c.Next()
}

func account(c *gin.Context) domain.Account {
	return c.MustGet(ctxAccount).(domain.Account)
}

// agentAuth accepts only a configured support agent token as "Authorization:
// Bearer". Every configured token is compared (in constant time) whatever
// the input; a customer session is never accepted here.
func (s *Server) agentAuth(c *gin.Context) {
	token, _ := bearerToken(c.Request)
	sum := sha256.Sum256([]byte(token))
	name := ""
	for _, a := range s.agents {
		if subtle.ConstantTimeCompare(sum[:], a.hash[:]) == 1 {
			name = a.name
		}
	}
	if token == "" || name == "" {
		c.Header("WWW-Authenticate", `Bearer realm="kernodeck-support"`)
		s.fail(c, errAgentRequired)
		return
	}
	c.Set(ctxAgent, name)
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
	if err := s.store.CreateSession(c.Request.Context(), tokenHash(token), acc.ID, csrf, expires); err != nil {
		return sessionResponse{}, err
	}
	resp := sessionResponse{Account: acc, CSRFToken: csrf, ExpiresAt: &expires}
	if bearer {
		resp.Token = token
	} else {
		http.SetCookie(c.Writer, &http.Cookie{
			Name: SessionCookie, Value: token, Path: "/",
			Expires: expires, MaxAge: int(s.cfg.SessionTTL.Seconds()),
			HttpOnly: true, Secure: s.cfg.CookieSecure, SameSite: http.SameSiteLaxMode,
		})
	}
	return resp, nil
}

func (s *Server) clearSessionCookie(c *gin.Context) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
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

type registerRequest struct {
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	Email     string `json:"email"`
	Password  string `json:"password"`
	Bearer    bool   `json:"bearer"`
}

func validEmail(e string) bool {
	if len(e) < 3 || len(e) > 254 || strings.ContainsAny(e, " \t\r\n<>\"") {
		return false
	}
	addr, err := mail.ParseAddress(e)
	if err != nil || addr.Address != e {
		return false
	}
	at := strings.LastIndexByte(e, '@')
	return at > 0 && at < len(e)-1
}

func (s *Server) register(c *gin.Context) {
	var req registerRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	first, err := personName("first_name", req.FirstName, 100, "Indiquez votre prénom (100 caractères au plus).")
	if err != nil {
		s.fail(c, err)
		return
	}
	last, err := personName("last_name", req.LastName, 100, "Indiquez votre nom (100 caractères au plus).")
	if err != nil {
		s.fail(c, err)
		return
	}
	email := strings.TrimSpace(req.Email)
	if !validEmail(email) {
		s.fail(c, domain.FieldError("email", "Indiquez une adresse email valide."))
		return
	}
	if n := utf8.RuneCountInString(req.Password); n < domain.MinPasswordLen || n > domain.MaxPasswordLen {
		s.fail(c, domain.FieldError("password", fmt.Sprintf(
			"Le mot de passe doit comporter de %d à %d caractères.", domain.MinPasswordLen, domain.MaxPasswordLen)))
		return
	}
	hash, err := s.hash(c.Request.Context(), req.Password)
	if err != nil {
		s.fail(c, err)
		return
	}
	acc, err := s.store.CreateAccount(c.Request.Context(),
		domain.Account{FirstName: first, LastName: last, Email: email}, hash)
	if err != nil {
		// A taken email gets the store's fixed message: nothing about the
		// existing account, no session.
		s.fail(c, err)
		return
	}
	resp, err := s.startSession(c, acc, req.Bearer)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, resp)
}

type loginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Bearer   bool   `json:"bearer"`
}

func (s *Server) login(c *gin.Context) {
	ctx := c.Request.Context()
	var req loginRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	email := strings.TrimSpace(req.Email)
	if email == "" {
		s.fail(c, domain.FieldError("email", "Indiquez votre adresse email."))
		return
	}
	if req.Password == "" {
		s.fail(c, domain.FieldError("password", "Indiquez votre mot de passe."))
		return
	}
	ip := c.ClientIP()
	perEmail, perIP, err := s.store.RecentLoginFailures(ctx, email, ip, s.cfg.LoginWindow)
	if err != nil {
		s.fail(c, err)
		return
	}
	if perEmail >= s.cfg.MaxFailuresPerEmail || perIP >= s.cfg.MaxFailuresPerIP {
		c.Header("Retry-After", strconv.Itoa(int(s.cfg.LoginWindow.Seconds())))
		s.fail(c, domain.Errorf(domain.ECodeTooMany,
			"Trop de tentatives de connexion échouées. Réessayez dans %d minutes.", int(s.cfg.LoginWindow.Minutes())))
		return
	}
	acc, encoded, err := s.store.AccountByEmail(ctx, email)
	found := err == nil
	if err != nil && domain.ErrorCode(err) != domain.ECodeNotFound {
		s.fail(c, err)
		return
	}
	if !found {
		encoded = s.dummyHash // same work whether or not the email exists
	}
	ok, err := s.verify(ctx, encoded, req.Password)
	if err != nil {
		s.fail(c, fmt.Errorf("verify password of account %d: %w", acc.ID, err))
		return
	}
	if !found || !ok {
		if err := s.store.RecordLoginFailure(ctx, email, ip); err != nil {
			s.fail(c, err)
			return
		}
		s.fail(c, domain.Errorf(domain.ECodeUnauthorized, "Email ou mot de passe incorrect."))
		return
	}
	if err := s.store.ClearLoginFailures(ctx, email); err != nil {
		s.log.Warn("clear login failures", "err", err)
	}
	resp, err := s.startSession(c, acc, req.Bearer)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, resp)
}

func (s *Server) logout(c *gin.Context) {
	if err := s.store.DeleteSession(c.Request.Context(), c.MustGet(ctxTokenHash).([]byte)); err != nil {
		s.fail(c, err)
		return
	}
	s.clearSessionCookie(c)
	c.Status(http.StatusNoContent)
}

func (s *Server) me(c *gin.Context) {
	c.JSON(http.StatusOK, sessionResponse{Account: account(c), CSRFToken: c.GetString(ctxCSRF)})
}
