package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

func (s *Server) supportOpenRequests(c *gin.Context) {
	reqs, err := s.store.OpenSupportRequests(c.Request.Context(), openRequestsShown)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"support_requests": reqs})
}

// openRequestsShown is how many unanswered support requests the queue
// lists (the oldest).
const openRequestsShown = 200

type supportAnswerInput struct {
	Message string `json:"message"`
}

// supportAnswer answers a customer's support request: the answer is shown on
// the order's tracking with the agent's name and mailed to the customer.
func (s *Server) supportAnswer(c *gin.Context) {
	var in supportAnswerInput
	if err := s.decodeJSON(c, &in, false); err != nil {
		s.fail(c, err)
		return
	}
	msg, err := text("message", in.Message, 1, 10000, "La réponse doit comporter de 1 à 10000 caractères.")
	if err != nil {
		s.fail(c, err)
		return
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		s.fail(c, domain.Errorf(domain.ECodeNotFound, "Demande de support introuvable."))
		return
	}
	r, err := s.store.AnswerSupportRequest(c.Request.Context(), id, c.GetString(ctxAgent), msg, time.Now())
	if err != nil {
		s.fail(c, notFoundAs(err, domain.Errorf(domain.ECodeNotFound, "Demande de support introuvable.")))
		return
	}
	c.JSON(http.StatusOK, gin.H{"support_request": r})
}
