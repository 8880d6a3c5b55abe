package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// errEmailTaken is what a duplicate registration gets. Its message is the
// same whoever owns the address: nothing of the existing account leaks.
var errEmailTaken = &domain.Error{
	Code:    domain.ECodeEmailTaken,
	Message: "Cette adresse email ne peut pas être utilisée pour créer un compte. Si vous avez déjà un compte, connectez-vous.",
	Field:   "email",
}

const accountColumnList = `id, first_name, last_name, email, created_at`

// CreateAccount inserts a customer account. passwordHash is the encoded
// argon2id hash (hashing is the caller's job). An email already registered,
// compared case-insensitively, gives a domain error ECodeEmailTaken.
func (db *DB) CreateAccount(ctx context.Context, a domain.Account, passwordHash string) (domain.Account, error) {
	var out domain.Account
	err := db.GetContext(ctx, &out, `
		INSERT INTO accounts (first_name, last_name, email, password_hash)
		VALUES ($1, $2, $3, $4)
		RETURNING `+accountColumnList,
		a.FirstName, a.LastName, strings.TrimSpace(a.Email), passwordHash)
	if isUniqueViolation(err) {
		return domain.Account{}, errEmailTaken
	}
	if err != nil {
		return domain.Account{}, fmt.Errorf("create account: %w", err)
	}
	return out, nil
}

// Account returns the account with that ID.
func (db *DB) Account(ctx context.Context, id int64) (domain.Account, error) {
	var a domain.Account
	err := db.GetContext(ctx, &a, `SELECT `+accountColumnList+` FROM accounts WHERE id = $1`, id)
	if err != nil {
		return domain.Account{}, fmt.Errorf("account %d: %w", id, notFound(err))
	}
	return a, nil
}

// AccountByEmail returns the account registered under email (compared
// case-insensitively) and its encoded password hash, for login.
func (db *DB) AccountByEmail(ctx context.Context, email string) (domain.Account, string, error) {
	var row struct {
		domain.Account
		PasswordHash string `db:"password_hash"`
	}
	err := db.GetContext(ctx, &row, `
		SELECT `+accountColumnList+`, password_hash FROM accounts
		WHERE lower(email) = lower($1)`, strings.TrimSpace(email))
	if err != nil {
		return domain.Account{}, "", fmt.Errorf("account by email: %w", notFound(err))
	}
	return row.Account, row.PasswordHash, nil
}

// CountAccounts returns the number of accounts (used by tests and metrics).
func (db *DB) CountAccounts(ctx context.Context) (int64, error) {
	var n int64
	if err := db.GetContext(ctx, &n, `SELECT count(*) FROM accounts`); err != nil {
		return 0, fmt.Errorf("count accounts: %w", err)
	}
	return n, nil
}

// CreateSession stores a session under the SHA-256 hash of its token (the
// token itself is never stored), with its CSRF token and expiry. Expired
// sessions of the same account are removed on the way.
func (db *DB) CreateSession(ctx context.Context, tokenHash []byte, accountID int64, csrfToken string, expiresAt time.Time) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM sessions WHERE account_id = $1 AND expires_at <= now()`, accountID); err != nil {
			return fmt.Errorf("delete expired sessions: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO sessions (token_hash, account_id, csrf_token, expires_at)
			VALUES ($1, $2, $3, $4)`, tokenHash, accountID, csrfToken, expiresAt); err != nil {
			return fmt.Errorf("create session: %w", err)
		}
		return nil
	})
}

// SessionAccount returns the account and CSRF token of an unexpired session,
// or ErrNotFound.
func (db *DB) SessionAccount(ctx context.Context, tokenHash []byte) (domain.Account, string, error) {
	var row struct {
		domain.Account
		CSRFToken string `db:"csrf_token"`
	}
	err := db.GetContext(ctx, &row, `
		SELECT a.id, a.first_name, a.last_name, a.email, a.created_at, s.csrf_token
		FROM sessions s JOIN accounts a ON a.id = s.account_id
		WHERE s.token_hash = $1 AND s.expires_at > now()`, tokenHash)
	if err != nil {
		return domain.Account{}, "", fmt.Errorf("session: %w", notFound(err))
	}
	return row.Account, row.CSRFToken, nil
}

// DeleteSession removes a session (logout). Deleting an absent session is
// not an error.
func (db *DB) DeleteSession(ctx context.Context, tokenHash []byte) error {
	if _, err := db.ExecContext(ctx, `DELETE FROM sessions WHERE token_hash = $1`, tokenHash); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// DeleteExpiredSessions removes every expired session (housekeeping).
func (db *DB) DeleteExpiredSessions(ctx context.Context) (int64, error) {
	res, err := db.ExecContext(ctx, `DELETE FROM sessions WHERE expires_at <= now()`)
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return res.RowsAffected()
}

// RecordLoginFailure records a failed login for throttling. The email is
// stored lower-cased, whether or not an account has it.
func (db *DB) RecordLoginFailure(ctx context.Context, email, ip string) error {
	if _, err := db.ExecContext(ctx, `INSERT INTO login_failures (email, ip) VALUES (lower($1), $2)`,
		strings.TrimSpace(email), ip); err != nil {
		return fmt.Errorf("record login failure: %w", err)
	}
	return nil
}

// RecentLoginFailures counts the failed logins of the last window, for that
// email (case-insensitively) and for that IP address.
func (db *DB) RecentLoginFailures(ctx context.Context, email, ip string, window time.Duration) (perEmail, perIP int, err error) {
	secs := window.Seconds()
	err = db.QueryRowxContext(ctx, `
		SELECT
		  (SELECT count(*) FROM login_failures
		    WHERE lower(email) = lower($1) AND at > now() - make_interval(secs => $3)),
		  (SELECT count(*) FROM login_failures
		    WHERE ip = $2 AND at > now() - make_interval(secs => $3))`,
		strings.TrimSpace(email), ip, secs).Scan(&perEmail, &perIP)
	if err != nil {
		return 0, 0, fmt.Errorf("count login failures: %w", err)
	}
	return perEmail, perIP, nil
}

// ClearLoginFailures forgets an email's failures after a successful login.
// The IP's failures stay: they age out.
func (db *DB) ClearLoginFailures(ctx context.Context, email string) error {
	if _, err := db.ExecContext(ctx, `DELETE FROM login_failures WHERE lower(email) = lower($1)`,
		strings.TrimSpace(email)); err != nil {
		return fmt.Errorf("clear login failures: %w", err)
	}
	return nil
}

// PruneLoginFailures deletes failures older than before (housekeeping).
func (db *DB) PruneLoginFailures(ctx context.Context, before time.Time) (int64, error) {
	res, err := db.ExecContext(ctx, `DELETE FROM login_failures WHERE at < $1`, before)
	if err != nil {
		return 0, fmt.Errorf("prune login failures: %w", err)
	}
	return res.RowsAffected()
}
