package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/kernodeck/kernodeck/domain"
)

// The mails of a second factor turned on or off (package notify).
const (
	MailTOTPEnabled  = "totp_enabled"
	MailTOTPDisabled = "totp_disabled"
	// MailPasswordChanged tells the owner their password changed.
	MailPasswordChanged = "password_changed"
)

// TwoFactor reads account accountID's second factor (zero: none, not even
// a setup started).
func (db *DB) TwoFactor(ctx context.Context, accountID int64) (domain.TwoFactor, error) {
	var row struct {
		Sealed    string     `db:"secret_sealed"`
		EnabledAt *time.Time `db:"enabled_at"`
		LastStep  int64      `db:"last_step"`
		Left      int        `db:"left"`
	}
	err := db.GetContext(ctx, &row, `SELECT secret_sealed, enabled_at, last_step,
		(SELECT count(*) FROM account_recovery_codes r WHERE r.account_id = t.account_id AND r.used_at IS NULL) AS left
		FROM account_totp t WHERE account_id = $1`, accountID)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.TwoFactor{}, nil
	}
	if err != nil {
		return domain.TwoFactor{}, fmt.Errorf("second factor of account %d: %w", accountID, err)
	}
	return domain.TwoFactor{Enabled: row.EnabledAt != nil, Pending: row.EnabledAt == nil, SecretSealed: row.Sealed,
		LastStep: row.LastStep, EnabledAt: row.EnabledAt, RecoveryLeft: row.Left}, nil
}

