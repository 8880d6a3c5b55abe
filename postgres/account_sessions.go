package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// activityKept is how many activity entries an account keeps (the
// newest), and failureGroupsKept how many groups of failed logins (the
// latest): each trimmed on its own, so failures never push an entry out.
const (
	activityKept      = 200
	failureGroupsKept = 200
)

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
		if err := recordActivity(ctx, tx, accountID, domain.ActivityPasswordChanged, client); err != nil {
			return err
		}
		return queueAccountMail(ctx, tx, accountID, MailPasswordChanged, time.Now())
	})
	return n, err
}

// RecordActivity adds an entry to accountID's activity (a login), keeping
// the newest activityKept. Failed logins go to RecordLoginFailure.
func (db *DB) RecordActivity(ctx context.Context, accountID int64, kind string, client domain.SessionClient) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error { return recordActivity(ctx, tx, accountID, kind, client) })
}

func recordActivity(ctx context.Context, tx *sqlx.Tx, accountID int64, kind string, client domain.SessionClient) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO account_activity (account_id, kind, user_agent, client_ip)
		VALUES ($1, $2, $3, $4)`, accountID, kind, client.UserAgent, client.IP); err != nil {
		return fmt.Errorf("record %s of account %d: %w", kind, accountID, err)
	}
	// Bounded (only the owner's own actions land here): the oldest go.
	if _, err := tx.ExecContext(ctx, `DELETE FROM account_activity WHERE account_id = $1 AND id <= (
			SELECT id FROM account_activity WHERE account_id = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)`,
		accountID, activityKept); err != nil {
		return fmt.Errorf("trim activity of account %d: %w", accountID, err)
	}
	return nil
}

// RecordLoginFailure counts a wrong password for accountID's email from
// network (a client network, see domain.ClientNetwork) in its group of the
// day (UTC), keeping the latest failureGroupsKept groups.
func (db *DB) RecordLoginFailure(ctx context.Context, accountID int64, network string, client domain.SessionClient) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO account_login_failures AS f (account_id, day, network, failures, user_agent)
			VALUES ($1, (now() AT TIME ZONE 'UTC')::date, $2, 1, $3)
			ON CONFLICT (account_id, day, network) DO UPDATE SET
				failures = f.failures + 1, last_at = now(), user_agent = EXCLUDED.user_agent`,
			accountID, network, client.UserAgent); err != nil {
			return fmt.Errorf("count login failure of account %d: %w", accountID, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM account_login_failures f WHERE f.account_id = $1
			AND (f.day, f.network) NOT IN (SELECT day, network FROM account_login_failures
				WHERE account_id = $1 ORDER BY last_at DESC LIMIT $2)`, accountID, failureGroupsKept); err != nil {
			return fmt.Errorf("trim login failures of account %d: %w", accountID, err)
		}
		return nil
	})
}

// AccountActivity returns accountID's newest activity entries (at most
// limit), its groups of failed logins whose last failure is after since
// (the latest first, at most limit), and how many failures those groups
// count.
func (db *DB) AccountActivity(ctx context.Context, accountID int64, limit int, since time.Time) ([]domain.AccountActivity, []domain.LoginFailures, int, error) {
	out := []domain.AccountActivity{}
	if err := db.SelectContext(ctx, &out, `SELECT kind, user_agent, client_ip, at FROM account_activity
		WHERE account_id = $1 ORDER BY id DESC LIMIT $2`, accountID, limit); err != nil {
		return nil, nil, 0, fmt.Errorf("activity of account %d: %w", accountID, err)
	}
	for i := range out {
		out[i].Device = domain.DeviceLabel(out[i].UserAgent)
	}
	failures := []domain.LoginFailures{}
	if err := db.SelectContext(ctx, &failures, `SELECT to_char(day, 'YYYY-MM-DD') AS day, network, failures,
			first_at, last_at, user_agent
		FROM account_login_failures WHERE account_id = $1 AND last_at > $2
		ORDER BY last_at DESC LIMIT $3`, accountID, since, limit); err != nil {
		return nil, nil, 0, fmt.Errorf("failed logins of account %d: %w", accountID, err)
	}
	var failed int
	if err := db.GetContext(ctx, &failed, `SELECT COALESCE(sum(failures), 0) FROM account_login_failures
		WHERE account_id = $1 AND last_at > $2`, accountID, since); err != nil {
		return nil, nil, 0, fmt.Errorf("failed logins of account %d: %w", accountID, err)
	}
	for i := range failures {
		failures[i].Device = domain.DeviceLabel(failures[i].UserAgent)
	}
	return out, failures, failed, nil
}
