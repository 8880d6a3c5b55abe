package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/kernodeck/kernodeck/domain"
)

// errEmailTaken is what CreateAccount (operators, fixtures) gets for an
// address a confirmed account holds. Registrations never get it.
var errEmailTaken = &domain.Error{
	Code:    domain.ECodeEmailTaken,
	Message: "Cette adresse email ne peut pas être utilisée pour créer un compte. Si vous avez déjà un compte, connectez-vous.",
	Field:   "email",
}

const accountColumnList = `id, first_name, last_name, email, created_at, email_verified_at IS NOT NULL AS email_verified`

// errUnverifiedOrder is what an unconfirmed account's second unpaid order
// gets (trigger orders_unverified_limit, migration 00046).
var errUnverifiedOrder = &domain.Error{
	Code: domain.ECodeEmailUnverified,
	Message: "Confirmez d'abord votre adresse email : tant qu'elle n'est pas confirmée, votre compte ne peut avoir " +
		"qu'une commande en attente de règlement. Ouvrez le lien reçu par email à l'inscription, ou demandez-en un nouveau depuis votre compte.",
}

// errAlreadyVerified answers a resend for a confirmed address.
var errAlreadyVerified = &domain.Error{
	Code:    domain.ECodeEmailAlreadyVerified,
	Message: "Votre adresse email est déjà confirmée : il n'y a pas de lien à renvoyer.",
}

// isUnverifiedOrderLimit reports whether err is the trigger's refusal.
func isUnverifiedOrderLimit(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Constraint == "orders_unverified_one_unpaid"
}

// CreateAccount inserts an account whose address counts as confirmed (the
// column's default): for operators, tools and fixtures. Customers register
// with RegisterAccount. passwordHash is the encoded argon2id hash (hashing
// is the caller's job). An email already registered, compared
// case-insensitively, gives a domain error ECodeEmailTaken.
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

// RegisterAccount inserts a customer's account with its address not yet
// confirmed, and queues the confirmation mail (the only mail it gets until
// the address is confirmed) in the same transaction, dated now (the clock
// ResendVerification's limits are measured on).
//
// It succeeds whether or not another account holds the address, so that a
// registration tells nothing about it: an unconfirmed account holds no
// address (only confirmed ones are unique), cannot sign in with its
// password (AccountByEmail) and can never be confirmed while another
// account holds the address; the notify dispatcher sends that address's
// owner a notice instead of the link. Earlier unconfirmed accounts of the
// address that hold nothing (replaceable) are deleted first, with their
// sessions and mails: a registration replaces them.
func (db *DB) RegisterAccount(ctx context.Context, a domain.Account, passwordHash string, now time.Time) (domain.Account, error) {
	var out domain.Account
	email := strings.TrimSpace(a.Email)
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		// One registration of an address at a time: each replaces the last.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('kd-register:' || lower($1), 0))`,
			email); err != nil {
			return fmt.Errorf("lock address: %w", err)
		}
		if _, err := deleteRegistrations(ctx, tx, `lower(a.email) = lower($1)`, email); err != nil {
			return err
		}
		err := tx.GetContext(ctx, &out, `
			INSERT INTO accounts (first_name, last_name, email, password_hash, email_verified_at, signin_unconfirmed)
			VALUES ($1, $2, $3, $4, NULL, false)
			RETURNING `+accountColumnList,
			a.FirstName, a.LastName, email, passwordHash)
		if err != nil {
			return fmt.Errorf("register account: %w", err)
		}
		return queueVerificationMail(ctx, tx, out.ID, 1, now)
	})
	if err != nil {
		return domain.Account{}, err
	}
	return out, nil
}

// replaceableAccount selects (alias a) the unconfirmed accounts that hold
// nothing but sessions, activity and mails: no order and no top-up (a
// running workflow, a deposit address still watched), no ledger entry.
const replaceableAccount = `a.email_verified_at IS NULL
	AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.account_id = a.id)
	AND NOT EXISTS (SELECT 1 FROM topups t WHERE t.account_id = a.id)
	AND NOT EXISTS (SELECT 1 FROM ledger_entries l WHERE l.ledger_account = 'customer:' || a.id)`

