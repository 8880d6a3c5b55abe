package web

import (
	"context"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// The customer's account page (/compte): name and email, open sessions
// (end one or all others), password change, the account's own activity.
// Every action is a service of package api, called in Go after the form's
// CSRF token is checked.

// accountData is what the account page shows.
type accountData struct {
	Sessions      []domain.Session
	Activity      []domain.AccountActivity
	LoginFailures []domain.LoginFailures
	FailedLogins  int
	MinLen        int
	MaxLen        int
	// TwoFactor: the second factor's state (account_totp.go).
	TwoFactor api.TwoFactorStatus
	// Payouts: this server offers payouts (/compte/retraits).
	Payouts bool
}

// accountNotices are the messages a redirect to /compte can ask for.
var accountNotices = map[string]string{
	"session":  "La session est terminée : sa prochaine page demandera de se reconnecter.",
	"sessions": "Toutes vos autres sessions sont terminées : elles devront se reconnecter.",
	"password": "Votre mot de passe est changé. Toutes vos autres sessions sont terminées ; l'ancien mot de passe ne fonctionne plus.",
	"2fa-off":  "La double authentification est désactivée. Un email vous le confirme.",
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
	s.mountTwoFactor(g) // the second factor (account_totp.go)
}

func (s *Site) account(c *gin.Context) {
	me, ok := s.signedIn(c)
	if !ok {
		return
	}
	p := pageFor(me, "Mon compte")
	p.Notice = accountNotices[c.Query("info")]
	s.renderAccount(c, me, p, http.StatusOK)
}

// renderAccount loads the sessions and activity into p and renders the page.
func (s *Site) renderAccount(c *gin.Context, me *session, p page, status int) {
	d := accountData{MinLen: domain.MinPasswordLen, MaxLen: domain.MaxPasswordLen}
	ctx := c.Request.Context()
	sessions, err := s.svc.Sessions(ctx, me)
	if err != nil {
		s.fail(c, err)
		return
	}
	activity, err := s.svc.Activity(ctx, me)
	if err != nil {
		s.fail(c, err)
		return
	}
	d.Sessions, d.Activity, d.FailedLogins = sessions, activity.Activity, activity.FailedLogins
	d.LoginFailures = activity.LoginFailures
	if d.TwoFactor, err = s.svc.TwoFactorStatus(ctx, me); err != nil {
		s.fail(c, err)
		return
	}
	_, d.Payouts = s.svc.PayoutTerms()
	p.Data = d
	s.render(c, status, "account", p)
}

// accountAction runs an account action; done, it goes back to the account
// page with its notice. A refusal (a session not the account's, a wrong
// current password) shows on the page, nothing changed.
func (s *Site) accountAction(c *gin.Context, do func(ctx context.Context, me *session) error, notice string) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	err := do(c.Request.Context(), me)
	switch domain.ErrorCode(err) {
	case "":
		c.Redirect(http.StatusSeeOther, "/compte?info="+notice)
	case domain.ECodeInvalid, domain.ECodeWrongPassword, domain.ECodeSessionNotFound, domain.ECodeTooMany:
		p := pageFor(me, "Mon compte")
		p.fieldError(err)
		s.renderAccount(c, me, p, statusOf(err))
	default:
		s.fail(c, err)
	}
}

func (s *Site) endSession(c *gin.Context) {
	id, _ := strconv.ParseInt(c.Param("id"), 10, 64)
	s.accountAction(c, func(ctx context.Context, me *session) error {
		wasCurrent, err := s.svc.EndSession(ctx, me, id, customerClient(c))
		if wasCurrent {
			s.svc.ClearSession(c)
		}
		return err
	}, "session")
}

func (s *Site) endOtherSessions(c *gin.Context) {
	s.accountAction(c, func(ctx context.Context, me *session) error {
		_, err := s.svc.EndOtherSessions(ctx, me, customerClient(c))
		return err
	}, "sessions")
}

func (s *Site) changePassword(c *gin.Context) {
	current, next := c.PostForm("current_password"), c.PostForm("new_password")
	s.accountAction(c, func(ctx context.Context, me *session) error {
		_, err := s.svc.ChangePassword(ctx, me, current, next, c.PostForm("totp_code"), customerClient(c))
		return err
	}, "password")
}
