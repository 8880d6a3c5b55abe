package web

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// Payouts on the site (api/service_payouts.go): /compte/retraits lists the
// customer's payouts with the form to ask one; the form's answer is a
// confirmation page with the locked rate and the network fee, confirmed
// with the second factor's code; each payout has its page with its
// timeline and, until it is signed, a cancel button.

// payoutServices are the payouts' services.
type payoutServices interface {
	QuotePayout(ctx context.Context, me *api.Customer, ask domain.PayoutAsk) (domain.PayoutQuote, string, error)
	RequestPayout(ctx context.Context, me *api.Customer, sealed, code, key string) (domain.Payout, error)
	CancelPayout(ctx context.Context, me *api.Customer, ref string) (domain.Payout, error)
	CustomerPayouts(ctx context.Context, me *api.Customer) ([]domain.Payout, int64, error)
	CustomerPayout(ctx context.Context, me *api.Customer, ref string) (api.PayoutView, error)
	PayoutTerms() (domain.PayoutLimits, bool)
}

// payoutTerms are what the site tells customers a payout is held to: the
// limits and each network's fee, as configured.
type payoutTerms struct {
	MinCents, DailyCents int64
	Fees                 []networkFee
}

type networkFee struct {
	Network string
	Cents   int64
}

// payoutTerms are the server's payout terms, nil when it offers no payouts.
func (s *Site) payoutTerms() *payoutTerms {
	lim, ok := s.svc.PayoutTerms()
	if !ok {
		return nil
	}
	t := &payoutTerms{MinCents: lim.MinCents, DailyCents: lim.DailyCents}
	for _, m := range domain.Methods {
		if !slices.ContainsFunc(t.Fees, func(f networkFee) bool { return f.Network == m.Network }) {
			t.Fees = append(t.Fees, networkFee{Network: m.Network, Cents: lim.FeeCents[m.Network]})
		}
	}
	return t
}

// payoutsData is the payouts page: the list, what it holds, the form (with
// what was typed) and, after a quote, the confirmation.
type payoutsData struct {
	Payouts   []domain.Payout
	HeldCents int64
	Methods   []domain.Method
	Ask       domain.PayoutAsk
	Amount    string // the typed amount, in USD
	Quote     *domain.PayoutQuote
	Sealed    string
	Terms     *payoutTerms
}

func (s *Site) mountPayouts(g *gin.RouterGroup) {
	g.GET("/compte/retraits", s.payoutsPage)
	g.POST("/compte/retraits/devis", s.payoutQuote)
	g.POST("/compte/retraits", s.payoutConfirm)
	g.GET("/compte/retraits/:ref", s.payoutPage)
	g.POST("/compte/retraits/:ref/annuler", s.payoutCancel)
}

func payoutURL(ref string) string { return "/compte/retraits/" + url.PathEscape(ref) }

func (s *Site) renderPayouts(c *gin.Context, me *session, p page, d payoutsData, status int) {
	ps, held, err := s.svc.CustomerPayouts(c.Request.Context(), me)
	if err != nil && domain.ErrorCode(err) != domain.ECodeConflict {
		s.fail(c, err)
		return
	}
	if err != nil {
		p.Error = domain.ErrorMessage(err) // payouts not offered here
	}
	d.Payouts, d.HeldCents, d.Methods, d.Terms = ps, held, domain.Methods, s.payoutTerms()
	if p.Title == "" {
		p = pageFor(me, "Mes retraits")
	}
	c.Header("Cache-Control", "no-store")
	p.Data = d
	s.render(c, status, "payouts", p)
}

func (s *Site) payoutsPage(c *gin.Context) {
	me, ok := s.signedIn(c)
	if !ok {
		return
	}
	s.renderPayouts(c, me, page{}, payoutsData{}, http.StatusOK)
}

func (s *Site) payoutQuote(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	asset, network, _ := strings.Cut(c.PostForm("method"), "/")
	d := payoutsData{Ask: domain.PayoutAsk{Asset: asset, Network: network, Address: c.PostForm("address")},
		Amount: c.PostForm("amount")}
	cents, err := parseUSD(d.Amount)
	if err != nil {
		p := pageFor(me, "Mes retraits")
		p.fieldError(domain.FieldError("amount", "Indiquez un montant en USD, par exemple 25 ou 25,50."))
		s.renderPayouts(c, me, p, d, http.StatusBadRequest)
		return
	}
	d.Ask.AmountCents = cents
	q, sealed, err := s.svc.QuotePayout(c.Request.Context(), me, d.Ask)
	if err != nil {
		p := pageFor(me, "Mes retraits")
		p.fieldError(err)
		s.renderPayouts(c, me, p, d, statusOf(err))
		return
	}
	d.Quote, d.Sealed = &q, sealed
	s.renderPayouts(c, me, pageFor(me, "Confirmer le retrait"), d, http.StatusOK)
}

func (s *Site) payoutConfirm(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	sealed := c.PostForm("quote")
	po, err := s.svc.RequestPayout(c.Request.Context(), me, sealed, c.PostForm("totp_code"), "")
	if err != nil {
		p := pageFor(me, "Mes retraits")
		p.fieldError(err)
		s.renderPayouts(c, me, p, payoutsData{}, statusOf(err))
		return
	}
	c.Redirect(http.StatusSeeOther, payoutURL(po.Ref))
}

func (s *Site) payoutPage(c *gin.Context) {
	me, ok := s.signedIn(c)
	if !ok {
		return
	}
	v, err := s.svc.CustomerPayout(c.Request.Context(), me, c.Param("ref"))
	if err != nil {
		s.failOrder(c, err)
		return
	}
	p := pageFor(me, "Retrait "+v.Ref)
	if c.Query("annule") == "1" {
		p.Notice = "Retrait annulé : le montant est de nouveau disponible sur votre solde."
	}
	c.Header("Cache-Control", "no-store")
	p.Data = v
	s.render(c, http.StatusOK, "payout", p)
}

func (s *Site) payoutCancel(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	ref := c.Param("ref")
	if _, err := s.svc.CancelPayout(c.Request.Context(), me, ref); err != nil {
		v, rerr := s.svc.CustomerPayout(c.Request.Context(), me, ref)
		if rerr != nil {
			s.failOrder(c, rerr)
			return
		}
		p := pageFor(me, "Retrait "+ref)
		p.Error = domain.ErrorMessage(err)
		p.Data = v
		s.render(c, statusOf(err), "payout", p)
		return
	}
	c.Redirect(http.StatusSeeOther, payoutURL(ref)+"?annule=1")
}
