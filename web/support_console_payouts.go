package web

// Payouts in the support console, /support/payouts (issue 39, item 1):
// agents approve or decline the customers' payouts (above the four-eyes
// threshold, a second agent, a senior, approves too); a senior gathers
// the approved ones of a method into a batch, downloads its PSBT or
// transfer list for the operator who signs off the server, and pastes
// back the signed transaction (or says the list was sent).

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// consolePayouts are the payouts' support services.
type consolePayouts interface {
	SupportPayouts(ctx context.Context, a *api.Agent, status domain.PayoutStatus) ([]domain.Payout, error)
	ApprovePayout(ctx context.Context, a *api.Agent, ref string) (domain.Payout, error)
	DeclinePayout(ctx context.Context, a *api.Agent, ref, reason string) (domain.Payout, error)
	OpenPayoutBatch(ctx context.Context, a *api.Agent, network, asset string) (api.BatchView, error)
	PayoutBatch(ctx context.Context, a *api.Agent, ref string) (api.BatchView, error)
	SubmitSignedBatch(ctx context.Context, a *api.Agent, ref, signed string) (api.BatchView, error)
}

type consolePayoutsData struct {
	Payouts []domain.Payout
	Methods []domain.Method
	Senior  bool
}

func (s *Site) mountConsolePayouts(g *gin.RouterGroup) {
	g.GET("/payouts", s.consolePayouts)
	g.POST("/payouts/:ref/approve", s.consolePayoutReview)
	g.POST("/payouts/:ref/decline", s.consolePayoutReview)
	g.POST("/payout-batches", s.consoleOpenBatch)
	g.GET("/payout-batches/:ref", s.consoleBatch)
	g.GET("/payout-batches/:ref/export", s.consoleBatchExport)
	g.POST("/payout-batches/:ref/signed", s.consoleBatchSigned)
}

func (s *Site) consolePayouts(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	s.showPayouts(c, a, "", nil)
}

func (s *Site) showPayouts(c *gin.Context, a *agent, notice string, err error) {
	ps, lerr := s.svc.SupportPayouts(c.Request.Context(), a, domain.PayoutStatus(c.Query("status")))
	if lerr != nil {
		s.consoleFail(c, a, lerr)
		return
	}
	p := agentPage(a, "Retraits")
	status := http.StatusOK
	if err != nil {
		p.Error, status = refusal(err, false), statusOf(err)
	}
	p.Notice = notice
	p.Data = consolePayoutsData{Payouts: ps, Methods: domain.Methods, Senior: a.Holds(domain.RoleSenior)}
	s.render(c, status, "support_payouts", p)
}

// agentPost is a console form's agent, its CSRF token checked (err).
func (s *Site) agentPost(c *gin.Context) (*agent, bool, error) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return nil, false, nil
	}
	return a, true, s.svc.CheckAgentCSRF(a, c.PostForm("csrf"))
}

func (s *Site) consolePayoutReview(c *gin.Context) {
	a, ok, err := s.agentPost(c)
	if !ok {
		return
	}
	ref := c.Param("ref")
	var notice string
	if err == nil {
		var po domain.Payout
		if strings.HasSuffix(c.Request.URL.Path, "/approve") {
			po, err = s.svc.ApprovePayout(c.Request.Context(), a, ref)
		} else {
			po, err = s.svc.DeclinePayout(c.Request.Context(), a, ref, c.PostForm("reason"))
		}
		notice = "Retrait " + ref + " : " + po.Status.Label() + "."
	}
	s.showPayouts(c, a, notice, err)
}

func (s *Site) consoleOpenBatch(c *gin.Context) {
	a, ok, err := s.agentPost(c)
	if !ok {
		return
	}
	if err == nil {
		asset, network, _ := strings.Cut(c.PostForm("method"), "/")
		var v api.BatchView
		if v, err = s.svc.OpenPayoutBatch(c.Request.Context(), a, network, asset); err == nil {
			c.Redirect(http.StatusSeeOther, "/support/payout-batches/"+url.PathEscape(v.Ref))
			return
		}
	}
	s.showPayouts(c, a, "", err)
}

func (s *Site) consoleBatch(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	s.showBatch(c, a, c.Param("ref"), nil)
}

func (s *Site) showBatch(c *gin.Context, a *agent, ref string, err error) {
	v, berr := s.svc.PayoutBatch(c.Request.Context(), a, ref)
	if berr != nil {
		s.consoleFail(c, a, berr)
		return
	}
	p := agentPage(a, "Lot de retraits "+v.Ref)
	status := http.StatusOK
	if err != nil {
		p.Error, status = refusal(err, false), statusOf(err)
	}
	p.Data = v
	s.render(c, status, "support_payout_batch", p)
}

// consoleBatchExport downloads the batch for its signer: the PSBT (base64,
// as Bitcoin Core's walletprocesspsbt takes it) or the transfer list (CSV).
func (s *Site) consoleBatchExport(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	v, err := s.svc.PayoutBatch(c.Request.Context(), a, c.Param("ref"))
	if err != nil {
		s.consoleFail(c, a, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	if v.Export.PSBT != "" {
		c.Header("Content-Disposition", `attachment; filename="`+v.Ref+`.psbt.txt"`)
		c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte(v.Export.PSBT))
		return
	}
	c.Header("Content-Disposition", `attachment; filename="`+v.Ref+`.csv"`)
	c.Data(http.StatusOK, "text/csv; charset=utf-8", []byte(v.Export.CSV))
}

func (s *Site) consoleBatchSigned(c *gin.Context) {
	a, ok, err := s.agentPost(c)
	if !ok {
		return
	}
	ref := c.Param("ref")
	if err == nil {
		if _, err = s.svc.SubmitSignedBatch(c.Request.Context(), a, ref, strings.TrimSpace(c.PostForm("transaction"))); err == nil {
			c.Redirect(http.StatusSeeOther, "/support/payout-batches/"+url.PathEscape(ref))
			return
		}
	}
	s.showBatch(c, a, ref, err)
}

// batchStatusLabels are the batches' statuses for people.
var batchStatusLabels = map[string]string{
	domain.BatchOpen: "à signer", domain.BatchSigned: "signé, en attente de la blockchain",
	domain.BatchDone: "confirmé", domain.BatchVoided: "refait (un retrait a été annulé)",
}
