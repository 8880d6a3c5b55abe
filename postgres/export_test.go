package postgres

import (
	"testing"
	"time"
)

// SetMigrationLockTimeout shortens the migrations' lock_timeout for the
// rest of the test.
func SetMigrationLockTimeout(t testing.TB, d time.Duration) {
	old := migrationLockTimeout
	migrationLockTimeout = d
	t.Cleanup(func() { migrationLockTimeout = old })
}

// SessionOrderPageSQL is the statement of the order's page (its tables are
// checked against the order_view triggers).
func SessionOrderPageSQL() string { return sessionOrderPageSQL }
func SessionViewSQL() string      { return sessionViewSQL }
