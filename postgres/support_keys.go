package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// answerError is a refusal or failure as support_actions.answer_error
// keeps it: what the API answered.
type answerError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// InsertKeyedSupportAction records a support action sent under an
// idempotency key, before it is carried out, unless its agent sent that
// key already: inserted says which. The answer is the action recorded
// under the key (the new one, or the first one with the error it was
// answered, if any); comparing the requests is the caller's. A new action
// that moves money (MoneyCents) is refused (agent_daily_cap, nothing
// recorded) when it would take its agent's money actions of the last 24
// hours past capCents: checked and inserted under a lock of the agent, so
// actions sent at once cannot pass the cap together.
func (db *DB) InsertKeyedSupportAction(ctx context.Context, a domain.SupportAction, key string, capCents int64) (domain.KeyedSupportAction, bool, error) {
	params := []byte(a.Params)
	if len(params) == 0 {
		params = []byte("{}")
	}
	var out domain.KeyedSupportAction
	inserted := false
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		if a.MoneyCents > 0 {
			if err := lockAgent(ctx, tx, a.Agent); err != nil {
				return err
			}
			var sent bool
			if err := tx.GetContext(ctx, &sent, `SELECT EXISTS (SELECT 1 FROM support_actions
				WHERE agent = $1 AND idempotency_key = $2)`, a.Agent, key); err != nil {
				return fmt.Errorf("support action key: %w", err)
			}
			if !sent {
				if err := checkAgentCap(ctx, tx, a.Agent, a.MoneyCents, capCents); err != nil {
					return err
				}
			}
		}
		// ON CONFLICT waits for a concurrent insert of the same key to
		// commit: one of two requests sent at once inserts, the other
		// finds its row.
		err := tx.GetContext(ctx, &out.SupportAction, `
			INSERT INTO support_actions (agent, action, target_ref, reason, params, idempotency_key, money_cents, needs_approval)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (agent, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
			RETURNING `+supportActionColumnList,
			a.Agent, a.Action, a.TargetRef, a.Reason, string(params), key, a.MoneyCents, a.NeedsApproval)
		if err == nil {
			inserted = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("insert keyed support action: %w", err)
		}
		return nil
	})
	if err != nil || inserted {
		return out, inserted, err
	}
	var row struct {
		domain.SupportAction
		Answer []byte `db:"answer_error"`
	}
	if err := db.GetContext(ctx, &row, `SELECT `+supportActionColumnList+`, answer_error FROM support_actions
		WHERE agent = $1 AND idempotency_key = $2`, a.Agent, key); err != nil {
		return out, false, fmt.Errorf("support action under key: %w", err)
	}
	out.SupportAction = row.SupportAction
	if len(row.Answer) > 0 {
		var e answerError
		if err := json.Unmarshal(row.Answer, &e); err != nil {
			return out, false, fmt.Errorf("support action %d: answer: %w", row.ID, err)
		}
		out.Answer = &domain.Error{Code: e.Code, Message: e.Message, Field: e.Field}
	}
	return out, false, nil
}

// CompleteSupportActionAnswer is CompleteSupportAction that also keeps
// the error the action was answered (nil: none), so that its key sent
// again gets the same answer.
func (db *DB) CompleteSupportActionAnswer(ctx context.Context, id int64, outcome, detail string, answer *domain.Error) (domain.SupportAction, error) {
	var raw any // NULL
	if answer != nil {
		b, err := json.Marshal(answerError{Code: answer.Code, Message: answer.Message, Field: answer.Field})
		if err != nil {
			return domain.SupportAction{}, err
		}
		raw = string(b)
	}
	return db.completeSupportAction(ctx, id, outcome, detail, raw)
}
