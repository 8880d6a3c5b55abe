package api

import (
	"cmp"
	"context"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// exceptionView is a queued received amount with what remains of it.
type exceptionView struct {
	domain.Exception
	RemainingCents int64 `json:"remaining_cents"`
}

func viewExceptions(es []domain.Exception) []exceptionView {
	out := make([]exceptionView, len(es))
	for i, e := range es {
		out[i] = exceptionView{Exception: e, RemainingCents: e.RemainingCents()}
	}
	return out
}

// supportExceptions lists every received amount not settled, oldest first.
func (s *Server) supportExceptions(c *gin.Context) {
	es, err := s.store.OpenExceptions(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"exceptions": viewExceptions(es)})
}

var errExceptionNotFound = &domain.Error{Code: domain.ECodeNotFound, Message: "Montant en attente introuvable."}

// exceptionBody is what support sends about a queued amount.
type exceptionBody struct {
	Reason      string `json:"reason"`
	AmountCents int64  `json:"amount_cents"`
	// ReturnedOnChain (value only): sent back on chain, closed with no value.
	ReturnedOnChain bool `json:"returned_on_chain"`
}

// exceptionRequest reads the :id exception and the body's amount and reason.
func (s *Server) exceptionRequest(c *gin.Context) (domain.Exception, int64, string, bool) {
	e, req, ok := s.exceptionRequestBody(c)
	return e, req.AmountCents, req.Reason, ok
}

func (s *Server) exceptionRequestBody(c *gin.Context) (domain.Exception, exceptionBody, bool) {
	var req exceptionBody
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		s.fail(c, errExceptionNotFound)
		return domain.Exception{}, req, false
	}
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return domain.Exception{}, req, false
	}
	req.Reason, err = reasonOf(req.Reason)
	if err != nil {
		s.fail(c, err)
		return domain.Exception{}, req, false
	}
	if err := (domain.ExceptionRefund{ExceptionID: id, AmountCents: req.AmountCents}).ValidateParams(); err != nil {
		s.fail(c, err)
		return domain.Exception{}, req, false
	}
	e, err := s.store.Exception(c.Request.Context(), id)
	if err != nil {
		s.fail(c, notFoundAs(err, errExceptionNotFound))
		return domain.Exception{}, req, false
	}
	return e, req, true
}

// supportRefundException refunds all (amount 0 or absent) or part of a
// queued amount to the customer's balance.
func (s *Server) supportRefundException(c *gin.Context) {
	e, amount, reason, ok := s.exceptionRequest(c)
	if !ok {
		return
	}
	// All that remains (0) moves what remains.
	s.runMoneyAction(c, e.TargetRef, domain.ActionRefundException, reason,
		map[string]any{"exception_id": e.ID, "amount_cents": amount}, cmp.Or(amount, e.RemainingCents()), false)
}

// supportResolveException closes a reverted payment's flag (not money:
// nothing to count or refund); ending the rental is end-early, apart.
func (s *Server) supportResolveException(c *gin.Context) {
	e, _, reason, ok := s.exceptionRequest(c)
	if !ok {
		return
	}
	s.runSupportActionOn(c, e.TargetRef, domain.ActionResolveException, reason,
		map[string]any{"exception_id": e.ID},
		func(ctx context.Context, id int64, agent string) error {
			return s.wf.ResolveException(ctx, e, domain.ExceptionResolve{ExceptionID: e.ID, ActionID: id, Agent: agent, Reason: reason})
		})
}

// supportCountException counts a queued amount toward its order or top-up
// (which must still await payment), at most what is due.
func (s *Server) supportCountException(c *gin.Context) {
	e, amount, reason, ok := s.exceptionRequest(c)
	if !ok {
		return
	}
	s.runMoneyAction(c, e.TargetRef, domain.ActionAttributePayment, reason,
		map[string]any{"exception_id": e.ID, "amount_cents": amount}, cmp.Or(amount, e.RemainingCents()), false)
}

// supportValueException states, once, the USD value of a queued amount
// received in another asset; returned_on_chain closes it with no value.
func (s *Server) supportValueException(c *gin.Context) {
	e, req, ok := s.exceptionRequestBody(c)
	if !ok {
		return
	}
	if req.AmountCents == 0 && !req.ReturnedOnChain {
		s.fail(c, domain.FieldError("amount_cents", "Indiquez la valeur en cents, ou returned_on_chain si le montant a été renvoyé sur la chaîne."))
		return
	}
	if req.AmountCents > 0 && req.ReturnedOnChain {
		s.fail(c, domain.FieldError("returned_on_chain", "Un montant renvoyé sur la chaîne n'a pas de valeur à indiquer."))
		return
	}
	// A value no observed rate bounds takes a second agent, whatever it is.
	unbounded := false
	if req.AmountCents > 0 {
		b, err := s.store.ValueBound(c.Request.Context(), e.ID)
		if err != nil {
			s.fail(c, err)
			return
		}
		unbounded = !b.Known
	}
	s.runMoneyAction(c, e.TargetRef, domain.ActionValueException, req.Reason,
		map[string]any{"exception_id": e.ID, "amount_cents": req.AmountCents, "returned_on_chain": req.ReturnedOnChain},
		req.AmountCents, unbounded)
}

// supportFind finds orders and top-ups by reference, customer email, txid
// or payment address (?q=).
func (s *Server) supportFind(c *gin.Context) {
	q := c.Query("q")
	if len(q) < 3 || len(q) > 200 {
		s.fail(c, domain.FieldError("q", "Indiquez une référence, un e-mail, un identifiant de transaction ou une adresse (3 à 200 caractères)."))
		return
	}
	found, err := s.store.Find(c.Request.Context(), q)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"results": found})
}
