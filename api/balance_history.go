package api

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// maxBalanceHistory bounds the history returned (newest first).
const maxBalanceHistory = 200

// BalanceHistoryStore lists the movements of a customer's balance.
type BalanceHistoryStore interface {
	BalanceHistory(ctx context.Context, accountID int64, limit int) ([]domain.BalanceMovement, error)
}

func (s *Server) getBalanceHistory(c *gin.Context) {
	moves, err := s.BalanceHistory(c.Request.Context(), customer(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"movements": moves})
}
