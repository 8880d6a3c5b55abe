package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

const topUpColumnList = `ref, account_id, amount_cents, status, credited_at, workflow_id,
	workflow_started_at, created_at, updated_at, COALESCE(received_cents, 0) AS received_cents, extension_ref,
	(SELECT e.order_ref FROM rental_extensions e WHERE e.ref = topups.extension_ref) AS extension_order_ref,
	COALESCE((SELECT e.state FROM rental_extensions e WHERE e.ref = topups.extension_ref), '') AS extension_state`

// CreateTopUp inserts a top-up awaiting payment, with its "created" timeline
// event, in one transaction. The amount must be one of the offered amounts
// (the schema refuses any other).
func (db *DB) CreateTopUp(ctx context.Context, accountID, amountCents int64) (domain.TopUp, error) {
	return db.createTopUp(ctx, accountID, amountCents, nil)
}

// createTopUp is CreateTopUp; check, if set, runs first in the top-up's
// transaction and may refuse it (a quota).
func (db *DB) createTopUp(ctx context.Context, accountID, amountCents int64, check func(*sqlx.Tx) error) (domain.TopUp, error) {
	data, err := json.Marshal(map[string]any{"amount_cents": amountCents})
	if err != nil {
		return domain.TopUp{}, fmt.Errorf("create top-up: %w", err)
	}
	for attempt := 1; ; attempt++ {
		ref := domain.NewRef(domain.TopUpRefPrefix)
		var t domain.TopUp
		err := db.inTx(ctx, func(tx *sqlx.Tx) error {
			if check != nil {
				if err := check(tx); err != nil {
					return err
				}
			}
			if err := tx.GetContext(ctx, &t, `
				INSERT INTO topups (ref, account_id, amount_cents, status, workflow_id)
				VALUES ($1, $2, $3, $4, $5)
				RETURNING `+topUpColumnList,
				ref, accountID, amountCents, domain.TopUpAwaitingPayment,
				domain.TopUpWorkflowID(ref)); err != nil {
				return err
			}
			msg := fmt.Sprintf("Recharge de %s USD enregistrée. En attente du règlement ; le solde sera crédité après confirmation du paiement.",
				domain.FormatUSD(amountCents))
			return insertCreatedEvent(ctx, tx, ref, msg, data)
		})
		if isUniqueViolation(err) && attempt < refAttempts {
			continue
		}
		if err != nil {
			return domain.TopUp{}, fmt.Errorf("create top-up: %w", err)
		}
		return t, nil
	}
}

// GetTopUp returns a top-up by reference, or ErrNotFound.
func (db *DB) GetTopUp(ctx context.Context, ref string) (domain.TopUp, error) {
	var t domain.TopUp
	if err := db.GetContext(ctx, &t, `SELECT `+topUpColumnList+` FROM topups WHERE ref = $1`, ref); err != nil {
		return domain.TopUp{}, fmt.Errorf("top-up %s: %w", ref, notFound(err))
	}
	return t, nil
}

// TopUpForAccount returns the top-up if accountID owns it, ErrNotFound
// otherwise.
func (db *DB) TopUpForAccount(ctx context.Context, ref string, accountID int64) (domain.TopUp, error) {
	var t domain.TopUp
	if err := db.GetContext(ctx, &t, `SELECT `+topUpColumnList+` FROM topups
		WHERE ref = $1 AND account_id = $2`, ref, accountID); err != nil {
		return domain.TopUp{}, fmt.Errorf("top-up %s: %w", ref, notFound(err))
	}
	return t, nil
}

// ListTopUps returns an account's top-ups, newest first.
func (db *DB) ListTopUps(ctx context.Context, accountID int64) ([]domain.TopUp, error) {
	topups := []domain.TopUp{}
	if err := db.SelectContext(ctx, &topups, `SELECT `+topUpColumnList+` FROM topups
		WHERE account_id = $1 ORDER BY created_at DESC, ref`, accountID); err != nil {
		return nil, fmt.Errorf("list top-ups: %w", err)
	}
	return topups, nil
}

// MarkTopUpWorkflowStarted records that the top-up's workflow was started.
func (db *DB) MarkTopUpWorkflowStarted(ctx context.Context, ref string) error {
	return db.markStarted(ctx, "topups", "top-up", ref)
}

// UnstartedTopUps returns top-ups created more than olderThan ago whose
// workflow was never marked started, oldest first (at most 500 per call).
func (db *DB) UnstartedTopUps(ctx context.Context, olderThan time.Duration) ([]domain.TopUp, error) {
	topups := []domain.TopUp{}
	if err := db.SelectContext(ctx, &topups, `SELECT `+topUpColumnList+` FROM topups
		WHERE workflow_started_at IS NULL AND created_at < now() - make_interval(secs => $1)
		ORDER BY created_at LIMIT $2`, olderThan.Seconds(), unstartedLimit); err != nil {
		return nil, fmt.Errorf("unstarted top-ups: %w", err)
	}
	return topups, nil
}
