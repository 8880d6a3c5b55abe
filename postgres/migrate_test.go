package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/kernodeck/kernodeck/migrations"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// TestConcurrentMigrationsOfAFreshDatabase is `kernodeck migrate` run on
// six machines at once against a new database: each run its own pool,
// all started together. Every run succeeds and every migration is applied
// exactly once, up to the newest. Without the session locker (Migrate's
// goose.WithSessionLocker taken out), runs fail with "relation ... already
// exists", "column ... already exists" or a duplicate key of the catalog:
// 9 times in 10 with three runs, 20 in 20 with six.
func TestConcurrentMigrationsOfAFreshDatabase(t *testing.T) {
	ctx := context.Background()
	url := pgtest.EmptyDB(t)
	const runs = 6
	dbs := make([]*postgres.DB, runs)
	for i := range dbs {
		db, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		dbs[i] = db
	}
	errs := make([]error, runs)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, db := range dbs {
		wg.Go(func() {
			<-start
			errs[i] = postgres.Migrate(ctx, db.DB.DB)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("run %d: %v", i+1, err)
		}
	}

	var twice []int64
	if err := dbs[0].Select(&twice, `SELECT version_id FROM goose_db_version
		GROUP BY version_id HAVING count(*) > 1 ORDER BY version_id`); err != nil {
		t.Fatal(err)
	}
	if len(twice) > 0 {
		t.Errorf("versions recorded more than once: %v", twice)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, dbs[0].DB.DB, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	current, target, err := provider.GetVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var applied int
	if err := dbs[0].Get(&applied, `SELECT count(*) FROM goose_db_version WHERE is_applied AND version_id > 0`); err != nil {
		t.Fatal(err)
	}
	if current != target || applied != len(provider.ListSources()) {
		t.Errorf("schema at version %d (%d migrations applied), want %d (%d)", current, applied, target, len(provider.ListSources()))
	}
	// The migration session's lock_timeout does not stay on the pools'
	// connections.
	for i, db := range dbs {
		var lt string
		if err := db.Get(&lt, "SHOW lock_timeout"); err != nil {
			t.Fatal(err)
		}
		if lt != "0" {
			t.Errorf("run %d's pool: lock_timeout %s after the migration", i+1, lt)
		}
	}
}

// TestMigrationGivesUpOnABusyTable checks that a migration waiting for a
// table's lock gives up after the lock timeout (MigrationLockTimeout,
// shortened here to 300 ms) rather than queueing live traffic behind it.
// Migration 00006 creates a table referencing accounts, which needs a lock
// that an open transaction writing to accounts holds: with the schema at
// version 5 and such a transaction open, migrate fails with PostgreSQL's
// lock timeout, and succeeds once the transaction ends.
func TestMigrationGivesUpOnABusyTable(t *testing.T) {
	ctx := context.Background()
	db, err := postgres.Open(ctx, pgtest.EmptyDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, db.DB.DB, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.UpTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	postgres.SetMigrationLockTimeout(t, 300*time.Millisecond)
	live, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = live.Rollback() }()
	// What an INSERT or UPDATE of accounts holds until its commit.
	if _, err := live.Exec("LOCK TABLE accounts IN ROW EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	err = postgres.Migrate(ctx, db.DB.DB)
	if err == nil || !strings.Contains(err.Error(), "lock timeout") {
		t.Fatalf("migrate behind a live transaction: %v, want a lock timeout", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("migrate gave up after %v", took)
	}
	if err := live.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Migrate(ctx, db.DB.DB); err != nil {
		t.Fatalf("migrate once the table is free: %v", err)
	}
}
