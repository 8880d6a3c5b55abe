package web

// The support console's sign-in: an agent's token exchanged for a
// revocable console session, and signing out.

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// hasAgentCookie: a console session cookie under either name.
func hasAgentCookie(r *http.Request) bool {
	for _, name := range []string{api.AgentCookie, api.DevAgentCookie} {
		if _, err := r.Cookie(name); err == nil {
			return true
		}
	}
	return false
}

// consoleAgent is the agent this browser is signed in as: nil (no error)
// when none. A customer's session is no agent's. A cookie whose session
// expired or was closed is removed from the browser.
func (s *Site) consoleAgent(c *gin.Context) (*agent, error) {
	if !hasAgentCookie(c.Request) {
		return nil, nil
	}
	a, err := s.svc.AgentSession(c.Request.Context(), c.Request)
	if err != nil {
		return nil, err
	}
	if a == nil {
		s.svc.ClearAgentSession(c)
	}
	return a, nil
}

// signedInAgent returns the agent, or sends the browser to the console's
// sign-in page (ok false: the answer is written).
func (s *Site) signedInAgent(c *gin.Context) (*agent, bool) {
	a, err := s.consoleAgent(c)
	if err != nil {
		s.consoleFail(c, nil, err)
		return nil, false
	}
	if a == nil {
		s.toConsoleLogin(c)
		return nil, false
	}
	return a, true
}

func (s *Site) toConsoleLogin(c *gin.Context) { toSignIn(c, "/support/login", "/support") }

// consoleNext keeps a post-sign-in destination inside the console.
func consoleNext(next string) string {
	n := safeNext(next)
	if n != "/support" && !strings.HasPrefix(n, "/support/") && !strings.HasPrefix(n, "/support?") {
		return "/support"
	}
	return n
}

func agentPage(a *agent, title string) page {
	return page{Title: title, Agent: a}
}

// consoleFail renders an error of the console (a signed-out agent goes to
// the sign-in page).
func (s *Site) consoleFail(c *gin.Context, a *agent, err error) {
	if s.clientGone(c, err) {
		return
	}
	switch domain.ErrorCode(err) {
	case domain.ECodeUnauthorized:
		s.toConsoleLogin(c)
		return
	case domain.ECodeInternal:
		s.log.Error("web: console page failed", "path", c.Request.URL.Path, "err", err)
	}
	p := agentPage(a, "Une erreur est survenue")
	p.Error = domain.ErrorMessage(err)
	if domain.ErrorCode(err) == domain.ECodeNotFound {
		p.Title = "Introuvable"
	}
	s.render(c, statusOf(err), "error", p)
}

type consoleLoginData struct {
	Next string
}

func (s *Site) consoleLoginForm(c *gin.Context) {
	a, err := s.consoleAgent(c)
	if err != nil {
		s.consoleFail(c, nil, err)
		return
	}
	next := consoleNext(c.Query("next"))
	if a != nil {
		c.Redirect(http.StatusSeeOther, next)
		return
	}
	p := page{Title: "Console du support", Path: next, Data: consoleLoginData{Next: next}}
	s.render(c, http.StatusOK, "support_login", p)
}

// consoleLogin exchanges the agent's token for a session (the service
// checks it, throttles wrong tokens per network and sets the cookie).
func (s *Site) consoleLogin(c *gin.Context) {
	next := consoleNext(c.PostForm("next"))
	token := strings.TrimSpace(c.PostForm("token"))
	var err error
	if token == "" {
		err = domain.FieldError("token", "Indiquez votre jeton d'agent.")
	} else {
		_, err = s.svc.OpenAgentSession(c, token)
	}
	if err != nil {
		p := page{Title: "Console du support", Path: next, Data: consoleLoginData{Next: next}}
		if domain.ErrorCode(err) == domain.ECodeUnauthorized {
			err = domain.FieldError("token", "Jeton d'agent inconnu.")
		}
		p.fieldError(err)
		status := statusOf(err)
		if domain.ErrorCode(err) == domain.ECodeInvalid {
			status = http.StatusUnauthorized
		}
		s.render(c, status, "support_login", p)
		return
	}
	c.Redirect(http.StatusSeeOther, next)
}

func (s *Site) consoleLogout(c *gin.Context) {
	a, err := s.consoleAgent(c)
	if err == nil && a != nil {
		if err = s.svc.CheckAgentCSRF(a, c.PostForm("csrf")); err == nil {
			err = s.svc.CloseAgentSession(c.Request.Context(), a)
		}
	}
	if err != nil {
		s.consoleFail(c, nil, err)
		return
	}
	s.svc.ClearAgentSession(c)
	c.Redirect(http.StatusSeeOther, "/support/login")
}
