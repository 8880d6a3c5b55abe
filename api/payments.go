package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	qrcode "github.com/skip2/go-qrcode"

	"github.com/kernodeck/kernodeck/domain"
)

// PaymentStore keeps payment requests and the customers' claims.
type PaymentStore interface {
	Intent(ctx context.Context, id string) (domain.Intent, error)
	IntentsFor(ctx context.Context, targetRef string) ([]domain.Intent, error)
	// ClaimPaid records the first claim on a request; a repeated one writes
	// nothing (first false).
	ClaimPaid(ctx context.Context, intentID string, accountID int64, now time.Time) (first bool, err error)
	// IntentPayments lists the payments seen for each request of a target.
	IntentPayments(ctx context.Context, targetRef string) (map[string][]domain.IntentPayment, error)
}

// MethodLister lists the payment methods that can be used now.
type MethodLister interface {
	Enabled() []domain.Method
	// Offered refuses a method not offered now, as a payment request would.
	Offered(asset, network string) (domain.Method, error)
}

var errIntentNotFound = domain.Errorf(domain.ECodeNotFound, "Demande de paiement introuvable.")

// intentView is a payment request as shown to its customer, with whether it
// has expired (a new one can then be asked for; never reuse its address).
type intentView struct {
	domain.Intent
	Expired bool `json:"expired"`
	// Payments are the payments seen on chain for it (not reverted), with
	// their confirmations out of the network's policy.
	Payments []domain.IntentPayment `json:"payments"`
}

func viewIntent(in domain.Intent, now time.Time) intentView {
	if in.Amount == "" {
		in.Amount = domain.FormatUnits(&in.AmountBase.Int, in.Decimals)
	}
	return intentView{Intent: in, Expired: in.Expired(now), Payments: []domain.IntentPayment{}}
}

func (s *Server) listMethods(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"methods": s.PaymentMethods()})
}

type intentRequest struct {
	Asset   string `json:"asset"`
	Network string `json:"network"`
}

func (s *Server) createOrderIntent(c *gin.Context) {
	var req intentRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	in, existing, err := s.CreateOrderPaymentRequest(c.Request.Context(), customer(c), c.Param("ref"), req, domain.ClientNetwork(c.ClientIP()))
	s.answerIntent(c, in, existing, err)
}

// answerIntent answers a payment request: 201 when created, 200 when a
// request still valid for the same method is answered again.
func (s *Server) answerIntent(c *gin.Context, in intentView, existing bool, err error) {
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", "/v1/payment-intents/"+in.ID)
	status := http.StatusCreated
	if existing {
		status = http.StatusOK
	}
	c.JSON(status, gin.H{"payment_intent": in})
}

func (s *Server) createTopUpIntent(c *gin.Context) {
	var req intentRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	in, existing, err := s.CreateTopUpPaymentRequest(c.Request.Context(), customer(c), c.Param("ref"), req)
	s.answerIntent(c, in, existing, err)
}

// intentViews lists a target's payment requests, newest first.
func (s *Server) intentViews(ctx context.Context, ref string) ([]intentView, error) {
	intents, err := s.stores.Payments.IntentsFor(ctx, ref)
	if err != nil {
		return nil, err
	}
	paid, err := s.stores.Payments.IntentPayments(ctx, ref)
	if err != nil {
		return nil, err
	}
	return s.viewIntents(intents, paid), nil
}

// viewIntents are payment requests with their payments seen (by request
// ID), as their customer sees them.
func (s *Server) viewIntents(intents []domain.Intent, paid map[string][]domain.IntentPayment) []intentView {
	now := time.Now()
	out := make([]intentView, len(intents))
	for i, in := range intents {
		out[i] = viewIntent(in, now)
		for _, p := range paid[in.ID] {
			p.ConfirmationsRequired = s.cfg.Confirmations[in.Network]
			out[i].Payments = append(out[i].Payments, p)
		}
	}
	return out
}

func (s *Server) listOrderIntents(c *gin.Context) {
	o, ok := s.ownOrder(c)
	if !ok {
		return
	}
	views, err := s.intentViews(c.Request.Context(), o.Ref)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"payment_intents": views})
}

func (s *Server) listTopUpIntents(c *gin.Context) {
	t, err := s.stores.TopUps.TopUpForAccount(c.Request.Context(), c.Param("ref"), account(c).ID)
	if err != nil {
		s.fail(c, notFoundAs(err, errTopUpNotFound))
		return
	}
	views, err := s.intentViews(c.Request.Context(), t.Ref)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"payment_intents": views})
}

// ownIntent loads the caller's payment request named in the path, or 404.
func (s *Server) ownIntent(c *gin.Context) (domain.Intent, bool) {
	in, err := s.stores.Payments.Intent(c.Request.Context(), c.Param("id"))
	if err != nil || in.AccountID != account(c).ID {
		if err == nil {
			err = domain.ErrNotFound
		}
		s.fail(c, notFoundAs(err, errIntentNotFound))
		return domain.Intent{}, false
	}
	return in, true
}

func (s *Server) getIntent(c *gin.Context) {
	in, ok := s.ownIntent(c)
	if !ok {
		return
	}
	c.JSON(http.StatusOK, gin.H{"payment_intent": viewIntent(in, time.Now())})
}

// claimPaid records "J'ai payé": shown on the tracking, it confirms nothing
// and asks no transaction hash.
func (s *Server) claimPaid(c *gin.Context) {
	var req struct{}
	if err := s.decodeJSON(c, &req, true); err != nil {
		s.fail(c, err)
		return
	}
	in, err := s.ClaimPaid(c.Request.Context(), customer(c), c.Param("id"))
	s.answer(c, http.StatusOK, gin.H{"payment_intent": in,
		"message": "Signalement enregistré. Il ne confirme pas la réception : le suivi se met à jour dès que le réseau confirme le paiement."}, err)
}

// intentQR is the payment URI as a QR code (PNG), for wallets.
func (s *Server) intentQR(c *gin.Context) {
	in, ok := s.ownIntent(c)
	if !ok {
		return
	}
	png, err := qrcode.Encode(in.PaymentURI, qrcode.Medium, 320)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "private, max-age=3600")
	c.Data(http.StatusOK, "image/png", png)
}
