package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/kernodeck/kernodeck/domain"
)

// Support action outcomes.
const (
	OutcomeDone     = "done"
	OutcomeRejected = "rejected"
	OutcomeFailed   = "failed"
)

const supportActionColumnList = `id, agent, action, target_ref, reason, params, outcome, detail, created_at, done_at,
	money_cents, needs_approval, reviewed_by, review_reason, approved, reviewed_at`

const supportRequestColumnList = `id, order_ref, account_id, message, launch_command, versions, first_error, status, created_at`

// InsertSupportAction records a support agent's action before it is carried
// out, and returns its ID (the idempotency key handed to the workflow).
func (db *DB) InsertSupportAction(ctx context.Context, a domain.SupportAction) (int64, error) {
	params := []byte(a.Params)
	if len(params) == 0 {
		params = []byte("{}")
	}
	var id int64
	if err := db.GetContext(ctx, &id, `
		INSERT INTO support_actions (agent, action, target_ref, reason, params)
		VALUES ($1, $2, $3, $4, $5) RETURNING id`,
		a.Agent, a.Action, a.TargetRef, a.Reason, string(params)); err != nil {
		return 0, fmt.Errorf("insert support action: %w", err)
	}
	return id, nil
}

// CompleteSupportAction writes the outcome (done, rejected or failed) and its
// detail, once: a trigger refuses any other change, and a second outcome is
// a conflict.
func (db *DB) CompleteSupportAction(ctx context.Context, id int64, outcome, detail string) (domain.SupportAction, error) {
	return db.completeSupportAction(ctx, id, outcome, detail, nil)
}

// completeSupportAction writes the outcome, its detail and the answer's
// error (JSON text, or nil: NULL).
func (db *DB) completeSupportAction(ctx context.Context, id int64, outcome, detail string, answer any) (domain.SupportAction, error) {
	var a domain.SupportAction
	err := db.GetContext(ctx, &a, `
		UPDATE support_actions SET outcome = $2, detail = $3, answer_error = $4::jsonb, done_at = now()
		WHERE id = $1 RETURNING `+supportActionColumnList, id, outcome, detail, answer)
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && pqErr.Code == "P0001" { // raised by support_actions_guard
		return domain.SupportAction{}, domain.Errorf(domain.ECodeConflict, "Le résultat de cette action est déjà enregistré.")
	}
	if err != nil {
		return domain.SupportAction{}, fmt.Errorf("complete support action %d: %w", id, notFound(err))
	}
	return a, nil
}

// SupportAction returns one support action.
func (db *DB) SupportAction(ctx context.Context, id int64) (domain.SupportAction, error) {
	var a domain.SupportAction
	if err := db.GetContext(ctx, &a, `SELECT `+supportActionColumnList+` FROM support_actions WHERE id = $1`, id); err != nil {
		return domain.SupportAction{}, fmt.Errorf("support action %d: %w", id, notFound(err))
	}
	return a, nil
}

// ListSupportActions returns the support actions on an order or top-up, oldest first.
func (db *DB) ListSupportActions(ctx context.Context, targetRef string) ([]domain.SupportAction, error) {
	actions := []domain.SupportAction{}
	if err := db.SelectContext(ctx, &actions, `SELECT `+supportActionColumnList+` FROM support_actions
		WHERE target_ref = $1 ORDER BY id`, targetRef); err != nil {
		return nil, fmt.Errorf("list support actions: %w", err)
	}
	return actions, nil
}

// CreateSupportRequest records a customer's request for help on an order.
// Ownership of the order is the caller's check.
func (db *DB) CreateSupportRequest(ctx context.Context, r domain.SupportRequest) (domain.SupportRequest, error) {
	var out domain.SupportRequest
	if err := insertSupportRequest(ctx, db, r, &out); err != nil {
		return domain.SupportRequest{}, err
	}
	return out, nil
}

func insertSupportRequest(ctx context.Context, q sqlx.QueryerContext, r domain.SupportRequest, out *domain.SupportRequest) error {
	if err := sqlx.GetContext(ctx, q, out, `
		INSERT INTO support_requests (order_ref, account_id, message, launch_command, versions, first_error)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+supportRequestColumnList,
		r.OrderRef, r.AccountID, r.Message, r.LaunchCommand, r.Versions, r.FirstError); err != nil {
		return fmt.Errorf("create support request: %w", err)
	}
	return nil
}

// ListSupportRequests returns the support requests on an order, oldest
// first: those of accountID, or all of them when accountID is 0 (support).
func (db *DB) ListSupportRequests(ctx context.Context, orderRef string, accountID int64) ([]domain.SupportRequest, error) {
	reqs := []domain.SupportRequest{}
	// Prepared: the order's page reads it each time.
	st, err := db.prepared(ctx, `SELECT `+supportRequestColumnList+` FROM support_requests
		WHERE order_ref = $1 AND ($2::bigint = 0 OR account_id = $2) ORDER BY id`)
	if err == nil {
		err = st.SelectContext(ctx, &reqs, orderRef, accountID)
	}
	if err != nil {
		return nil, fmt.Errorf("list support requests: %w", err)
	}
	return reqs, nil
}
