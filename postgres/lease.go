package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// AcquireLease takes the network's lease for holder if it is free, expired,
// already held by holder, or held by a watcher whose beacon is gone; it
// reports whether holder now has it.
//
// A beacon is a session advisory lock named after the network and the
// holder, which every watcher takes part in the lease holds while it runs
// (leaseBeacons). PostgreSQL drops it the moment the holder's session ends:
// a holder killed, crashed or cut off loses its lease to the next standby's
// step, not after the TTL (issue 23: 9 s without a watcher after each kill,
// while a busy block's confirmations waited). A holder alive but stuck keeps
// its beacon, and the TTL decides as before; a holder without a beacon (a
// release before this one, during a rolling update) is taken over at once
// and follows as a standby.
func (db *DB) AcquireLease(ctx context.Context, network, holder string, ttl time.Duration) (bool, error) {
	if err := db.beacons.light(ctx, db.URL, network, holder); err != nil {
		return false, fmt.Errorf("lease %s: %w", network, err)
	}
	var got string
	err := db.GetContext(ctx, &got, `
		INSERT INTO watcher_leases (network, holder, expires_at) VALUES ($1, $2, now() + $3 * interval '1 millisecond')
		ON CONFLICT (network) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
			WHERE watcher_leases.holder = EXCLUDED.holder OR watcher_leases.expires_at < now()
				OR NOT EXISTS (SELECT 1 FROM pg_locks l, `+beaconKey("watcher_leases.network", "watcher_leases.holder")+` AS k(key)
					WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
					AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
					AND l.classid = ((k.key >> 32) & 4294967295)::oid AND l.objid = (k.key & 4294967295)::oid)
		RETURNING holder`, network, holder, ttl.Milliseconds())
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lease %s: %w", network, err)
	}
	return got == holder, nil
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
// beacon on network (both SQL expressions): the one spelling of it, for
// the lock and for the standby's look at pg_locks.
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
