package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/memo"
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
	rec, err := s.stores.Orders.OwnerOrder(ctx, ref, accountID)
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
	o, err := s.stores.Orders.OrderForAccount(c.Request.Context(), c.Param("ref"), account(c).ID)
	if err != nil {
		s.fail(c, notFoundAs(err, errOrderNotFound))
		return domain.Order{}, false
	}
	return o, true
}

func (s *Server) createOrder(c *gin.Context) {
	var req orderRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	d, err := s.CreateOrder(c.Request.Context(), customer(c), req)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", "/v1/orders/"+d.Order.Ref)
	c.JSON(http.StatusCreated, d)
}

// OrderRequest is a configuration to order, with the customer's SSH
// public key (optional).
type OrderRequest = orderRequest

// CreateOrder prices and records the caller's order (within their unpaid
// orders' limit) and starts its workflow.
func (s *Server) CreateOrder(ctx context.Context, me *Customer, req OrderRequest) (OrderDetail, error) {
	if err := s.WorkflowsReady(ctx); err != nil {
		return orderDetail{}, err
	}
	q, err := s.price(ctx, req.configuration())
	if err != nil {
		return orderDetail{}, err
	}
	if q.SSHPublicKey, err = validSSHKey(req.SSHPublicKey); err != nil {
		return orderDetail{}, err
	}
	// An order takes one whole host: a size no host has is refused here,
	// before anything is written or paid.
	if s.availability != nil {
		if err := s.availability.CheckFits(ctx, q.Model, q.TotalGPUs, q.GPUsPerLot); err != nil {
			return orderDetail{}, err
		}
	}
	o, err := s.stores.Quotas.CreateOrderLimited(ctx, me.Account.ID, q.Quote, s.unpaidOrdersLimit())
	if err != nil {
		return orderDetail{}, err
	}
	// The answer does not wait for the workflow's start: read meanwhile.
	var (
		d    orderDetail
		read = make(chan error, 1)
	)
	go func() {
		var err error
		d, err = s.orderDetail(ctx, o.Ref, o.AccountID)
		read <- err
	}()
	s.startRental(ctx, o)
	return d, <-read
}

// startRental starts the order's workflow and marks it started. A failure
// is logged only: the order exists and the reconciler starts it later.
func (s *Server) startRental(ctx context.Context, o domain.Order) {
	ctx, cancel := s.wfCtx(ctx)
	defer cancel()
	if err := s.wf.StartRental(ctx, workflows.NewRentalInput(o, s.cfg.Rental)); err != nil {
		s.log.Warn("rental workflow not started; the reconciler will retry", "ref", o.Ref, "err", err)
		return
	}
	if err := s.stores.Orders.MarkOrderWorkflowStarted(ctx, o.Ref); err != nil {
		s.log.Warn("rental workflow started but not marked", "ref", o.Ref, "err", err)
	}
}

func (s *Server) listOrders(c *gin.Context) {
	views, err := s.Orders(c.Request.Context(), customer(c))
	if err != nil {
		s.fail(c, err)
		return
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
	so, err := s.stores.Orders.SessionOrder(c.Request.Context(), tokenHash(token), c.Param("ref"))
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
	s.answerMemo(c, "order", s.detail(so.Order))
}

// memoAnswers bounds the JSON answers remembered (an order's is 5-10 KB).
const memoAnswers = 2000

// answerMemo answers 200 with v in JSON as c.JSON does, encoded once per
// value: an order read again unchanged, its most frequent read, skips the
// encoding (a third of its cost), a digest of every field standing for it
// (package memo).
func (s *Server) answerMemo(c *gin.Context, name string, v any) {
	k, ok := memo.Digest(name, v)
	if ok {
		if b, hit := s.answers.Get(k); hit {
			c.Data(http.StatusOK, "application/json; charset=utf-8", b)
			return
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.fail(c, err)
		return
	}
	if ok {
		s.answers.Put(k, b)
	}
	c.Data(http.StatusOK, "application/json; charset=utf-8", b)
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
	d, err := s.CancelOrder(c.Request.Context(), customer(c), c.Param("ref"), req.Reason)
	s.answer(c, http.StatusOK, d, err)
}

func (s *Server) payFromBalance(c *gin.Context) {
	var req struct{}
	if err := s.decodeJSON(c, &req, true); err != nil {
		s.fail(c, err)
		return
	}
	d, err := s.PayFromBalance(c.Request.Context(), customer(c), c.Param("ref"))
	s.answer(c, http.StatusOK, d, err)
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
	created, err := s.CreateSupportRequest(c.Request.Context(), customer(c), c.Param("ref"), in)
	s.answer(c, http.StatusCreated, created, err)
}

func (s *Server) listSupportRequests(c *gin.Context) {
	reqs, err := s.SupportRequests(c.Request.Context(), customer(c), c.Param("ref"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"support_requests": reqs})
}
