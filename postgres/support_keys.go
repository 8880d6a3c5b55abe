package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

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
// answered, if any); comparing the requests is the caller's.
func (db *DB) InsertKeyedSupportAction(ctx context.Context, a domain.SupportAction, key string) (domain.KeyedSupportAction, bool, error) {
	params := []byte(a.Params)
	if len(params) == 0 {
		params = []byte("{}")
	}
	var out domain.KeyedSupportAction
	// ON CONFLICT waits for a concurrent insert of the same key to commit:
	// one of two requests sent at once inserts, the other finds its row.
	err := db.GetContext(ctx, &out.SupportAction, `
		INSERT INTO support_actions (agent, action, target_ref, reason, params, idempotency_key)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (agent, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
		RETURNING `+supportActionColumnList,
		a.Agent, a.Action, a.TargetRef, a.Reason, string(params), key)
	switch {
	case err == nil:
		return out, true, nil
	case !errors.Is(err, sql.ErrNoRows):
		return out, false, fmt.Errorf("insert keyed support action: %w", err)
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
