package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// AcquireLease takes the network's lease for holder if it is free, expired,
// already held by holder, or held by a watcher whose beacon is out; it
// reports whether holder now has it.
//
// A beacon is a session advisory lock named after the network and the
// holder, which every watcher taking part in the lease holds while it runs
// (leaseBeacons). PostgreSQL drops it the moment the holder's session ends:
// a holder killed, crashed or cut off loses its lease at the next standby's
// step, not after the TTL (issue 23: 9 s without a watcher after each kill,
// while a busy block's confirmations waited). A holder alive but stuck keeps
// its beacon, and the TTL decides as before; a holder without a beacon (a
// release before this one, during a rolling update) is taken over at once
// and follows as a standby.
//
// Locks: the holder's writes hold the row FOR KEY SHARE (checkLease). A
// renewal changes no key and does not wait for them: a write longer than
// the TTL no longer costs the holder its lease (a mempool push of 1,000
// outputs did, over and over, before the block of issue 23's burst). A
// takeover locks the row FOR UPDATE first, so it waits for the writes in
// progress, and the holder's next write finds the lease gone.
func (db *DB) AcquireLease(ctx context.Context, network, holder string, ttl time.Duration) (bool, error) {
	if err := db.beacons.light(ctx, db.URL, network, holder); err != nil {
		return false, fmt.Errorf("lease %s: %w", network, err)
	}
	ms := ttl.Milliseconds()
	res, err := db.ExecContext(ctx, `INSERT INTO watcher_leases AS l (network, holder, expires_at)
		VALUES ($1, $2, now() + $3 * interval '1 millisecond')
		ON CONFLICT (network) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE l.holder = EXCLUDED.holder`,
		network, holder, ms)
	if err != nil {
		return false, fmt.Errorf("lease %s: %w", network, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	// Held by another watcher: look without a lock first, so that a
	// standby's step never waits for a live holder's writes.
	other, takeable, err := db.takeable(ctx, db.DB, network, "")
	if err != nil || !takeable {
		return false, err
	}
	var got bool
	err = db.inTx(ctx, func(tx *sqlx.Tx) error {
		// Waits for the holder's writes in progress; then decides again.
		_, takeable, err := db.takeable(ctx, tx, network, other)
		if err != nil || !takeable {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE watcher_leases SET holder = $2, expires_at = now() + $3 * interval '1 millisecond'
			WHERE network = $1`, network, holder, ms)
		got = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("lease %s: %w", network, err)
	}
	return got, nil
}

// takeable reads who holds network's lease and whether another watcher may
// take it over: its time is up, or its beacon is out. With lockFor set,
// the row is read FOR UPDATE, and it is takeable only if lockFor still
// holds it.
func (db *DB) takeable(ctx context.Context, q sqlx.QueryerContext, network, lockFor string) (string, bool, error) {
	query := `SELECT holder, expires_at <= now() AS expired FROM watcher_leases WHERE network = $1`
	if lockFor != "" {
		query += ` FOR UPDATE`
	}
	var cur struct {
		Holder  string `db:"holder"`
		Expired bool   `db:"expired"`
	}
	err := sqlx.GetContext(ctx, q, &cur, query, network)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil // released meanwhile: the next step takes it
	case err != nil:
		return "", false, fmt.Errorf("lease %s: %w", network, err)
	case lockFor != "" && cur.Holder != lockFor:
		return cur.Holder, false, nil
	case cur.Expired:
		return cur.Holder, true, nil
	}
	out, err := db.beacons.isOut(ctx, network, cur.Holder)
	return cur.Holder, out, err
}

// ReleaseLease gives up the lease if holder has it, and puts out holder's
// beacon.
func (db *DB) ReleaseLease(ctx context.Context, network, holder string) error {
	_, err := db.ExecContext(ctx, `DELETE FROM watcher_leases WHERE network = $1 AND holder = $2`, network, holder)
	return errors.Join(err, db.beacons.putOut(ctx, network, holder))
}

// Close closes the pool and the beacons' connection.
func (db *DB) Close() error {
	return errors.Join(db.beacons.close(), db.DB.Close())
}

// beaconKey is the SQL expression of the advisory lock key of holder's
// beacon on network (both SQL expressions): the one spelling of it.
func beaconKey(network, holder string) string {
	return `hashtextextended('kd-lease-beacon ' || ` + network + ` || ' ' || ` + holder + `, 0)`
}

// leaseBeacons holds this process's beacons on a connection of their own,
// outside the pool: a pooled connection would carry the locks into other
// work, and return them to the pool when put back.
type leaseBeacons struct {
	mu   sync.Mutex
	pool *sql.DB
	conn *sql.Conn
	lit  map[string]bool // network + " " + holder
}

// light makes sure holder's beacon on network is held, on a live session.
func (b *leaseBeacons) light(ctx context.Context, url, network, holder string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := network + " " + holder
	if b.lit[key] {
		// The lock lasts as long as its session: check the session.
		if _, err := b.conn.ExecContext(ctx, `SELECT 1`); err == nil {
			return nil
		}
		_ = b.closeLocked()
	}
	if b.conn == nil {
		pool, err := sql.Open("postgres", url)
		if err != nil {
			return fmt.Errorf("beacon: %w", err)
		}
		pool.SetMaxOpenConns(1)
		conn, err := pool.Conn(ctx)
		if err != nil {
			_ = pool.Close()
			return fmt.Errorf("beacon: %w", err)
		}
		b.pool, b.conn, b.lit = pool, conn, map[string]bool{}
	}
	var got bool
	if err := b.conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(`+beaconKey("$1::text", "$2::text")+`)`,
		network, holder).Scan(&got); err != nil {
		_ = b.closeLocked()
		return fmt.Errorf("beacon: %w", err)
	}
	if !got {
		return fmt.Errorf("beacon of %s on %s is lit by another session: is another process running under the same name?", holder, network)
	}
	b.lit[key] = true
	return nil
}

// isOut reports whether holder's beacon on network is out: no session
// holds it. It looks by taking the lock for a moment (pg_locks would read
// the whole lock table, under every partition's lock, at each standby's
// step); a holder relighting its beacon in that moment fails its step and
// tries again at the next.
func (b *leaseBeacons) isOut(ctx context.Context, network, holder string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lit[network+" "+holder] {
		return false, nil // this process's own: alive
	}
	if b.conn == nil {
		return false, errors.New("beacon: no session")
	}
	var got bool
	if err := b.conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(`+beaconKey("$1::text", "$2::text")+`)`,
		network, holder).Scan(&got); err != nil {
		_ = b.closeLocked()
		return false, fmt.Errorf("beacon: %w", err)
	}
	if !got {
		return false, nil
	}
	if _, err := b.conn.ExecContext(ctx, `SELECT pg_advisory_unlock(`+beaconKey("$1::text", "$2::text")+`)`, network, holder); err != nil {
		_ = b.closeLocked()
		return false, fmt.Errorf("beacon: %w", err)
	}
	return true, nil
}

// putOut releases holder's beacon on network, and the connection with the
// last beacon.
func (b *leaseBeacons) putOut(ctx context.Context, network, holder string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := network + " " + holder
	if !b.lit[key] {
		return nil
	}
	delete(b.lit, key)
	if len(b.lit) == 0 {
		return b.closeLocked()
	}
	_, err := b.conn.ExecContext(ctx, `SELECT pg_advisory_unlock(`+beaconKey("$1::text", "$2::text")+`)`, network, holder)
	if err != nil {
		return errors.Join(fmt.Errorf("beacon: %w", err), b.closeLocked())
	}
	return nil
}

func (b *leaseBeacons) close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closeLocked()
}

// closeLocked ends the beacons' session, which puts every beacon out.
func (b *leaseBeacons) closeLocked() error {
	if b.conn == nil {
		return nil
	}
	err := errors.Join(b.conn.Close(), b.pool.Close())
	b.pool, b.conn, b.lit = nil, nil, nil
	return err
}
