// Package pgtest gives tests a fresh, migrated PostgreSQL database of their
// own on the real server (127.0.0.1:5432 by default), dropped at the end.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
)

// AdminURL is the server the test databases are created on. Override with
// KERNODECK_TEST_DATABASE_URL (a database the user may CREATE DATABASE from).
func AdminURL() string {
	if u := os.Getenv("KERNODECK_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// NewDB creates a database named after a random suffix, migrates it and
// returns it open. The database is dropped when the test ends.
func NewDB(t testing.TB) *postgres.DB {
	t.Helper()
	ctx := context.Background()
	db, err := postgres.Open(ctx, EmptyDB(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	// Registered after EmptyDB's drop, so run before it.
	t.Cleanup(func() { _ = db.Close() })
	if err := postgres.Migrate(ctx, db.DB.DB); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return db
}

// EmptyDB creates a database named after a random suffix, not migrated,
// and returns its URL. The database is dropped (with its sessions) when the
// test ends.
func EmptyDB(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	admin, err := sqlx.Open("postgres", AdminURL())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "kd_test_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		_ = admin.Close()
		t.Fatalf("pgtest: create database (is PostgreSQL running on %s?): %v", AdminURL(), err)
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
		_ = admin.Close()
	})
	u, err := url.Parse(AdminURL())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// AwaitLockWaiters waits, up to 15 s, until n sessions on db's database
// (not another test's: the server is shared) wait for an advisory lock.
func AwaitLockWaiters(t testing.TB, db *postgres.DB, n int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var waiting int
		require.NoError(c, db.Get(&waiting, `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`))
		assert.Equal(c, n, waiting, "sessions waiting for an advisory lock")
	}, 15*time.Second, 20*time.Millisecond)
}

// AccountWithOrder inserts an account with email and its unpaid order of
// one lot of rtx-a5000 for 3 days (23.57 USD), with no workflow: the seed
// of tests of what happens to an order's money.
func AccountWithOrder(t testing.TB, db *postgres.DB, email string) (accountID int64, ref string) {
	t.Helper()
	if err := db.Get(&accountID, `INSERT INTO accounts (first_name, last_name, email, password_hash)
		VALUES ('Ada', 'Lovelace', $1, 'x') RETURNING id`, email); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	ref = domain.NewRef(domain.OrderRefPrefix)
	if _, err := db.Exec(`INSERT INTO orders (ref, account_id, gpu_model, lots, gpus_per_lot, total_gpus,
		duration_days, preset, lot_cents, total_cents, status, workflow_id)
		VALUES ($1, $2, 'rtx-a5000', 1, 1, 1, 3, 'python', 2357, 2357, 'awaiting_payment', 'rental-' || $1)`, ref, accountID); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return accountID, ref
}

// Recorded stores what c claims as a watcher would have recorded it (a
// chain payment, or a request's dust summary), so that a test sending the
// signal itself is not refused as unrecorded (postgres.DB.CheckPayments).
// The row is created or made to match c; its state is not the test's to
// drive here.
func Recorded(t testing.TB, db *postgres.DB, c domain.PaymentClaim) {
	t.Helper()
	var err error
	if c.Dust {
		_, err = db.Exec(`INSERT INTO chain_dust_summaries (intent_id, network, outputs, amount_base, version)
			VALUES ($1, $2, 1, $3::numeric, $4)
			ON CONFLICT (intent_id) DO UPDATE SET amount_base = GREATEST(chain_dust_summaries.amount_base, EXCLUDED.amount_base),
				version = GREATEST(chain_dust_summaries.version, EXCLUDED.version)`,
			c.IntentID, c.Network, c.AmountBase, c.Version)
	} else {
		_, err = db.Exec(`INSERT INTO chain_payments (network, txid, output_index, asset, intent_id, address, amount_base,
				amount_cents, late, state)
			VALUES ($1, $2, $3, $4, $5, $6, $7::numeric, $8, false, 'seen')
			ON CONFLICT (network, txid, output_index) DO UPDATE SET asset = EXCLUDED.asset, intent_id = EXCLUDED.intent_id,
				address = EXCLUDED.address, amount_base = EXCLUDED.amount_base, amount_cents = EXCLUDED.amount_cents`,
			c.Network, c.TxID, c.Index, c.Asset, c.IntentID, c.Address, c.AmountBase, c.AmountCents)
	}
	if err != nil {
		t.Fatalf("pgtest: record %+v: %v", c, err)
	}
}

// Listen runs db's TimelineListener, as `kernodeck api` does (live streams
// woken, order views cached), until the test ends or stop is called; it
// returns once the listener listens.
func Listen(t testing.TB, db *postgres.DB) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tl := db.NewTimelineListener(nil)
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()
	select {
	case <-tl.Listening():
	case err := <-done:
		cancel()
		t.Fatalf("pgtest: listener: %v", err)
	}
	var stopped bool
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("pgtest: listener: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return stop
}
