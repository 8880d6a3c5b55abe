package api

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// orderView is an order with its amounts also as USD strings.
type orderView struct {
	domain.Order
	LotUSD      string `json:"lot_price_usd"`
	TotalUSD    string `json:"total_usd"`
	PaidUSD     string `json:"paid_usd"`
	RefundedUSD string `json:"refunded_usd"`
}

func viewOrder(o domain.Order) orderView {
	return orderView{Order: o, LotUSD: domain.FormatUSD(o.LotCents), TotalUSD: domain.FormatUSD(o.TotalCents),
		PaidUSD: domain.FormatUSD(o.PaidCents), RefundedUSD: domain.FormatUSD(o.RefundedCents)}
}

// orderDetail is what the owner sees of an order: the order, its whole
// timeline, and the access information once the machine is ready.
type orderDetail struct {
	Order    orderView              `json:"order"`
	Timeline []domain.TimelineEvent `json:"timeline"`
	Access   *domain.Access         `json:"access,omitempty"`
	// PaymentIntents are the order's payment requests, newest first, each
	// with its status; expired ones stay in the history.
	PaymentIntents []intentView `json:"payment_intents"`
	// MachineHold, while the order is unpaid, says whether a machine is
	// held for it and until when (read live from its capacity hold).
	MachineHold *domain.MachineHold `json:"machine_hold,omitempty"`
}

// orderDetail reads the order ref of accountID with everything its owner
// sees, in one store call (one round trip).
func (s *Server) orderDetail(ctx context.Context, ref string, accountID int64) (orderDetail, error) {
	rec, err := s.store.OwnerOrder(ctx, ref, accountID)
	if err != nil {
		return orderDetail{}, notFoundAs(err, errOrderNotFound)
	}
	return s.detail(rec), nil
}

// detail is an order record as its owner sees it.
func (s *Server) detail(rec domain.OrderRecord) orderDetail {
	d := orderDetail{Order: viewOrder(rec.Order), Timeline: customerTimeline(rec.Timeline),
		PaymentIntents: s.viewIntents(rec.Intents, rec.Payments), Access: rec.Access, MachineHold: rec.MachineHold}
	if d.Access != nil && d.Access.RevokedAt != nil {
		// Revoked: the secrets are of no use any more.
		d.Access.Password, d.Access.PrivateKey, d.Access.JupyterToken = "", "", ""
	}
	return d
}

// ownOrder loads the caller's order named in the path, or fails with 404.
func (s *Server) ownOrder(c *gin.Context) (domain.Order, bool) {
	o, err := s.store.OrderForAccount(c.Request.Context(), c.Param("ref"), account(c).ID)
	if err != nil {
		s.fail(c, notFoundAs(err, errOrderNotFound))
		return domain.Order{}, false
	}
	return o, true
}

// workflowCtx detaches a workflow call from the client's connection (a
// started update should complete and be answered to the log) and bounds it.
func (s *Server) workflowCtx(c *gin.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(c.Request.Context()), s.cfg.WorkflowTimeout)
}

func (s *Server) createOrder(c *gin.Context) {
	var req orderRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	q, err := s.price(c.Request.Context(), req.configuration())
	if err != nil {
		s.fail(c, err)
		return
	}
	if q.SSHPublicKey, err = validSSHKey(req.SSHPublicKey); err != nil {
		s.fail(c, err)
		return
	}
	// An order takes one whole host: a size no host has is refused here,
	// before anything is written or paid.
	if st, ok := s.store.(availabilityStore); ok {
		if err := st.CheckFits(c.Request.Context(), q.Model, q.TotalGPUs, q.GPUsPerLot); err != nil {
			s.fail(c, err)
			return
		}
	}
	o, err := s.store.CreateOrderLimited(c.Request.Context(), account(c).ID, q.Quote, s.unpaidOrdersLimit())
	if err != nil {
		s.fail(c, err)
		return
	}
	// The answer does not wait for the workflow's start: read meanwhile.
	var (
		d    orderDetail
		read = make(chan error, 1)
	)
	go func() {
		var err error
		d, err = s.orderDetail(c.Request.Context(), o.Ref, o.AccountID)
		read <- err
	}()
	s.startRental(c, o)
	if err := <-read; err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", "/v1/orders/"+o.Ref)
	c.JSON(http.StatusCreated, d)
}

// startRental starts the order's workflow and marks it started. A failure
// is logged only: the order exists and the reconciler starts it later.
func (s *Server) startRental(c *gin.Context, o domain.Order) {
	ctx, cancel := s.workflowCtx(c)
	defer cancel()
	if err := s.wf.StartRental(ctx, workflows.NewRentalInput(o, s.cfg.Rental)); err != nil {
		s.log.Warn("rental workflow not started; the reconciler will retry", "ref", o.Ref, "err", err)
		return
	}
	if err := s.store.MarkOrderWorkflowStarted(ctx, o.Ref); err != nil {
		s.log.Warn("rental workflow started but not marked", "ref", o.Ref, "err", err)
	}
}