// BeginTOTP records a new secret (sealed) for a setup not confirmed yet,
// replacing any earlier unconfirmed one. Conflict when 2FA is already on.
func (db *DB) BeginTOTP(ctx context.Context, accountID int64, sealed string) error {
	res, err := db.ExecContext(ctx, `INSERT INTO account_totp (account_id, secret_sealed) VALUES ($1, $2)
		ON CONFLICT (account_id) DO UPDATE SET secret_sealed = EXCLUDED.secret_sealed, last_step = 0, created_at = now()
		WHERE account_totp.enabled_at IS NULL`, accountID, sealed)
	if err != nil {
		return fmt.Errorf("begin second factor of account %d: %w", accountID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errTOTPAlreadyOn
	}
	return nil
}

var errTOTPAlreadyOn = domain.Errorf(domain.ECodeConflict, "La double authentification est déjà activée sur votre compte.")

// EnableTOTP turns the pending setup on: step is the confirmed code's time
// step, codeHashes the recovery codes' hashes; the mail saying so is queued
// in the same transaction. Conflict when no setup is pending (already on,
// or never started).
func (db *DB) EnableTOTP(ctx context.Context, accountID, step int64, codeHashes [][]byte, now time.Time) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE account_totp SET enabled_at = $2, last_step = $3
			WHERE account_id = $1 AND enabled_at IS NULL`, accountID, now, step)
		if err != nil {
			return fmt.Errorf("enable second factor of account %d: %w", accountID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return domain.Errorf(domain.ECodeConflict, "Aucune activation de la double authentification n'est en cours : recommencez depuis votre compte.")
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM account_recovery_codes WHERE account_id = $1`, accountID); err != nil {
			return fmt.Errorf("recovery codes of account %d: %w", accountID, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO account_recovery_codes (account_id, code_hash)
			SELECT $1, unnest($2::bytea[])`, accountID, pq.ByteaArray(codeHashes)); err != nil {
			return fmt.Errorf("recovery codes of account %d: %w", accountID, err)
		}
		return queueAccountMail(ctx, tx, accountID, MailTOTPEnabled, now)
	})
}

// DisableTOTP turns the second factor off (its secret and recovery codes
// deleted) and queues the mail saying so. NotFound when it was not on.
func (db *DB) DisableTOTP(ctx context.Context, accountID int64, now time.Time) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM account_totp WHERE account_id = $1 AND enabled_at IS NOT NULL`, accountID)
		if err != nil {
			return fmt.Errorf("disable second factor of account %d: %w", accountID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return domain.Errorf(domain.ECodeConflict, "La double authentification n'est pas activée sur votre compte.")
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM account_recovery_codes WHERE account_id = $1`, accountID); err != nil {
			return fmt.Errorf("recovery codes of account %d: %w", accountID, err)
		}
		return queueAccountMail(ctx, tx, accountID, MailTOTPDisabled, now)
	})
}

// UseTOTPStep records step as used if it is later than the last one
// accepted: false when it is not (a code replayed, or an older one), so
// that a code is never accepted twice.
func (db *DB) UseTOTPStep(ctx context.Context, accountID, step int64) (bool, error) {
	res, err := db.ExecContext(ctx, `UPDATE account_totp SET last_step = $2
		WHERE account_id = $1 AND enabled_at IS NOT NULL AND last_step < $2`, accountID, step)
	if err != nil {
		return false, fmt.Errorf("use code of account %d: %w", accountID, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// UseRecoveryCode marks the recovery code of that hash used: false when it
// is not one of the account's, or was used before.
func (db *DB) UseRecoveryCode(ctx context.Context, accountID int64, hash []byte) (bool, error) {
	res, err := db.ExecContext(ctx, `UPDATE account_recovery_codes SET used_at = now()
		WHERE account_id = $1 AND code_hash = $2 AND used_at IS NULL
			AND EXISTS (SELECT 1 FROM account_totp t WHERE t.account_id = $1 AND t.enabled_at IS NOT NULL)`, accountID, hash)
	if err != nil {
		return false, fmt.Errorf("use recovery code of account %d: %w", accountID, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// CreateLoginChallenge records a pending login (password right, code not
// given yet) under its token's hash; expired ones are deleted.
func (db *DB) CreateLoginChallenge(ctx context.Context, tokenHash []byte, accountID int64, expires time.Time) error {
	if _, err := db.ExecContext(ctx, `DELETE FROM login_challenges WHERE expires_at < now()`); err != nil {
		return fmt.Errorf("expire login challenges: %w", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO login_challenges (token_hash, account_id, expires_at)
		VALUES ($1, $2, $3)`, tokenHash, accountID, expires); err != nil {
		return fmt.Errorf("login challenge of account %d: %w", accountID, err)
	}
	return nil
}

// LoginChallenge is the account of a pending login not expired; NotFound
// otherwise.
func (db *DB) LoginChallenge(ctx context.Context, tokenHash []byte) (domain.Account, error) {
	var id int64
	err := db.GetContext(ctx, &id, `SELECT account_id FROM login_challenges WHERE token_hash = $1 AND expires_at > now()`, tokenHash)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Account{}, domain.ErrNotFound
	}
	if err != nil {
		return domain.Account{}, fmt.Errorf("login challenge: %w", err)
	}
	return db.Account(ctx, id)
}

// EndLoginChallenge deletes a pending login (its code was given): true
// when this call deleted it, so that only one code step opens a session.
func (db *DB) EndLoginChallenge(ctx context.Context, tokenHash []byte) (bool, error) {
	res, err := db.ExecContext(ctx, `DELETE FROM login_challenges WHERE token_hash = $1 AND expires_at > now()`, tokenHash)
	if err != nil {
		return false, fmt.Errorf("end login challenge: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// queueAccountMail queues a mail about the account itself (no order, no
// secret in it).
func queueAccountMail(ctx context.Context, tx *sqlx.Tx, accountID int64, template string, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO mail_outbox (outbox_key, account_id, template, ref, data, created_at)
		VALUES ($1, $2, $3, '', $4, $5)`,
		fmt.Sprintf("%s:%d:%d", template, accountID, at.UnixNano()), accountID, template,
		fmt.Sprintf(`{"kind": %q}`, template), at.Truncate(time.Microsecond)); err != nil {
		return fmt.Errorf("queue %s mail: %w", template, err)
	}
	return nil
}
