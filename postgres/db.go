// Package postgres implements Kernodeck's stores on PostgreSQL with sqlx and
// lib/pq. PostgreSQL is the system of record for accounts, catalog, orders,
// the balance ledger and the audit log.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/shopspring/decimal"

	"github.com/kernodeck/kernodeck/migrations"
)

// DB wraps the connection pool. All stores hang off it.
type DB struct {
	*sqlx.DB
	URL       string
	stmts     stmtCache
	timelines timelineCache
	views     orderViews
	sessions  sessionCache
	beacons   leaseBeacons
	// valueTolerance bounds support's values (SetValueTolerance).
	valueTolerance decimal.Decimal
}

// Open connects to PostgreSQL and checks the connection.
func Open(ctx context.Context, url string) (*DB, error) {
	db, err := openPool(url)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(20)
	// As many idle as open: with fewer, every burst above the idle count
	// closes connections only to open new ones (a backend fork each) a
	// moment later (kdload, BENCHMARKS.md).
	db.SetMaxIdleConns(20)
	db.SetConnMaxIdleTime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("ping postgres: %w", err)
	}
	return &DB{DB: db, URL: url}, nil
}

// openPool opens a pool on url with lib/pq's binary_parameters on, so that
// a statement with arguments takes one round trip (Parse, Bind, Execute)
// instead of two (Parse and Describe, then Bind and Execute): in a busy
// block, the timeline writes were a quarter of a worker's CPU, much of it
// the system calls of those round trips (BENCHMARKS.md). It sends []byte
// arguments in binary: raw bytes for bytea and text, so JSON goes to a
// jsonb column as a string (nullJSON), never as []byte.
func openPool(url string) (*sqlx.DB, error) {
	cfg, err := pq.NewConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	cfg.BinaryParameters = true
	conn, err := pq.NewConnectorConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	return sqlx.NewDb(sql.OpenDB(conn), "postgres"), nil
}

// MigrationLockTimeout is the lock_timeout of the migration session: a
// migration's statement that waits longer for a lock (a table busy with
// live traffic) fails, and its migration rolls back, instead of holding
// every later query on that table in the queue behind it. Run the
// migration again then.
const MigrationLockTimeout = 10 * time.Second

// migrationLockTimeout is MigrationLockTimeout, shortened by tests.
var migrationLockTimeout = MigrationLockTimeout

// migrationLockWait is how long a migration waits for another one of the
// same database to finish (goose's session locker, polling every second).
const migrationLockWait = 10 * time.Minute

// Migrate applies the embedded migrations up to the newest. Runs at once
// on the same database (kernodeck migrate on every machine) take turns
// under goose's session locker, a PostgreSQL advisory lock of the database
// held for the whole run: the first applies what is missing, the others
// then find nothing to do. A run waits for the lock up to 10 minutes.
func Migrate(ctx context.Context, db *sql.DB) error {
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, uint64(migrationLockWait/time.Second)))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithSessionLocker(migrationSession{locker}))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// migrationSession is goose's session locker with the session's
// lock_timeout set to MigrationLockTimeout while the lock is held (goose
// runs every migration on that one connection), and reset before the
// connection goes back to the pool.
type migrationSession struct{ lock.SessionLocker }

func (m migrationSession) SessionLock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET lock_timeout = %d", migrationLockTimeout.Milliseconds())); err != nil {
		return fmt.Errorf("set lock_timeout: %w", err)
	}
	if err := m.SessionLocker.SessionLock(ctx, conn); err != nil {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "RESET lock_timeout")
		return err
	}
	return nil
}

func (m migrationSession) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	_, resetErr := conn.ExecContext(ctx, "RESET lock_timeout")
	if err := m.SessionLocker.SessionUnlock(ctx, conn); err != nil {
		return err
	}
	if resetErr != nil {
		return fmt.Errorf("reset lock_timeout: %w", resetErr)
	}
	return nil
}

// inTx runs fn in a transaction of the store (InTx).
func (db *DB) inTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	return InTx(ctx, db.DB, fn)
}

// InTx runs fn in a transaction, committing on nil and rolling back
// otherwise: the one transaction helper of the stores (only this package
// writes to PostgreSQL; the machine drivers call Hosts and LocalGPUs).
func InTx(ctx context.Context, db *sqlx.DB, fn func(tx *sqlx.Tx) error) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// isUniqueViolation reports whether err is a unique-constraint violation.
func isUniqueViolation(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code == "23505"
}

// notFound maps sql.ErrNoRows to the domain's not-found error.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return domainNotFound
	}
	return err
}