// deleteRegistrations deletes the replaceable accounts matching where (on
// accounts a, with args), with their mails; sessions, activity and streams
// go with them (ON DELETE CASCADE). The accounts are locked first, and
// checked in a later statement: an order's insert locks its unconfirmed
// account (trigger orders_unverified_limit), so none can slip in between.
func deleteRegistrations(ctx context.Context, tx *sqlx.Tx, where string, args ...any) (int64, error) {
	var ids []int64
	if err := tx.SelectContext(ctx, &ids, `SELECT a.id FROM accounts a
		WHERE a.email_verified_at IS NULL AND `+where+` ORDER BY a.id FOR UPDATE`, args...); err != nil {
		return 0, fmt.Errorf("lock unconfirmed accounts: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	var gone []int64
	if err := tx.SelectContext(ctx, &gone, `SELECT a.id FROM accounts a WHERE a.id = ANY($1) AND `+replaceableAccount,
		pq.Int64Array(ids)); err != nil {
		return 0, fmt.Errorf("replaceable accounts: %w", err)
	}
	if len(gone) == 0 {
		return 0, nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM mail_outbox WHERE account_id = ANY($1)`, pq.Int64Array(gone)); err != nil {
		return 0, fmt.Errorf("delete mails of unconfirmed accounts: %w", err)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM accounts WHERE id = ANY($1)`, pq.Int64Array(gone))
	if err != nil {
		return 0, fmt.Errorf("delete unconfirmed accounts: %w", err)
	}
	return res.RowsAffected()
}

// DeleteExpiredRegistrations deletes the replaceable unconfirmed accounts
// whose newest confirmation link has expired (linkTTL after its mail was
// sent; a mail not sent yet keeps its account), housekeeping run by the
// worker. It returns how many went.
func (db *DB) DeleteExpiredRegistrations(ctx context.Context, linkTTL time.Duration) (int64, error) {
	var n int64
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		n, err = deleteRegistrations(ctx, tx, `a.created_at <= now() - make_interval(secs => $1)
			AND NOT EXISTS (SELECT 1 FROM mail_outbox m WHERE m.account_id = a.id AND m.template = $2
				AND (m.state IN ('pending', 'sending') OR COALESCE(m.sent_at, m.created_at) > now() - make_interval(secs => $1)))`,
			linkTTL.Seconds(), MailEmailVerification)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired registrations: %w", err)
	}
	return n, nil
}

// queueVerificationMail queues the n-th confirmation mail of an account.
// The mail holds no link: the dispatcher seals one when it sends, so its
// lifetime starts when it leaves and no link sits in the database.
func queueVerificationMail(ctx context.Context, tx *sqlx.Tx, accountID int64, n int, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO mail_outbox (outbox_key, account_id, template, ref, data, created_at)
		VALUES ($1, $2, $3, '', $4, $5)`,
		fmt.Sprintf("verify:%d:%d", accountID, n), accountID, MailEmailVerification,
		// Truncated as PostgreSQL keeps it (it rounds to the microsecond
		// otherwise): the resend limits compare it with the same clock.
		fmt.Sprintf(`{"kind": %q}`, MailEmailVerification), at.Truncate(time.Microsecond)); err != nil {
		return fmt.Errorf("queue confirmation mail: %w", err)
	}
	return nil
}

// VerifyEmail confirms the address of account accountID if it still is
// email (a link names both). already says it was confirmed before.
// ErrNotFound: no such account with that address.
func (db *DB) VerifyEmail(ctx context.Context, accountID int64, email string) (already bool, err error) {
	var was sql.NullBool
	err = db.GetContext(ctx, &was, `
		WITH a AS (SELECT id, email_verified_at IS NOT NULL AS verified FROM accounts
			WHERE id = $1 AND lower(email) = lower($2)),
		u AS (UPDATE accounts SET email_verified_at = now()
			WHERE id = (SELECT id FROM a) AND email_verified_at IS NULL)
		SELECT (SELECT verified FROM a)`, accountID, strings.TrimSpace(email))
	if isUniqueViolation(err) {
		// Another account confirmed the address first: it is theirs.
		return false, fmt.Errorf("verify email of account %d: %w", accountID, domain.ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("verify email of account %d: %w", accountID, err)
	}
	if !was.Valid {
		return false, fmt.Errorf("verify email of account %d: %w", accountID, domain.ErrNotFound)
	}
	return was.Bool, nil
}

// ResendVerification queues one more confirmation mail for an unconfirmed
// account, at most one per every and perDay per 24 hours (the mail sent at
// registration counts), measured on the caller's clock now. Past a limit
// nothing is queued and retryAfter says when the next one may go. A
// confirmed address gives ECodeEmailAlreadyVerified.
func (db *DB) ResendVerification(ctx context.Context, accountID int64, now time.Time, every time.Duration, perDay int) (retryAfter time.Duration, err error) {
	err = db.inTx(ctx, func(tx *sqlx.Tx) error {
		var verified bool
		// The account's row lock decides parallel resends one after the other.
		if err := tx.GetContext(ctx, &verified, `SELECT email_verified_at IS NOT NULL FROM accounts
			WHERE id = $1 FOR UPDATE`, accountID); err != nil {
			return fmt.Errorf("account %d: %w", accountID, notFound(err))
		}
		if verified {
			return errAlreadyVerified
		}
		var st struct {
			Total   int          `db:"total"`
			Day     int          `db:"day"`
			Last    sql.NullTime `db:"last"`
			DayFrom sql.NullTime `db:"day_from"`
		}
		if err := tx.GetContext(ctx, &st, `
			SELECT count(*) AS total, count(*) FILTER (WHERE created_at > $2) AS day,
				max(created_at) AS last, min(created_at) FILTER (WHERE created_at > $2) AS day_from
			FROM mail_outbox WHERE account_id = $1 AND template = $3`,
			accountID, now.Add(-24*time.Hour), MailEmailVerification); err != nil {
			return fmt.Errorf("confirmation mails of account %d: %w", accountID, err)
		}
		if st.Last.Valid && now.Sub(st.Last.Time) < every {
			retryAfter = every - now.Sub(st.Last.Time)
		}
		if st.Day >= perDay && st.DayFrom.Valid {
			retryAfter = max(retryAfter, st.DayFrom.Time.Add(24*time.Hour).Sub(now))
		}
		if retryAfter > 0 {
			return nil
		}
		return queueVerificationMail(ctx, tx, accountID, st.Total+1, now)
	})
	if err != nil {
		return 0, fmt.Errorf("resend confirmation: %w", err)
	}
	return retryAfter, nil
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

// AccountByEmail returns the account that signs in with email (compared
// case-insensitively) and its encoded password hash, for login: the one
// that confirmed the address, else one registered before registrations
// stopped holding addresses (migration 00057). An account registered since
// signs in only once confirmed: otherwise signing in with the password just
// registered would tell whether the address was someone's.
func (db *DB) AccountByEmail(ctx context.Context, email string) (domain.Account, string, error) {
	var row struct {
		domain.Account
		PasswordHash string `db:"password_hash"`
	}
	err := db.GetContext(ctx, &row, `
		SELECT `+accountColumnList+`, password_hash FROM accounts
		WHERE lower(email) = lower($1) AND (email_verified_at IS NOT NULL OR signin_unconfirmed)
		ORDER BY email_verified_at IS NULL, id LIMIT 1`, strings.TrimSpace(email))
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

// SessionTouchEvery is how stale a session's last use may get before a
// request records it again: at most one write per session per interval,
// instead of one per request.
const SessionTouchEvery = 5 * time.Minute

// liveSession is the condition of a session still valid: not expired,
// and used within its idle timeout.
const liveSession = `s.expires_at > now() AND s.last_used_at + s.idle_timeout > now()`

// touchSession records the use of session $1 if its last use is older
// than SessionTouchEvery (a CTE of the statements that read a session).
var touchSession = fmt.Sprintf(`touch AS (
		UPDATE sessions s SET last_used_at = now()
		WHERE s.token_hash = $1 AND %s AND s.last_used_at < now() - interval '%d seconds')`,
	liveSession, int(SessionTouchEvery.Seconds()))

// CreateSession stores a session under the SHA-256 hash of its token (the
// token itself is never stored), with its CSRF token, expiry and idle
// timeout (unused that long, it ends; 0: never idles out before expiresAt).
// Expired sessions of the same account are removed on the way. client is
// the User-Agent and address it was opened from (the account page lists them).
func (db *DB) CreateSession(ctx context.Context, tokenHash []byte, accountID int64, csrfToken string, expiresAt time.Time, idle time.Duration, client domain.SessionClient) error {
	if idle <= 0 || idle > time.Until(expiresAt) {
		idle = max(time.Until(expiresAt), time.Second)
	}
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM sessions s WHERE account_id = $1 AND NOT (`+liveSession+`)`, accountID); err != nil {
			return fmt.Errorf("delete expired sessions: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO sessions (token_hash, account_id, csrf_token, expires_at, idle_timeout, user_agent, client_ip)
			VALUES ($1, $2, $3, $4, make_interval(secs => $5), $6, $7)`,
			tokenHash, accountID, csrfToken, expiresAt, idle.Seconds(), client.UserAgent, client.IP); err != nil {
			return fmt.Errorf("create session: %w", err)
		}
		return nil
	})
}

// SessionAccount returns the account and CSRF token of a valid session
// (unexpired, not idle past its timeout), or ErrNotFound, and records its
// use (at most every SessionTouchEvery).
func (db *DB) SessionAccount(ctx context.Context, tokenHash []byte) (domain.Account, string, error) {
	return db.sessionAccount(ctx, tokenHash, `WITH `+touchSession)
}

// PeekSession is SessionAccount without recording a use: an open page's
// live stream, which checks its session and reconnects by itself, must not
// keep a forgotten session from idling out.
func (db *DB) PeekSession(ctx context.Context, tokenHash []byte) (domain.Account, string, error) {
	return db.sessionAccount(ctx, tokenHash, "")
}

func (db *DB) sessionAccount(ctx context.Context, tokenHash []byte, with string) (domain.Account, string, error) {
	var row struct {
		domain.Account
		CSRFToken string `db:"csrf_token"`
	}
	err := db.getPrepared(ctx, &row, with+`
		SELECT a.id, a.first_name, a.last_name, a.email, a.created_at,
			a.email_verified_at IS NOT NULL AS email_verified, s.csrf_token
		FROM sessions s JOIN accounts a ON a.id = s.account_id
		WHERE s.token_hash = $1 AND `+liveSession, tokenHash)
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

// DeleteExpiredSessions removes every expired or idle session (housekeeping).
func (db *DB) DeleteExpiredSessions(ctx context.Context) (int64, error) {
	res, err := db.ExecContext(ctx, `DELETE FROM sessions s WHERE NOT (`+liveSession+`)`)
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return res.RowsAffected()
}
