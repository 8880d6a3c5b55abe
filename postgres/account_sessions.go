package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// activityKept is how many activity entries an account keeps (the newest).
const activityKept = 200

// AccountSessions lists accountID's open sessions, the most recently used
// first; current (a token hash) is marked as the request's own.
func (db *DB) AccountSessions(ctx context.Context, accountID int64, current []byte) ([]domain.Session, error) {
	out := []domain.Session{}
	if err := db.SelectContext(ctx, &out, `
		SELECT s.id, s.token_hash = $2 AS current, s.user_agent, s.client_ip, s.created_at, s.last_used_at, s.expires_at
		FROM sessions s WHERE s.account_id = $1 AND `+liveSession+`
		ORDER BY s.token_hash = $2 DESC, s.last_used_at DESC, s.id DESC`, accountID, current); err != nil {
		return nil, fmt.Errorf("sessions of account %d: %w", accountID, err)
	}
	for i := range out {
		out[i].Device = domain.DeviceLabel(out[i].UserAgent)
	}
	return out, nil
}

// EndSession ends session id of accountID (its next request asks to sign
// in again) and records it in the account's activity, as done from client;
// wasCurrent says it was current (a token hash), the caller's own. A
// session that is not one of the account's open sessions gives
// domain.ErrSessionNotFound and changes nothing.
func (db *DB) EndSession(ctx context.Context, accountID, id int64, current []byte, client domain.SessionClient) (wasCurrent bool, err error) {
	err = db.inTx(ctx, func(tx *sqlx.Tx) error {
		var gone []bool
		if err := tx.SelectContext(ctx, &gone, `DELETE FROM sessions s
			WHERE s.account_id = $1 AND s.id = $2 AND `+liveSession+` RETURNING s.token_hash = $3`,
			accountID, id, current); err != nil {
			return fmt.Errorf("end session: %w", err)
		}
		if len(gone) == 0 {
			return domain.ErrSessionNotFound
		}
		wasCurrent = gone[0]
		return recordActivity(ctx, tx, accountID, domain.ActivitySessionEnded, client)
	})
	return wasCurrent, err
}

// EndOtherSessions ends every session of accountID but keep (a token
// hash) and returns how many were open.
func (db *DB) EndOtherSessions(ctx context.Context, accountID int64, keep []byte, client domain.SessionClient) (int64, error) {
	var n int64
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		if n, err = endOtherSessions(ctx, tx, accountID, keep); err != nil {
			return err
		}
		return recordActivity(ctx, tx, accountID, domain.ActivitySessionsEnded, client)
	})
	return n, err
}

// endOtherSessions deletes accountID's sessions but keep, and counts the
// open ones among them.
func endOtherSessions(ctx context.Context, tx *sqlx.Tx, accountID int64, keep []byte) (int64, error) {
	var n int64
	err := tx.GetContext(ctx, &n, `WITH gone AS (
			DELETE FROM sessions s WHERE s.account_id = $1 AND s.token_hash <> $2
			RETURNING `+liveSession+` AS live)
		SELECT count(*) FILTER (WHERE live) FROM gone`, accountID, keep)
	if err != nil {
		return 0, fmt.Errorf("end other sessions of account %d: %w", accountID, err)
	}
	return n, nil
}

// PasswordHash is accountID's encoded password hash.
func (db *DB) PasswordHash(ctx context.Context, accountID int64) (string, error) {
	var h string
	if err := db.GetContext(ctx, &h, `SELECT password_hash FROM accounts WHERE id = $1`, accountID); err != nil {
		return "", fmt.Errorf("password of account %d: %w", accountID, notFound(err))
	}
	return h, nil
}

// ChangePassword replaces accountID's password hash, if it still is
// oldHash (the one the caller checked the current password against), ends
// every other session than keep and records the change, in one
// transaction. It returns how many open sessions were ended. A hash no
// longer the account's (another change went first) gives
// domain.ErrWrongPassword and changes nothing.
func (db *DB) ChangePassword(ctx context.Context, accountID int64, oldHash, newHash string, keep []byte, client domain.SessionClient) (int64, error) {
	var n int64
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE accounts SET password_hash = $3 WHERE id = $1 AND password_hash = $2`,
			accountID, oldHash, newHash)
		if err != nil {
			return fmt.Errorf("change password of account %d: %w", accountID, err)
		}
		if k, err := res.RowsAffected(); err != nil || k == 0 {
			return domain.ErrWrongPassword
		}
		if n, err = endOtherSessions(ctx, tx, accountID, keep); err != nil {
			return err
		}
		return recordActivity(ctx, tx, accountID, domain.ActivityPasswordChanged, client)
	})
	return n, err
}

// RecordActivity adds an entry to accountID's activity (a login, a failed
// login), keeping the newest activityKept.
func (db *DB) RecordActivity(ctx context.Context, accountID int64, kind string, client domain.SessionClient) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error { return recordActivity(ctx, tx, accountID, kind, client) })
}

func recordActivity(ctx context.Context, tx *sqlx.Tx, accountID int64, kind string, client domain.SessionClient) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO account_activity (account_id, kind, user_agent, client_ip)
		VALUES ($1, $2, $3, $4)`, accountID, kind, client.UserAgent, client.IP); err != nil {
		return fmt.Errorf("record %s of account %d: %w", kind, accountID, err)
	}
	// Bounded whatever others try (failed logins): the oldest go.
	if _, err := tx.ExecContext(ctx, `DELETE FROM account_activity WHERE account_id = $1 AND id <= (
			SELECT id FROM account_activity WHERE account_id = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)`,
		accountID, activityKept); err != nil {
		return fmt.Errorf("trim activity of account %d: %w", accountID, err)
	}
	return nil
}

// AccountActivity returns accountID's newest activity entries (at most
// limit) and how many failed logins it counts since since.
func (db *DB) AccountActivity(ctx context.Context, accountID int64, limit int, since time.Time) ([]domain.AccountActivity, int, error) {
	out := []domain.AccountActivity{}
	if err := db.SelectContext(ctx, &out, `SELECT kind, user_agent, client_ip, at FROM account_activity
		WHERE account_id = $1 ORDER BY id DESC LIMIT $2`, accountID, limit); err != nil {
		return nil, 0, fmt.Errorf("activity of account %d: %w", accountID, err)
	}
	for i := range out {
		out[i].Device = domain.DeviceLabel(out[i].UserAgent)
	}
	var failed int
	if err := db.GetContext(ctx, &failed, `SELECT count(*) FROM account_activity
		WHERE account_id = $1 AND kind = $2 AND at > $3`, accountID, domain.ActivityLoginFailed, since); err != nil {
		return nil, 0, fmt.Errorf("failed logins of account %d: %w", accountID, err)
	}
	return out, failed, nil
}
