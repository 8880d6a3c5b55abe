package api

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
)

func (s *Server) supportOpenRequests(c *gin.Context) {
	reqs, err := s.OpenSupportRequests(c.Request.Context(), agentOf(c))
	s.answer(c, http.StatusOK, gin.H{"support_requests": reqs}, err)
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
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		id = 0 // not found
	}
	r, err := s.AnswerSupportRequest(c.Request.Context(), agentOf(c), id, in.Message)
	s.answer(c, http.StatusOK, gin.H{"support_request": r}, err)
}
