package api

import (
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
	es, err := s.SupportExceptions(c.Request.Context(), agentOf(c))
	s.answer(c, http.StatusOK, gin.H{"exceptions": es}, err)
}

var errExceptionNotFound = &domain.Error{Code: domain.ECodeNotFound, Message: "Montant en attente introuvable."}

// exceptionBody is what support sends about a queued amount.
type exceptionBody struct {
	Reason      string `json:"reason"`
	AmountCents int64  `json:"amount_cents"`
	// ReturnedOnChain (value only): sent back on chain, closed with no value.
	ReturnedOnChain bool `json:"returned_on_chain"`
}

// supportException answers act on the :id queued amount with the body's
// reason and amount.
func (s *Server) supportException(c *gin.Context,
	act func(ctx context.Context, a *Agent, key string, id int64, in ActionInput) (ActionOutcome, error)) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		s.fail(c, errExceptionNotFound)
		return
	}
	var req exceptionBody
	if !s.decodeAction(c, &req) {
		return
	}
	out, err := act(c.Request.Context(), agentOf(c), keyOf(c), id,
		ActionInput{Reason: req.Reason, AmountCents: req.AmountCents, ReturnedOnChain: req.ReturnedOnChain})
	s.answerAction(c, out, err)
}

// supportRefundException refunds all (amount 0 or absent) or part of a
// queued amount to the customer's balance.
func (s *Server) supportRefundException(c *gin.Context) { s.supportException(c, s.RefundException) }

// supportResolveException closes a reverted payment's flag.
func (s *Server) supportResolveException(c *gin.Context) { s.supportException(c, s.ResolveException) }

// supportCountException counts a queued amount toward its order or top-up.
func (s *Server) supportCountException(c *gin.Context) { s.supportException(c, s.CountException) }

// supportValueException states, once, the USD value of a queued amount
// received in another asset; returned_on_chain closes it with no value.
func (s *Server) supportValueException(c *gin.Context) { s.supportException(c, s.ValueException) }

// supportFind finds orders and top-ups by reference, customer email, txid
// or payment address (?q=).
func (s *Server) supportFind(c *gin.Context) {
	found, err := s.FindCases(c.Request.Context(), agentOf(c), c.Query("q"))
	s.answer(c, http.StatusOK, gin.H{"results": found}, err)
}
