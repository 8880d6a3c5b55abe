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
	tl, err := s.stores.Orders.Timeline(ctx, t.Ref, 0)
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
	d, err := s.CreateTopUp(c.Request.Context(), customer(c), req.AmountCents)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", "/v1/topups/"+d.TopUp.Ref)
	c.JSON(http.StatusCreated, d)
}

// CreateTopUp records the caller's top-up of amountCents (one of
// domain.TopUpAmountsCents, within their open top-ups' limit) and starts
// its workflow.
func (s *Server) CreateTopUp(ctx context.Context, me *Customer, amountCents int64) (TopUpDetail, error) {
	if err := s.WorkflowsReady(ctx); err != nil {
		return topUpDetail{}, err
	}
	if !slices.Contains(domain.TopUpAmountsCents, amountCents) {
		return topUpDetail{}, domain.FieldError("amount_cents",
			"Les recharges proposées sont de 100, 500, 2 000 et 10 000 USD (amount_cents 10000, 50000, 200000 ou 1000000).")
	}
	t, err := s.stores.Quotas.CreateTopUpLimited(ctx, me.Account.ID, amountCents, s.openTopUpsLimit())
	if err != nil {
		return topUpDetail{}, err
	}
	wctx, cancel := s.wfCtx(ctx)
	if err := s.wf.StartTopUp(wctx, workflows.NewTopUpInput(t, s.cfg.TopUpTimeout)); err != nil {
		s.log.Warn("top-up workflow not started; the reconciler will retry", "ref", t.Ref, "err", err)
	} else if err := s.stores.TopUps.MarkTopUpWorkflowStarted(wctx, t.Ref); err != nil {
		s.log.Warn("top-up workflow started but not marked", "ref", t.Ref, "err", err)
	}
	cancel()
	return s.topUpDetail(ctx, t)
}

func (s *Server) listTopUps(c *gin.Context) {
	views, err := s.TopUps(c.Request.Context(), customer(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"topups": views})
}

func (s *Server) getTopUp(c *gin.Context) {
	d, err := s.TopUp(c.Request.Context(), customer(c), c.Param("ref"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, d)
}

func (s *Server) getBalance(c *gin.Context) {
	b, err := s.Balance(c.Request.Context(), customer(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, b)
}
