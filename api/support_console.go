package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// The support console (package web, /support) signs agents in with their
// token of KERNODECK_SUPPORT_TOKENS, exchanged once for a session of their
// browser: POST /v1/support/session with the token as a bearer (the same
// check and throttle as every /v1/support call, agentAuth) opens it and sets
// its cookie. /v1/support/* then accepts the cookie as well as the bearer
// token; cookie requests that change something need the session's CSRF
// token (X-CSRF-Token), as customers' do. The console calls the same
// services in Go (service_support*.go: AgentSession, OpenAgentSession, the
// reads and the actions, audit row first, then the workflow), never a copy.

// AgentCookie is the console session's cookie (HttpOnly, Secure,
// SameSite=Strict, Path=/: the __Host- prefix forbids any other path);
// DevAgentCookie is its name without Secure (plain-http development).
const (
	AgentCookie    = "__Host-kd_agent"
	DevAgentCookie = "kd_agent"
)

// An agent session ends AgentSessionTTL after sign-in, or after
// AgentSessionIdle unused (its last use recorded at most every 5 minutes),
// or at sign-out, or once the agent's token is no longer configured.
const (
	AgentSessionTTL  = 12 * time.Hour
	AgentSessionIdle = time.Hour
)

const ctxAgentSession = "kd.agent_session"

// AgentSessionStore keeps the support console's sessions.
type AgentSessionStore interface {
	CreateAgentSession(ctx context.Context, tokenHash []byte, s domain.AgentSession, idle time.Duration) error
	AgentSession(ctx context.Context, tokenHash []byte) (domain.AgentSession, error)
	// PeekAgentSession is AgentSession without recording a use (streams).
	PeekAgentSession(ctx context.Context, tokenHash []byte) (domain.AgentSession, error)
	DeleteAgentSession(ctx context.Context, tokenHash []byte) error
}

// SupportHostStore reads the hosts an order held, for its support view.
type SupportHostStore interface {
	OrderHosts(ctx context.Context, orderRef string) ([]domain.HostReservation, error)
	// ProvisioningFailures lists the orders whose provisioning failed,
	// waiting for support, longest waiting first.
	ProvisioningFailures(ctx context.Context) ([]domain.StuckOrder, error)
	// TeardownsStuck lists the rentals whose teardown is stuck (ending,
	// with a teardown_stuck event), longest stuck first.
	TeardownsStuck(ctx context.Context) ([]domain.StuckTeardown, error)
	// HostFlags lists the hosts their customer made dirty on purpose,
	// not closed by support yet, longest waiting first.
	HostFlags(ctx context.Context) ([]domain.HostFlag, error)
	// CloseHostFlag closes the open flags of an order's hosts.
	CloseHostFlag(ctx context.Context, orderRef, agent string) error
	// MachineQueue lists the paid orders waiting for a machine, line by
	// line (model, size), each in payment order with its position.
	MachineQueue(ctx context.Context) ([]domain.WaitingOrder, error)
}

// Bodies of the support API, named for the console (it decodes them).
type (
	// SupportOrderDetail is GET /v1/support/orders/{ref}.
	SupportOrderDetail = supportOrderDetail
	// SupportTopUpDetail is GET /v1/support/topups/{ref}.
	SupportTopUpDetail = supportTopUpDetail
	// ExceptionView is a queued received amount (GET /v1/support/exceptions).
	ExceptionView = exceptionView
	// SupportActionError is the body of a refused support action.
	SupportActionError = supportActionError
	// SupportCustomerDetail is GET /v1/support/accounts/{id}.
	SupportCustomerDetail = supportCustomerDetail
)

