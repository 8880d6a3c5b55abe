package postgres

// The authentication throttle: counters of attempts and failures per key
// (email, client network, agent token guesses), under their rules.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/kernodeck/kernodeck/domain"
)

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

// LoginFailures returns the failures counted under key (an email's failed
// logins from one network) in its window, if that began less than window
// ago (0 otherwise).
func (db *DB) LoginFailures(ctx context.Context, key string, window time.Duration) (int, error) {
	var n int
	err := db.GetContext(ctx, &n, `
		SELECT COALESCE(max(failures) FILTER (WHERE window_start > now() - make_interval(secs => $2)), 0)
		FROM auth_throttle WHERE key = $1`, throttleKey(key), window.Seconds())
	if err != nil {
		return 0, fmt.Errorf("login failures: %w", err)
	}
	return n, nil
}

// AddLoginFailure counts one failure under key: in the current window, or
// as the first of a new one if the current began window ago or more. It
// never locks (slow-downs only: see api's loginDelay).
func (db *DB) AddLoginFailure(ctx context.Context, key string, window time.Duration) error {
	_, err := db.ExecContext(ctx, `
		INSERT INTO auth_throttle AS t (key, failures, window_start) VALUES ($1, 1, now())
		ON CONFLICT (key) DO UPDATE SET
			failures = CASE WHEN t.window_start > now() - make_interval(secs => $2) THEN t.failures + 1 ELSE 1 END,
			window_start = CASE WHEN t.window_start > now() - make_interval(secs => $2) THEN t.window_start ELSE now() END`,
		throttleKey(key), window.Seconds())
	if err != nil {
		return fmt.Errorf("count login failure: %w", err)
	}
	return nil
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
