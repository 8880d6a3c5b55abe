package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// AccountKey is a network's watch-only account key as recorded
// (migration 00067).
type AccountKey struct {
	Network     string `db:"network"`
	Fingerprint string `db:"fingerprint"`
	KeyDigest   string `db:"key_digest"`
}

// RecordAccountKey records k as its network's key if none is recorded yet,
// and returns the key recorded (k, or the one recorded before). Two
// processes starting at once both read the one recorded: the read is a
// statement of its own, which sees the other's insert once committed.
func (db *DB) RecordAccountKey(ctx context.Context, k AccountKey) (AccountKey, error) {
	if _, err := db.ExecContext(ctx, `INSERT INTO account_keys (network, fingerprint, key_digest) VALUES ($1, $2, $3)
		ON CONFLICT (network) DO NOTHING`, k.Network, k.Fingerprint, k.KeyDigest); err != nil {
		return AccountKey{}, fmt.Errorf("record account key of %s: %w", k.Network, err)
	}
	var got AccountKey
	if err := db.GetContext(ctx, &got, `SELECT network, fingerprint, key_digest FROM account_keys WHERE network = $1`,
		k.Network); err != nil {
		return AccountKey{}, fmt.Errorf("account key of %s: %w", k.Network, err)
	}
	return got, nil
}

// ConfirmAccountKey records k as its network's key, replacing the one
// recorded, with who confirmed it; it returns the key replaced (zero if
// none was recorded).
func (db *DB) ConfirmAccountKey(ctx context.Context, k AccountKey, by string) (AccountKey, error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return AccountKey{}, err
	}
	defer func() { _ = tx.Rollback() }()
	var old AccountKey
	err = tx.GetContext(ctx, &old, `SELECT network, fingerprint, key_digest FROM account_keys WHERE network = $1 FOR UPDATE`, k.Network)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return AccountKey{}, fmt.Errorf("account key of %s: %w", k.Network, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO account_keys (network, fingerprint, key_digest) VALUES ($1, $2, $3)
		ON CONFLICT (network) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, key_digest = EXCLUDED.key_digest,
			recorded_at = now()`, k.Network, k.Fingerprint, k.KeyDigest); err != nil {
		return AccountKey{}, fmt.Errorf("confirm account key of %s: %w", k.Network, err)
	}
	var oldFP *string
	if old.Fingerprint != "" {
		oldFP = &old.Fingerprint
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO account_key_changes (network, old_fingerprint, new_fingerprint, new_key_digest, confirmed_by)
		VALUES ($1, $2, $3, $4, $5)`, k.Network, oldFP, k.Fingerprint, k.KeyDigest, by); err != nil {
		return AccountKey{}, fmt.Errorf("confirm account key of %s: %w", k.Network, err)
	}
	return old, tx.Commit()
}