type agentSessionResponse struct {
	Agent string `json:"agent"`
	// Roles are the agent's support roles, agent first (for the console
	// to show and hide; the services check the configuration's, never
	// these).
	Roles []domain.SupportRole `json:"roles"`
	// Via is "session" (the console's cookie) or "token" (bearer).
	Via string `json:"via"`
	// CSRFToken, CreatedAt, ExpiresAt: a cookie session's only.
	CSRFToken string     `json:"csrf_token,omitempty"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// tokenHash names a cookie session in the store.
	tokenHash []byte
}

// agentCookieName is the console cookie's name under this configuration.
func (s *Server) agentCookieName() string {
	if s.cfg.CookieSecure {
		return AgentCookie
	}
	return DevAgentCookie
}

// agentTokenFP fingerprints an agent token (from its SHA-256) for the
// session row: enough to tell whether the token is still configured,
// never the token nor its plain hash.
func agentTokenFP(tokenSum [sha256.Size]byte) []byte {
	h := sha256.New()
	h.Write([]byte("kernodeck agent session\x00"))
	h.Write(tokenSum[:])
	return h.Sum(nil)[:16]
}

// supportAuth accepts an agent token (bearer, agentAuth and its throttle)
// or a console session cookie. A request with an Authorization header is
// the token's case whatever cookies it carries.
func (s *Server) supportAuth(c *gin.Context) {
	if _, viaHeader := bearerToken(c.Request); viaHeader {
		s.agentAuth(c)
		return
	}
	ck, err := c.Request.Cookie(s.agentCookieName())
	if err != nil || ck.Value == "" {
		s.agentAuth(c) // no credential at all: its 401
		return
	}
	read := s.stores.AgentSessions.AgentSession
	if strings.HasSuffix(c.FullPath(), "/events") {
		// A live stream reconnects by itself: not the agent at work, it
		// must not keep an idle session open.
		read = s.stores.AgentSessions.PeekAgentSession
	}
	a, err := s.agentSessionOf(c.Request.Context(), tokenHash(ck.Value), read)
	if err != nil {
		s.fail(c, err)
		return
	}
	if a == nil {
		s.refuseAgentSession(c)
		return
	}
	if unsafeMethod(c.Request.Method) &&
		subtle.ConstantTimeCompare([]byte(c.GetHeader(CSRFHeader)), []byte(a.CSRFToken)) != 1 {
		s.fail(c, errCSRF)
		return
	}
	c.Set(ctxAgent, a.Agent)
	c.Set(ctxAgentSession, a)
	c.Set(ctxTokenHash, a.tokenHash)
	c.Next()
}

// agentTokenConfigured: the session's agent still has the token it signed
// in with.
func (s *Server) agentTokenConfigured(sess domain.AgentSession) bool {
	ok := false
	for _, a := range s.agents {
		if subtle.ConstantTimeCompare(agentTokenFP(a.hash), sess.TokenFP) == 1 && a.name == sess.Agent {
			ok = true
		}
	}
	return ok
}

func (s *Server) refuseAgentSession(c *gin.Context) {
	s.clearAgentCookie(c)
	s.fail(c, domain.Errorf(domain.ECodeUnauthorized, "Votre session d'agent a expiré ou a été fermée. Reconnectez-vous avec votre jeton."))
}

func (s *Server) clearAgentCookie(c *gin.Context) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name: s.agentCookieName(), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: s.cfg.CookieSecure, SameSite: http.SameSiteStrictMode,
	})
}

// openAgentSession (after agentAuth: the bearer token is a configured
// agent's) opens a console session and sets its cookie.
func (s *Server) openAgentSession(c *gin.Context) {
	token, _ := bearerToken(c.Request)
	a, err := s.startAgentSession(c, c.GetString(ctxAgent), token)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, a)
}

// agentWhoAmI says which agent is calling, how, and with which roles.
func (s *Server) agentWhoAmI(c *gin.Context) {
	a := *agentOf(c)
	a.Roles = s.rolesOf(a.Agent).List()
	c.JSON(http.StatusOK, a)
}

// closeAgentSession signs the console session out.
func (s *Server) closeAgentSession(c *gin.Context) {
	if err := s.CloseAgentSession(c.Request.Context(), agentOf(c)); err != nil {
		s.fail(c, err)
		return
	}
	s.clearAgentCookie(c)
	c.Status(http.StatusNoContent)
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// supportProvisioningFailures lists the orders stuck in provisioning_failed
// (support's queue: retry, refund or cancel them).
func (s *Server) supportProvisioningFailures(c *gin.Context) {
	orders, err := s.ProvisioningFailures(c.Request.Context(), agentOf(c))
	s.answer(c, http.StatusOK, gin.H{"orders": orders}, err)
}

// supportTeardownsStuck lists the rentals whose teardown keeps failing
// (support's queue: check the host, which may still hold the customer's
// data and access; the workflow goes on retrying).
func (s *Server) supportTeardownsStuck(c *gin.Context) {
	orders, err := s.TeardownsStuck(c.Request.Context(), agentOf(c))
	s.answer(c, http.StatusOK, gin.H{"orders": orders}, err)
}

// supportHostFlags lists the hosts their customer made dirty on purpose
// (support's queue: read what the customer did, then close the flag).
func (s *Server) supportHostFlags(c *gin.Context) {
	flags, err := s.HostFlags(c.Request.Context(), agentOf(c))
	s.answer(c, http.StatusOK, gin.H{"host_flags": flags}, err)
}

// supportCloseHostFlag closes the open customer flags of an order's hosts,
// recorded with who and why.
func (s *Server) supportCloseHostFlag(c *gin.Context) {
	s.supportReasonOnly(c, s.CloseHostFlag, c.Param("ref"))
}

// supportCustomerDetail is what support sees of a customer: the account,
// its balance, its orders and top-ups (newest first) and the balance's
// movements (newest first, at most 200).
type supportCustomerDetail struct {
	Customer  domain.Account           `json:"customer"`
	Balance   domain.Balance           `json:"balance"`
	Orders    []orderView              `json:"orders"`
	TopUps    []topUpView              `json:"topups"`
	Movements []domain.BalanceMovement `json:"movements"`
	// TwoFactor: the customer's second factor is on (never its secret).
	TwoFactor bool `json:"two_factor"`
}

func (s *Server) supportGetAccount(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		id = 0 // not found
	}
	d, err := s.SupportCustomer(c.Request.Context(), agentOf(c), id)
	s.answer(c, http.StatusOK, d, err)
}
