package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

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
	err := db.getPrepared(ctx, &row, `
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

func throttleKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// Attempt counts one authentication attempt under every rule, atomically:
// the rules' rows are locked, checked and updated in one transaction, so
// parallel attempts are decided one after the other. If a rule is locked,
// or this attempt would pass its limit (which locks it), nothing is counted
// and retryAfter says how long to wait. Otherwise the attempt counts as a
// failure until Forgive takes it back: check the credentials only after
// Attempt allowed it.
func (db *DB) Attempt(ctx context.Context, rules []domain.ThrottleRule) (retryAfter time.Duration, err error) {
	byKey := map[string]domain.ThrottleRule{}
	keys := make([][]byte, 0, len(rules))
	for _, r := range rules {
		if err := r.Validate(); err != nil {
			return 0, err
		}
		k := throttleKey(r.Key)
		byKey[string(k)] = r
		keys = append(keys, k)
	}
	slices.SortFunc(keys, bytes.Compare) // one lock order for every caller: no deadlock
	err = db.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO auth_throttle (key) SELECT k FROM unnest($1::bytea[]) AS k ORDER BY k
			ON CONFLICT (key) DO NOTHING`, pq.ByteaArray(keys)); err != nil {
			return fmt.Errorf("throttle rows: %w", err)
		}
		var rows []struct {
			Key         []byte       `db:"key"`
			Failures    int          `db:"failures"`
			WindowStart time.Time    `db:"window_start"`
			Strikes     int          `db:"strikes"`
			LockedUntil sql.NullTime `db:"locked_until"`
			Now         time.Time    `db:"now"`
		}
		if err := tx.SelectContext(ctx, &rows, `
			SELECT key, failures, window_start, strikes, locked_until, now() AS now FROM auth_throttle
			WHERE key = ANY($1) ORDER BY key FOR UPDATE`, pq.ByteaArray(keys)); err != nil {
			return fmt.Errorf("lock throttle rows: %w", err)
		}
		for i := range rows {
			row, r := &rows[i], byKey[string(rows[i].Key)]
			now := row.Now
			if row.LockedUntil.Valid && now.Before(row.LockedUntil.Time) {
				retryAfter = max(retryAfter, row.LockedUntil.Time.Sub(now))
				continue
			}
			if row.LockedUntil.Valid && now.Sub(row.LockedUntil.Time) > 24*time.Hour {
				row.Strikes, row.LockedUntil = 0, sql.NullTime{}
			}
			if now.Sub(row.WindowStart) >= r.Window {
				row.Failures, row.WindowStart = 0, now
			}
			if row.Failures >= r.Limit {
				lock := r.LockoutAfter(row.Strikes)
				row.Strikes++
				row.Failures, row.WindowStart = 0, now
				row.LockedUntil = sql.NullTime{Time: now.Add(lock), Valid: true}
				retryAfter = max(retryAfter, lock)
			}
		}
		for _, row := range rows {
			if retryAfter == 0 {
				row.Failures++
			}
			if _, err := tx.ExecContext(ctx, `
				UPDATE auth_throttle SET failures = $2, window_start = $3, strikes = $4, locked_until = $5
				WHERE key = $1`, row.Key, row.Failures, row.WindowStart, row.Strikes, row.LockedUntil); err != nil {
				return fmt.Errorf("update throttle row: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("throttle attempt: %w", err)
	}
	return retryAfter, nil
}

// Forgive takes back an attempt that succeeded: one failure less under
// each key of undo, and the keys of reset forgotten altogether (the owner's
// own email-and-address counter, doublings included).
func (db *DB) Forgive(ctx context.Context, undo, reset []string) error {
	hash := func(keys []string) pq.ByteaArray {
		out := make(pq.ByteaArray, len(keys))
		for i, k := range keys {
			out[i] = throttleKey(k)
		}
		return out
	}
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE auth_throttle SET failures = greatest(failures - 1, 0) WHERE key = ANY($1)`,
			hash(undo)); err != nil {
			return fmt.Errorf("forgive attempt: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM auth_throttle WHERE key = ANY($1)`, hash(reset)); err != nil {
			return fmt.Errorf("reset throttle: %w", err)
		}
		return nil
	})
}

// ThrottleLocked says how long the longest lock among rules still runs (0:
// none), without counting anything: for checks made on every request
// (agent tokens), where only failures are counted (with Attempt). A key at
// its limit within its window counts as locked until the window ends.
func (db *DB) ThrottleLocked(ctx context.Context, rules []domain.ThrottleRule) (time.Duration, error) {
	var longest time.Duration
	for _, r := range rules {
		var secs float64
		if err := db.GetContext(ctx, &secs, `
			SELECT COALESCE(max(greatest(
				extract(epoch FROM locked_until - now()),
				CASE WHEN failures >= $2 THEN extract(epoch FROM window_start + make_interval(secs => $3) - now()) END)), 0)
			FROM auth_throttle WHERE key = $1`, throttleKey(r.Key), r.Limit, r.Window.Seconds()); err != nil {
			return 0, fmt.Errorf("throttle locked: %w", err)
		}
		longest = max(longest, time.Duration(secs*float64(time.Second)))
	}
	return longest, nil
}

// PruneThrottle deletes counters idle since before (neither counting nor
// locked): housekeeping.
func (db *DB) PruneThrottle(ctx context.Context, before time.Time) (int64, error) {
	res, err := db.ExecContext(ctx, `DELETE FROM auth_throttle
		WHERE window_start < $1 AND (locked_until IS NULL OR locked_until < $1)`, before)
	if err != nil {
		return 0, fmt.Errorf("prune throttle: %w", err)
	}
	return res.RowsAffected()
}
