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
