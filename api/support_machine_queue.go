package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// supportMachineQueue lists the paid orders waiting for a machine (status
// waiting_for_machine), line by line (model, then GPUs), each line in
// payment order with its position (1 = served next) and how long each has
// waited since payment: support's view of the line (add or repair a host
// of that model, or refund an order to its customer's balance).
func (s *Server) supportMachineQueue(c *gin.Context) {
	orders, err := s.MachineQueue(c.Request.Context(), agentOf(c))
	s.answer(c, http.StatusOK, gin.H{"orders": orders}, err)
}
