package web

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// verifyData is the confirmation page's data.
type verifyData struct {
	// Token is the link's token, carried by the confirmation form.
	Token string
	// Done: the address is confirmed (Already: it was before).
	Done, Already bool
	// Sent is where a new link was just sent.
	Sent string
}

// verifyForm is where a confirmation link leads: a button that posts the
// token. Opening the link confirms nothing by itself, so a mail scanner or
// a link preview fetching it cannot confirm an address for its owner.
func (s *Site) verifyForm(c *gin.Context) {
	me, err := s.session(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	p := pageFor(me, "Confirmer votre adresse email")
	p.Data = verifyData{Token: c.Query("token")}
	if c.Query("token") == "" {
		p.Error = "Ce lien de confirmation est incomplet : ouvrez le lien reçu par email tel quel."
		s.render(c, http.StatusBadRequest, "verify", p)
		return
	}
	s.render(c, http.StatusOK, "verify", p)
}

// verifyEmail checks the link's token and says how it went.
func (s *Site) verifyEmail(c *gin.Context) {
	already, err := s.svc.VerifyEmail(c.Request.Context(), c.PostForm("token"))
	me, serr := s.session(c)
	if serr != nil {
		s.fail(c, serr)
		return
	}
	p := pageFor(me, "Confirmer votre adresse email")
	if err != nil {
		switch domain.ErrorCode(err) {
		case domain.ECodeVerificationInvalid, domain.ECodeVerificationExpired, domain.ECodeInvalid, domain.ECodeInvalidJSON:
			p.Error = domain.ErrorMessage(err)
			p.Data = verifyData{}
			s.render(c, statusOf(err), "verify", p)
		default:
			s.fail(c, err)
		}
		return
	}
	p.Title = "Adresse email confirmée"
	p.Data = verifyData{Done: true, Already: already}
	s.render(c, http.StatusOK, "verify", p)
}

// resendVerification mails the link again (the banner's
// button on every page of an unconfirmed account).
func (s *Site) resendVerification(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	err := s.svc.ResendVerification(c.Request.Context(), me)
	p := pageFor(me, "Confirmer votre adresse email")
	p.Data = verifyData{}
	if err != nil {
		if domain.ErrorCode(err) == domain.ECodeUnauthorized {
			s.toLogin(c)
			return
		}
		p.Error = domain.ErrorMessage(err) // the API's French message says how long to wait
		s.render(c, statusOf(err), "verify", p)
		return
	}
	p.Data = verifyData{Sent: me.Account.Email}
	s.render(c, http.StatusOK, "verify", p)
}
