package web

import (
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// The customer's account page (/compte): name and email, open sessions
// (end one or all others), password change, the account's own activity.
// Every action is the API's (/v1/me/...), called with the customer's
// session and CSRF token.

// accountData is what the account page shows.
type accountData struct {
	Sessions      []domain.Session
	Activity      []domain.AccountActivity
	LoginFailures []domain.LoginFailures
	FailedLogins  int
	MinLen        int
	MaxLen        int
}

// accountNotices are the messages a redirect to /compte can ask for.
var accountNotices = map[string]string{
	"session":  "La session est terminée : sa prochaine page demandera de se reconnecter.",
	"sessions": "Toutes vos autres sessions sont terminées : elles devront se reconnecter.",
	"password": "Votre mot de passe est changé. Toutes vos autres sessions sont terminées ; l'ancien mot de passe ne fonctionne plus.",
}

var activityLabels = map[string]string{
	domain.ActivityLogin:           "Connexion",
	domain.ActivityLoginFailed:     "Mot de passe incorrect à la connexion",
	domain.ActivityPasswordChanged: "Mot de passe changé",
	domain.ActivitySessionEnded:    "Une autre session terminée",
	domain.ActivitySessionsEnded:   "Toutes les autres sessions terminées",
}

func (s *Site) mountAccount(g *gin.RouterGroup) {
	g.GET("/compte", s.account)
	g.POST("/compte/sessions/:id/end", s.endSession)
	g.POST("/compte/sessions/end-others", s.endOtherSessions)
	g.POST("/compte/password", s.changePassword)
}

func (s *Site) account(c *gin.Context) {
	me, ok := s.signedIn(c)
	if !ok {
		return
	}
	p := pageFor(me, "Mon compte")
	p.Notice = accountNotices[c.Query("info")]
	s.renderAccount(c, p, http.StatusOK)
}

// renderAccount loads the sessions and activity into p and renders the page.
func (s *Site) renderAccount(c *gin.Context, p page, status int) {
	d := accountData{MinLen: domain.MinPasswordLen, MaxLen: domain.MaxPasswordLen}
	var sessions struct {
		Sessions []domain.Session `json:"sessions"`
	}
	if err := s.api.call(c, http.MethodGet, "/v1/me/sessions", "", nil, &sessions); err != nil {
		s.fail(c, err)
		return
	}
	var activity struct {
		Activity      []domain.AccountActivity `json:"activity"`
		LoginFailures []domain.LoginFailures   `json:"login_failures"`
		FailedLogins  int                      `json:"failed_logins_30_days"`
	}
	if err := s.api.call(c, http.MethodGet, "/v1/me/activity", "", nil, &activity); err != nil {
		s.fail(c, err)
		return
	}
	d.Sessions, d.Activity, d.FailedLogins = sessions.Sessions, activity.Activity, activity.FailedLogins
	d.LoginFailures = activity.LoginFailures
	p.Data = d
	s.render(c, status, "account", p)
}

// accountAction posts an account action to the API; done, it goes back to
// the account page with its notice. A refusal (a session not the
// account's, a wrong current password) shows on the page, nothing changed.
func (s *Site) accountAction(c *gin.Context, method, path string, body any, notice string) {
	me, ok := s.signedIn(c)
	if !ok {
		return
	}
	err := s.api.call(c, method, path, c.PostForm("csrf"), body, nil)
	switch domain.ErrorCode(err) {
	case "":
		c.Redirect(http.StatusSeeOther, "/compte?info="+notice)
	case domain.ECodeInvalid, domain.ECodeWrongPassword, domain.ECodeSessionNotFound, domain.ECodeTooMany:
		p := pageFor(me, "Mon compte")
		p.fieldError(err)
		s.renderAccount(c, p, statusOf(err))
	default:
		s.fail(c, err)
	}
}

func (s *Site) endSession(c *gin.Context) {
	s.accountAction(c, http.MethodDelete, "/v1/me/sessions/"+url.PathEscape(c.Param("id")), nil, "session")
}

func (s *Site) endOtherSessions(c *gin.Context) {
	s.accountAction(c, http.MethodPost, "/v1/me/sessions/end-others", nil, "sessions")
}

func (s *Site) changePassword(c *gin.Context) {
	s.accountAction(c, http.MethodPost, "/v1/me/password", map[string]string{
		"current_password": c.PostForm("current_password"), "new_password": c.PostForm("new_password"),
	}, "password")
}
