package api

import (
	"context"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

type topUpView struct {
	domain.TopUp
	AmountUSD string `json:"amount_usd"`
}

func viewTopUp(t domain.TopUp) topUpView {
	return topUpView{TopUp: t, AmountUSD: domain.FormatUSD(t.AmountCents)}
}

type topUpDetail struct {
	TopUp          topUpView              `json:"topup"`
	Timeline       []domain.TimelineEvent `json:"timeline"`
	PaymentIntents []intentView           `json:"payment_intents"`
	// ReceivedCents is what its workflow counted toward the top-up
	// (confirmed payments and attributions, excess included, less
	// reversals), before it is credited too: a partly paid top-up shows
	// what came in and what is missing.
	ReceivedCents int64  `json:"received_cents"`
	ReceivedUSD   string `json:"received_usd"`
}

func (s *Server) topUpDetail(ctx context.Context, t domain.TopUp) (topUpDetail, error) {
	tl, err := s.store.Timeline(ctx, t.Ref, 0)
	if err != nil {
		return topUpDetail{}, err
	}
	intents, err := s.intentViews(ctx, t.Ref)
	if err != nil {
		return topUpDetail{}, err
	}
	received := t.ReceivedCents
	return topUpDetail{TopUp: viewTopUp(t), Timeline: customerTimeline(tl), PaymentIntents: intents,
		ReceivedCents: received, ReceivedUSD: domain.FormatUSD(received)}, nil
}

// createTopUpRequest: the amount is given in cents, one of 10000, 50000,
// 200000 or 1000000 (100, 500, 2 000 or 10 000 USD).
type createTopUpRequest struct {
	AmountCents int64 `json:"amount_cents"`
}

func (s *Server) createTopUp(c *gin.Context) {
	var req createTopUpRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	if !slices.Contains(domain.TopUpAmountsCents, req.AmountCents) {
		s.fail(c, domain.FieldError("amount_cents",
			"Les recharges proposées sont de 100, 500, 2 000 et 10 000 USD (amount_cents 10000, 50000, 200000 ou 1000000)."))
		return
	}
	t, err := s.store.CreateTopUpLimited(c.Request.Context(), account(c).ID, req.AmountCents, s.openTopUpsLimit())
	if err != nil {
		s.fail(c, err)
		return
	}
	ctx, cancel := s.workflowCtx(c)
	if err := s.wf.StartTopUp(ctx, workflows.NewTopUpInput(t, s.cfg.TopUpTimeout)); err != nil {
		s.log.Warn("top-up workflow not started; the reconciler will retry", "ref", t.Ref, "err", err)
	} else if err := s.store.MarkTopUpWorkflowStarted(ctx, t.Ref); err != nil {
		s.log.Warn("top-up workflow started but not marked", "ref", t.Ref, "err", err)
	}
	cancel()
	d, err := s.topUpDetail(c.Request.Context(), t)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", "/v1/topups/"+t.Ref)
	c.JSON(http.StatusCreated, d)
}

func (s *Server) listTopUps(c *gin.Context) {
	ts, err := s.store.ListTopUps(c.Request.Context(), account(c).ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	views := make([]topUpView, len(ts))
	for i, t := range ts {
		views[i] = viewTopUp(t)
	}
	c.JSON(http.StatusOK, gin.H{"topups": views})
}

func (s *Server) getTopUp(c *gin.Context) {
	t, err := s.store.TopUpForAccount(c.Request.Context(), c.Param("ref"), account(c).ID)
	if err != nil {
		s.fail(c, notFoundAs(err, errTopUpNotFound))
		return
	}
	d, err := s.topUpDetail(c.Request.Context(), t)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, d)
}

func (s *Server) getBalance(c *gin.Context) {
	b, err := s.store.Balance(c.Request.Context(), account(c).ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, b)
}
