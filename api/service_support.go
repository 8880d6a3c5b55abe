package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// The support console's services in Go: the /v1/support handlers decode a
// request, call one of these and encode its answer; the console's handlers
// (package web) call the same methods and render templates. Each takes the
// agent acting (an *Agent from AgentSession) and decides there that an
// agent acts, so the rules, the audit and the French messages live here
// once.

// Agent is a signed-in support agent: their name, how they signed in
// (Via: "session" for the console's cookie, "token" for a bearer), the
// console session's CSRF token and its times, and the session's key
// (never its token).
type Agent = agentSessionResponse

// requireAgent refuses a call without an agent.
func requireAgent(a *Agent) error {
	if a == nil || a.Agent == "" {
		return errAgentRequired
	}
	return nil
}

// agentOf is the request's agent (after supportAuth or agentAuth).
func agentOf(c *gin.Context) *Agent {
	if v, ok := c.Get(ctxAgentSession); ok {
		return v.(*Agent)
	}
	return &Agent{Agent: c.GetString(ctxAgent), Via: "token"}
}

// AgentSession reads the console session named by the request's cookie,
// recording its use: nil (no error) when there is none, or it expired or
// was closed, or its token is no longer configured (the session is then
// deleted).
func (s *Server) AgentSession(ctx context.Context, r *http.Request) (*Agent, error) {
	ck, err := r.Cookie(s.agentCookieName())
	if err != nil || ck.Value == "" {
		return nil, nil
	}
	return s.agentSessionOf(ctx, tokenHash(ck.Value), s.stores.AgentSessions.AgentSession)
}

// agentSessionOf reads the console session h with read (recording its use
// or not): nil when there is none any more.
func (s *Server) agentSessionOf(ctx context.Context, h []byte,
	read func(context.Context, []byte) (domain.AgentSession, error)) (*Agent, error) {
	sess, err := read(ctx, h)
	if domain.ErrorCode(err) == domain.ECodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !s.agentTokenConfigured(sess) {
		// The token it was opened with was removed or rotated: the session
		// goes with it.
		return nil, s.stores.AgentSessions.DeleteAgentSession(ctx, h)
	}
	return &Agent{Agent: sess.Agent, Roles: s.rolesOf(sess.Agent).List(), Via: "session", CSRFToken: sess.CSRFToken,
		CreatedAt: &sess.CreatedAt, ExpiresAt: &sess.ExpiresAt, tokenHash: h}, nil
}

// CheckAgentCSRF refuses a console form whose token is not the session's.
func (s *Server) CheckAgentCSRF(a *Agent, token string) error {
	if a == nil || a.CSRFToken == "" || subtle.ConstantTimeCompare([]byte(token), []byte(a.CSRFToken)) != 1 {
		return errCSRF
	}
	return nil
}

// ClearAgentSession removes the console cookie from the browser (a
// session expired or closed).
func (s *Server) ClearAgentSession(c *gin.Context) { s.clearAgentCookie(c) }

// agentGuessesRefusal refuses a network past its wrong agent tokens.
const agentGuessesRefusal = "Trop de jetons d'agent invalides depuis votre adresse."

// agentByToken checks an agent token sent from clientNetwork: the agent's
// name, or errAgentRequired. Every configured token is compared (in
// constant time) whatever the input; wrong tokens are counted per client
// network (domain.AgentGuessRule, shared with the codec endpoint): past
// the limit the network is refused before any comparison.
func (s *Server) agentByToken(ctx context.Context, token, clientNetwork string) (string, error) {
	rule := domain.AgentGuessRule(clientNetwork)
	locked, err := s.stores.Accounts.ThrottleLocked(ctx, []domain.ThrottleRule{rule})
	if err != nil {
		return "", err
	}
	if locked > 0 {
		return "", errTooMany(locked, agentGuessesRefusal)
	}
	sum := sha256.Sum256([]byte(token))
	name := ""
	for _, a := range s.agents {
		if subtle.ConstantTimeCompare(sum[:], a.hash[:]) == 1 {
			name = a.name
		}
	}
	if token != "" && name != "" {
		return name, nil
	}
	if token != "" {
		retry, err := s.stores.Accounts.Attempt(ctx, []domain.ThrottleRule{rule})
		if err != nil {
			return "", err
		}
		if retry > 0 {
			return "", errTooMany(retry, agentGuessesRefusal)
		}
	}
	return "", errAgentRequired
}

// OpenAgentSession exchanges an agent's token for a console session of
// this browser (the token checked and its guesses throttled as every
// support call's) and sets its cookie on the answer.
func (s *Server) OpenAgentSession(c *gin.Context, token string) (*Agent, error) {
	name, err := s.agentByToken(c.Request.Context(), token, domain.ClientNetwork(c.ClientIP()))
	if err != nil {
		return nil, err
	}
	return s.startAgentSession(c, name, token)
}

// startAgentSession opens a console session for agent name, signed in
// with token, and sets its cookie.
func (s *Server) startAgentSession(c *gin.Context, name, token string) (*Agent, error) {
	sessionToken, err := newToken()
	if err != nil {
		return nil, err
	}
	csrf, err := newToken()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	sess := domain.AgentSession{
		Agent:     name,
		TokenFP:   agentTokenFP(sha256.Sum256([]byte(token))),
		CSRFToken: csrf,
		ClientIP:  c.ClientIP(),
		UserAgent: truncate(c.GetHeader("User-Agent"), 300),
		CreatedAt: now,
		ExpiresAt: now.Add(AgentSessionTTL),
	}
	h := tokenHash(sessionToken)
	if err := s.stores.AgentSessions.CreateAgentSession(c.Request.Context(), h, sess, AgentSessionIdle); err != nil {
		return nil, err
	}
	http.SetCookie(c.Writer, &http.Cookie{
		Name: s.agentCookieName(), Value: sessionToken, Path: "/", Expires: sess.ExpiresAt,
		HttpOnly: true, Secure: s.cfg.CookieSecure, SameSite: http.SameSiteStrictMode,
	})
	return &Agent{Agent: name, Roles: s.rolesOf(name).List(), Via: "session", CSRFToken: csrf, CreatedAt: &sess.CreatedAt, ExpiresAt: &sess.ExpiresAt,
		tokenHash: h}, nil
}

// CloseAgentSession signs the console session out (the row is deleted:
// its cookie is worthless from now on, wherever it was copied); the
// caller clears the cookie (ClearAgentSession).
func (s *Server) CloseAgentSession(ctx context.Context, a *Agent) error {
	if err := requireAgent(a); err != nil {
		return err
	}
	if a.Via != "session" || a.tokenHash == nil {
		return domain.Errorf(domain.ECodeInvalid, "Aucune session de console à fermer : un jeton d'agent ne se déconnecte pas.")
	}
	return s.stores.AgentSessions.DeleteAgentSession(ctx, a.tokenHash)
}
