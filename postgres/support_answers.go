package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// OpenSupportRequests lists the requests support has not answered yet,
// oldest first: the agents' queue.
func (db *DB) OpenSupportRequests(ctx context.Context, limit int) ([]domain.SupportRequest, error) {
	reqs := []domain.SupportRequest{}
	if err := db.SelectContext(ctx, &reqs, `SELECT `+supportRequestColumnList+` FROM support_requests
		WHERE status = 'open' ORDER BY id LIMIT $1`, limit); err != nil {
		return nil, fmt.Errorf("open support requests: %w", err)
	}
	return reqs, nil
}

// AnswerSupportRequest records a support agent's answer: the request is
// answered, and the answer goes on the order's tracking (and, with it, into
// the customer's mail outbox) in the same transaction.
func (db *DB) AnswerSupportRequest(ctx context.Context, id int64, agent, message string, now time.Time) (domain.SupportRequest, error) {
	var out domain.SupportRequest
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := tx.GetContext(ctx, &out, `UPDATE support_requests SET status = 'answered' WHERE id = $1
			RETURNING `+supportRequestColumnList, id); err != nil {
			return fmt.Errorf("support request %d: %w", id, notFound(err))
		}
		_, err := insertEvent(ctx, tx, out.OrderRef, fmt.Sprintf("answer:%d:%d", id, now.UnixNano()), KindSupportAnswer,
			"Réponse du support : "+message,
			map[string]any{"support_request_id": id, "agent": agent, "answer": message}, now)
		return err
	})
	return out, err
}