func (s *Server) listOrders(c *gin.Context) {
	orders, err := s.store.ListOrders(c.Request.Context(), account(c).ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	views := make([]orderView, len(orders))
	for i, o := range orders {
		views[i] = viewOrder(o)
	}
	c.JSON(http.StatusOK, gin.H{"orders": views})
}

// getOrder, the most frequent request, checks its session (customerAuth's
// rules; a GET needs no CSRF token) in the same statement as the read.
func (s *Server) getOrder(c *gin.Context) {
	token, viaCookie := s.sessionToken(c.Request)
	if token == "" {
		s.fail(c, errSessionRequired)
		return
	}
	so, err := s.store.SessionOrder(c.Request.Context(), tokenHash(token), c.Param("ref"))
	if domain.ErrorCode(err) == domain.ECodeNotFound {
		// No valid session, or not the account's order: the session
		// check alone says which.
		if s.authenticate(c, token, viaCookie) {
			s.fail(c, errOrderNotFound)
		}
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, s.detail(so.Order))
}

// respondOrder answers with the order's fresh detail after a workflow call.
func (s *Server) respondOrder(c *gin.Context, ref string) {
	d, err := s.orderDetail(c.Request.Context(), ref, account(c).ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, d)
}

type cancelRequest struct {
	Reason string `json:"reason"`
}

func (s *Server) cancelOrder(c *gin.Context) {
	var req cancelRequest
	if err := s.decodeJSON(c, &req, true); err != nil {
		s.fail(c, err)
		return
	}
	reason, err := text("reason", req.Reason, 0, 2000, "La raison fait 2000 caractères au plus.")
	if err != nil {
		s.fail(c, err)
		return
	}
	o, ok := s.ownOrder(c)
	if !ok {
		return
	}
	ctx, cancel := s.workflowCtx(c)
	defer cancel()
	if err := s.wf.CancelOrder(ctx, o.Ref, workflows.CancelRequest{By: "customer", Reason: reason}); err != nil {
		s.fail(c, s.workflowError(ctx, "cancel order", o.Ref, err))
		return
	}
	s.respondOrder(c, o.Ref)
}

func (s *Server) payFromBalance(c *gin.Context) {
	var req struct{}
	if err := s.decodeJSON(c, &req, true); err != nil {
		s.fail(c, err)
		return
	}
	o, ok := s.ownOrder(c)
	if !ok {
		return
	}
	// A balance that cannot cover the order is refused here, with the
	// store's code and message, so the refusal writes no workflow history
	// (the debit itself stays checked in its transaction).
	if o.Status == domain.StatusAwaitingPayment || o.Status == domain.StatusPaymentDetected {
		b, err := s.store.Balance(c.Request.Context(), o.AccountID)
		if err != nil {
			s.fail(c, err)
			return
		}
		if err := domain.CheckBalance(b.AvailableCents, o.TotalCents-o.PaidCents+o.RefundedCents); err != nil {
			s.fail(c, err)
			return
		}
	}
	ctx, cancel := s.workflowCtx(c)
	defer cancel()
	if err := s.wf.PayFromBalance(ctx, o.Ref); err != nil {
		s.fail(c, s.workflowError(ctx, "pay from balance", o.Ref, err))
		return
	}
	s.respondOrder(c, o.Ref)
}

type supportRequestInput struct {
	Message       string `json:"message"`
	LaunchCommand string `json:"launch_command"`
	Versions      string `json:"versions"`
	FirstError    string `json:"first_error"`
}

func (in supportRequestInput) validate() (domain.SupportRequest, error) {
	var (
		r   domain.SupportRequest
		err error
	)
	if r.Message, err = text("message", in.Message, 1, 10000,
		"Décrivez le problème (10 000 caractères au plus)."); err != nil {
		return r, err
	}
	if r.LaunchCommand, err = text("launch_command", in.LaunchCommand, 0, 4000,
		"La commande de lancement fait 4 000 caractères au plus."); err != nil {
		return r, err
	}
	if r.Versions, err = text("versions", in.Versions, 0, 4000,
		"Les versions font 4 000 caractères au plus."); err != nil {
		return r, err
	}
	if r.FirstError, err = text("first_error", in.FirstError, 0, 20000,
		"La première erreur fait 20 000 caractères au plus."); err != nil {
		return r, err
	}
	return r, nil
}

func (s *Server) createSupportRequest(c *gin.Context) {
	var in supportRequestInput
	if err := s.decodeJSON(c, &in, false); err != nil {
		s.fail(c, err)
		return
	}
	r, err := in.validate()
	if err != nil {
		s.fail(c, err)
		return
	}
	o, ok := s.ownOrder(c)
	if !ok {
		return
	}
	r.OrderRef, r.AccountID = o.Ref, o.AccountID
	perAccount, perOrder := s.supportLimits()
	created, err := s.store.CreateSupportRequestLimited(c.Request.Context(), r, perAccount, perOrder)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, created)
}

func (s *Server) listSupportRequests(c *gin.Context) {
	o, ok := s.ownOrder(c)
	if !ok {
		return
	}
	reqs, err := s.store.ListSupportRequests(c.Request.Context(), o.Ref, o.AccountID)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"support_requests": reqs})
}
