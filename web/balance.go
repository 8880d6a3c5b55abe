package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

type topUpPageData struct {
	api.TopUpDetail
	Checkout checkout
}

// balanceData is the balance page.
type balanceData struct {
	Balance domain.Balance
	Amounts []int64
	TopUps  []api.TopUpView
	History []movement
	// Payouts are the payouts' terms (nil: not offered here).
	Payouts *payoutTerms
}

// movement is a line of the balance's history with the page of its
// reference: a top-up's (a credit, or a refund on it) or an order's.
type movement struct {
	domain.BalanceMovement
	URL string
}

// Label names the movement; a payout's credit is its amount given back.
func (m movement) Label() string {
	if m.Kind == domain.MovementPayout && m.AmountCents > 0 {
		return "Retrait annulé ou refusé : montant rendu"
	}
	return label(movementLabels, m.Kind)
}

func refURL(ref string) string {
	switch {
	case strings.HasPrefix(ref, domain.TopUpRefPrefix+"-"):
		return topUpURL(ref)
	case strings.HasPrefix(ref, domain.PayoutRefPrefix+"-"):
		return payoutURL(ref)
	}
	return orderURL(ref)
}

func topUpURL(ref string) string { return "/topups/" + url.PathEscape(ref) }

func (s *Site) balance(c *gin.Context) {
	me, ok := s.signedIn(c)
	if !ok {
		return
	}
	s.showBalance(c, me, nil)
}

func (s *Site) showBalance(c *gin.Context, me *session, refusal error) {
	d := balanceData{Amounts: domain.TopUpAmountsCents}
	ctx := c.Request.Context()
	var err error
	if d.Balance, err = s.svc.Balance(ctx, me); err != nil {
		s.fail(c, err)
		return
	}
	if d.TopUps, err = s.svc.TopUps(ctx, me); err != nil {
		s.fail(c, err)
		return
	}
	moves, err := s.svc.BalanceHistory(ctx, me)
	if err != nil {
		s.fail(c, err)
		return
	}
	for _, m := range moves {
		d.History = append(d.History, movement{BalanceMovement: m, URL: refURL(m.Ref)})
	}
	d.Payouts = s.payoutTerms()
	p := pageFor(me, "Mon solde")
	status := http.StatusOK
	if refusal != nil {
		p.fieldError(refusal)
		status = statusOf(refusal)
	}
	p.Data = d
	s.render(c, status, "balance", p)
}

func (s *Site) createTopUp(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	cents, _ := strconv.ParseInt(c.PostForm("amount_cents"), 10, 64)
	out, err := s.svc.CreateTopUp(c.Request.Context(), me, cents)
	if err != nil {
		if domain.ErrorCode(err) == domain.ECodeInvalid {
			s.showBalance(c, me, err)
			return
		}
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, topUpURL(out.TopUp.Ref)+"?info=topup#paiement")
}

func (s *Site) loadTopUp(c *gin.Context, me *session, ref string) (topUpPageData, error) {
	var d topUpPageData
	var err error
	if d.TopUpDetail, err = s.svc.TopUp(c.Request.Context(), me, ref); err != nil {
		return d, err
	}
	readableTimeline(d.Timeline, nil)
	t := d.TopUp
	unpaid := t.Status == domain.TopUpAwaitingPayment || t.Status == domain.TopUpPaymentDetected
	// What was received counts before the credit too: a partly paid top-up
	// shows it, what is missing and the partial payment's advice.
	paid := d.ReceivedCents
	if t.Status == domain.TopUpCredited {
		paid = max(paid, t.AmountCents)
	}
	ck, err := s.checkout(c, me, target{Kind: "topup", Ref: t.Ref, Status: t.Status, TotalCents: t.AmountCents,
		PaidCents: paid, Unpaid: unpaid}, d.PaymentIntents, d.Timeline)
	if err != nil {
		return d, err
	}
	d.Checkout = ck
	return d, nil
}

func (s *Site) topUpPage(c *gin.Context) {
	me, ok := s.signedIn(c)
	if !ok {
		return
	}
	s.showTopUp(c, me, nil)
}

func (s *Site) showTopUp(c *gin.Context, me *session, refusal error) {
	d, err := s.loadTopUp(c, me, c.Param("ref"))
	if err != nil {
		s.failOrder(c, err)
		return
	}
	p := pageFor(me, "Recharge "+d.TopUp.Ref)
	p.Data = d
	s.renderTracked(c, p, refusal, "topup", "topup_live_box", topUpURL(d.TopUp.Ref)+"/live", topUpTrigger)
}

func (s *Site) topUpLive(c *gin.Context) {
	me, ok := s.signedIn(c)
	if !ok {
		return
	}
	d, err := s.loadTopUp(c, me, c.Param("ref"))
	if err != nil {
		s.failOrder(c, err)
		return
	}
	p := pageFor(me, "")
	p.Data = d
	s.renderLive(c, p, "topup_live_box", topUpURL(d.TopUp.Ref)+"/live", topUpTrigger)
}

// topUpTrigger: the top-up page's live part is fetched again on each event
// of the top-up's stream.
const topUpTrigger = "sse:topup, sse:timeline"

func (s *Site) createTopUpIntent(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	ref := c.Param("ref")
	_, _, err := s.svc.CreateTopUpPaymentRequest(c.Request.Context(), me, ref, chosenMethod(c))
	s.intentCreated(c, err, topUpURL(ref), func(refusal error) { s.showTopUp(c, me, refusal) })
}
