package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// The payouts' JSON handlers: decode, call the service, encode.

func (s *Server) mountPayouts(cust, sup *gin.RouterGroup) {
	cust.POST("/payouts/quote", s.quotePayout)
	cust.POST("/payouts", s.requestPayout)
	cust.GET("/payouts", s.listPayouts)
	cust.GET("/payouts/:ref", s.getPayout)
	cust.POST("/payouts/:ref/cancel", s.cancelPayout)
	sup.GET("/payouts", s.supportListPayouts)
	sup.POST("/payouts/:ref/approve", s.supportApprovePayout)
	sup.POST("/payouts/:ref/decline", s.supportDeclinePayout)
	sup.POST("/payout-batches", s.supportOpenBatch)
	sup.GET("/payout-batches/:ref", s.supportGetBatch)
	sup.POST("/payout-batches/:ref/signed", s.supportSignedBatch)
}

// payoutQuoteResponse is a quote and its sealed form, which the payout's
// request sends back.
type payoutQuoteResponse struct {
	domain.PayoutQuote
	Quote string `json:"quote"`
}

func (s *Server) quotePayout(c *gin.Context) {
	var req domain.PayoutAsk
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	q, sealed, err := s.QuotePayout(c.Request.Context(), customer(c), req)
	s.answer(c, http.StatusOK, payoutQuoteResponse{PayoutQuote: q, Quote: sealed}, err)
}

type requestPayoutRequest struct {
	Quote string `json:"quote"`
	Code  string `json:"code"`
}

func (s *Server) requestPayout(c *gin.Context) {
	var req requestPayoutRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	p, err := s.RequestPayout(c.Request.Context(), customer(c), req.Quote, req.Code, c.GetHeader(IdempotencyKeyHeader))
	s.answer(c, http.StatusCreated, p, err)
}

type payoutsResponse struct {
	Payouts   []domain.Payout `json:"payouts"`
	HeldCents int64           `json:"held_cents"`
}

func (s *Server) listPayouts(c *gin.Context) {
	ps, held, err := s.CustomerPayouts(c.Request.Context(), customer(c))
	s.answer(c, http.StatusOK, payoutsResponse{Payouts: ps, HeldCents: held}, err)
}

func (s *Server) getPayout(c *gin.Context) {
	v, err := s.CustomerPayout(c.Request.Context(), customer(c), c.Param("ref"))
	s.answer(c, http.StatusOK, v, err)
}

func (s *Server) cancelPayout(c *gin.Context) {
	p, err := s.CancelPayout(c.Request.Context(), customer(c), c.Param("ref"))
	s.answer(c, http.StatusOK, p, err)
}

func (s *Server) supportListPayouts(c *gin.Context) {
	ps, err := s.SupportPayouts(c.Request.Context(), agentOf(c), domain.PayoutStatus(c.Query("status")))
	s.answer(c, http.StatusOK, gin.H{"payouts": ps}, err)
}

func (s *Server) supportApprovePayout(c *gin.Context) {
	p, err := s.ApprovePayout(c.Request.Context(), agentOf(c), c.Param("ref"))
	s.answer(c, http.StatusOK, p, err)
}

func (s *Server) supportDeclinePayout(c *gin.Context) {
	var req reasonRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	p, err := s.DeclinePayout(c.Request.Context(), agentOf(c), c.Param("ref"), req.Reason)
	s.answer(c, http.StatusOK, p, err)
}

type openBatchRequest struct {
	Network string `json:"network"`
	Asset   string `json:"asset"`
}

func (s *Server) supportOpenBatch(c *gin.Context) {
	var req openBatchRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	v, err := s.OpenPayoutBatch(c.Request.Context(), agentOf(c), req.Network, req.Asset)
	s.answer(c, http.StatusCreated, v, err)
}

func (s *Server) supportGetBatch(c *gin.Context) {
	v, err := s.PayoutBatch(c.Request.Context(), agentOf(c), c.Param("ref"))
	s.answer(c, http.StatusOK, v, err)
}

type signedBatchRequest struct {
	// Transaction is the signed transaction (hex) or finalized PSBT
	// (base64) of a BTC or LTC batch; empty for a transfer list sent.
	Transaction string `json:"transaction"`
}

func (s *Server) supportSignedBatch(c *gin.Context) {
	var req signedBatchRequest
	if err := s.decodeJSON(c, &req, true); err != nil {
		s.fail(c, err)
		return
	}
	v, err := s.SubmitSignedBatch(c.Request.Context(), agentOf(c), c.Param("ref"), req.Transaction)
	s.answer(c, http.StatusOK, v, err)
}
