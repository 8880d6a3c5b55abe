package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// The second factor on the site (api/totp.go): set up from /compte (QR
// code served as a PNG from this origin, the secret as text, a first code
// to confirm, the recovery codes shown once), turned off with a code, and
// the login's code step (/login/2fa) after a right password.

// twoFactor are the second factor's services.
type twoFactor interface {
	TwoFactorStatus(ctx context.Context, me *api.Customer) (api.TwoFactorStatus, error)
	BeginTwoFactor(ctx context.Context, me *api.Customer) (api.TwoFactorSetup, error)
	PendingTwoFactor(ctx context.Context, me *api.Customer) (api.TwoFactorSetup, error)
	TwoFactorQR(ctx context.Context, me *api.Customer) ([]byte, error)
	ConfirmTwoFactor(ctx context.Context, me *api.Customer, code string) ([]string, error)
	DisableTwoFactor(ctx context.Context, me *api.Customer, code string) error
	LoginWithCode(ctx context.Context, loginToken, code string, cl domain.SessionClient) (domain.Account, error)
	CustomerTwoFactor(ctx context.Context, accountID int64) (bool, error)
}

// twoFactorSetupData is the setup page: the secret and, once confirmed,
// the recovery codes.
type twoFactorSetupData struct {
	Secret        string
	RecoveryCodes []string
}

// loginCodeData is the login's code step.
type loginCodeData struct {
	Next       string
	LoginToken string
}

func (s *Site) mountTwoFactor(g *gin.RouterGroup) {
	g.POST("/compte/2fa/setup", s.twoFactorSetup)
	g.GET("/compte/2fa/setup", s.twoFactorPending)
	g.GET("/compte/2fa/qr.png", s.twoFactorQR)
	g.POST("/compte/2fa/confirm", s.twoFactorConfirm)
	g.POST("/compte/2fa/disable", s.twoFactorDisable)
	g.POST("/login/2fa", s.loginCode)
}

func (s *Site) twoFactorSetup(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	setup, err := s.svc.BeginTwoFactor(c.Request.Context(), me)
	if err != nil {
		s.accountRefusal(c, me, err)
		return
	}
	s.renderSetup(c, me, page{}, setup.Secret, http.StatusOK)
}

// twoFactorPending shows a setup started again (the page reloaded).
func (s *Site) twoFactorPending(c *gin.Context) {
	me, ok := s.signedIn(c)
	if !ok {
		return
	}
	setup, err := s.svc.PendingTwoFactor(c.Request.Context(), me)
	if err != nil {
		c.Redirect(http.StatusSeeOther, "/compte")
		return
	}
	s.renderSetup(c, me, page{}, setup.Secret, http.StatusOK)
}

func (s *Site) renderSetup(c *gin.Context, me *session, p page, secret string, status int) {
	if p.Title == "" {
		p = pageFor(me, "Activer la double authentification")
	}
	c.Header("Cache-Control", "no-store")
	p.Data = twoFactorSetupData{Secret: secret}
	s.render(c, status, "account_totp_setup", p)
}

func (s *Site) twoFactorQR(c *gin.Context) {
	me, ok := s.signedIn(c)
	if !ok {
		return
	}
	png, err := s.svc.TwoFactorQR(c.Request.Context(), me)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Data(http.StatusOK, "image/png", png)
}

func (s *Site) twoFactorConfirm(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	codes, err := s.svc.ConfirmTwoFactor(ctx, me, c.PostForm("totp_code"))
	if err != nil {
		switch domain.ErrorCode(err) {
		case domain.ECodeInvalid, domain.ECodeTooMany:
			setup, perr := s.svc.PendingTwoFactor(ctx, me)
			if perr != nil {
				s.fail(c, perr)
				return
			}
			p := pageFor(me, "Activer la double authentification")
			p.fieldError(err)
			s.renderSetup(c, me, p, setup.Secret, statusOf(err))
		default:
			s.accountRefusal(c, me, err)
		}
		return
	}
	p := pageFor(me, "Double authentification activée")
	c.Header("Cache-Control", "no-store")
	p.Data = twoFactorSetupData{RecoveryCodes: codes}
	s.render(c, http.StatusOK, "account_totp_setup", p)
}

func (s *Site) twoFactorDisable(c *gin.Context) {
	code := c.PostForm("totp_code")
	s.accountAction(c, func(ctx context.Context, me *session) error {
		err := s.svc.DisableTwoFactor(ctx, me, code)
		var de *domain.Error
		if errors.As(err, &de) && de.Field != "" {
			// Shown at the top: the page's totp_code field is the
			// password form's.
			return &domain.Error{Code: de.Code, Message: de.Message}
		}
		return err
	}, "2fa-off")
}

// accountRefusal shows a refusal on the account page.
func (s *Site) accountRefusal(c *gin.Context, me *session, err error) {
	switch domain.ErrorCode(err) {
	case domain.ECodeInvalid, domain.ECodeTooMany, domain.ECodeConflict, domain.ECodeNotFound:
		p := pageFor(me, "Mon compte")
		p.Error = domain.ErrorMessage(err)
		s.renderAccount(c, me, p, statusOf(err))
	default:
		s.fail(c, err)
	}
}

// loginCodeStep shows the login's code step after a right password.
func (s *Site) loginCodeStep(c *gin.Context, next string, tr *api.TOTPRequired, p page, status int) {
	p.Title, p.Path = "Code de double authentification", next
	p.Data = loginCodeData{Next: next, LoginToken: tr.LoginToken}
	c.Header("Cache-Control", "no-store")
	s.render(c, status, "login_totp", p)
}

func (s *Site) loginCode(c *gin.Context) {
	next := safeNext(c.PostForm("next"))
	token := c.PostForm("login_token")
	acc, err := s.svc.LoginWithCode(c.Request.Context(), token, c.PostForm("totp_code"), customerClient(c))
	if err == nil {
		_, err = s.svc.OpenSession(c, acc)
	}
	if err != nil {
		if domain.ErrorCode(err) == domain.ECodeUnauthorized { // the pending login expired
			f := newAuthForm(next)
			p := page{Title: "Se connecter", Path: f.Next, Data: f}
			p.fieldError(err)
			s.render(c, statusOf(err), "login", p)
			return
		}
		p := page{}
		p.fieldError(err)
		s.loginCodeStep(c, next, &api.TOTPRequired{LoginToken: token}, p, statusOf(err))
		return
	}
	c.Redirect(http.StatusSeeOther, next)
}
