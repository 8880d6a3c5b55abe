package postgres_test

import (
	"context"
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// mkAccount creates an account through the store.
func mkAccount(t *testing.T, db *postgres.DB, email string) domain.Account {
	t.Helper()
	a, err := db.CreateAccount(context.Background(),
		domain.Account{FirstName: "Grace", LastName: "Hopper", Email: email}, "$argon2id$fake")
	require.NoError(t, err)
	return a
}

func TestCreateAccountDuplicateEmailIsCaseInsensitive(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	a := mkAccount(t, db, "Grace@Example.com")
	require.NotZero(t, a.ID)
	require.Equal(t, "Grace@Example.com", a.Email)

	_, err := db.CreateAccount(ctx, domain.Account{FirstName: "X", LastName: "Y", Email: "grace@example.COM"}, "h")
	require.Equal(t, domain.ECodeEmailTaken, domain.ErrorCode(err))
	n, err := db.CountAccounts(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	got, hash, err := db.AccountByEmail(ctx, "GRACE@example.com")
	require.NoError(t, err)
	require.Equal(t, a.ID, got.ID)
	require.Equal(t, "$argon2id$fake", hash)

	_, _, err = db.AccountByEmail(ctx, "nobody@example.com")
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))
	_, err = db.Account(ctx, a.ID+1000)
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))
}

func TestSessionsExpireAndDelete(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	a := mkAccount(t, db, "s@example.com")
	live := sha256.Sum256([]byte("live-token"))
	old := sha256.Sum256([]byte("old-token"))
	require.NoError(t, db.CreateSession(ctx, old[:], a.ID, "csrf-old", time.Now().Add(-time.Minute), time.Hour, domain.SessionClient{}))
	require.NoError(t, db.CreateSession(ctx, live[:], a.ID, "csrf-live", time.Now().Add(30*24*time.Hour), 7*24*time.Hour, domain.SessionClient{}))

	got, csrf, err := db.SessionAccount(ctx, live[:])
	require.NoError(t, err)
	require.Equal(t, a.ID, got.ID)
	require.Equal(t, "csrf-live", csrf)

	_, _, err = db.SessionAccount(ctx, old[:])
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))

	var stored int
	require.NoError(t, db.Get(&stored, `SELECT count(*) FROM sessions WHERE token_hash = $1`, old[:]))
	require.Zero(t, stored, "expired session of the account pruned at the next login")

	require.NoError(t, db.DeleteSession(ctx, live[:]))
	_, _, err = db.SessionAccount(ctx, live[:])
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))
}

// TestThrottleDecidesAtomically: 60 parallel attempts against a limit of 5
// are allowed exactly 5 times (the sixth locks the key), whatever the
// interleaving; a lock doubles at the next strike; a success forgiven
// takes its attempt back.
func TestThrottleDecidesAtomically(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	rule := domain.ThrottleRule{Key: "login:pair:who@example.com|10.0.0.1", Limit: 5,
		Window: 15 * time.Minute, Lockout: 15 * time.Minute, MaxLockout: 24 * time.Hour}
	other := domain.ThrottleRule{Key: "login:ip:10.0.0.1", Limit: 100,
		Window: 15 * time.Minute, Lockout: 15 * time.Minute, MaxLockout: 24 * time.Hour}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			retry, err := db.Attempt(ctx, []domain.ThrottleRule{other, rule})
			assert.NoError(t, err)
			if retry == 0 {
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 5, allowed.Load())
	retry, err := db.ThrottleLocked(ctx, []domain.ThrottleRule{rule})
	require.NoError(t, err)
	require.InDelta(t, 15*time.Minute, retry, float64(time.Minute))
	// Refused attempts counted nothing under the other rule.
	var failures int
	require.NoError(t, db.Get(&failures, `SELECT failures FROM auth_throttle WHERE key = sha256($1::bytea)`, []byte(other.Key)))
	require.Equal(t, 5, failures)

	// The lock runs out: five more, then a lock twice as long.
	_, err = db.Exec(`UPDATE auth_throttle SET locked_until = now() - interval '1 second' WHERE key = sha256($1::bytea)`, []byte(rule.Key))
	require.NoError(t, err)
	for range 5 {
		retry, err := db.Attempt(ctx, []domain.ThrottleRule{rule})
		require.NoError(t, err)
		require.Zero(t, retry)
	}
	retry, err = db.Attempt(ctx, []domain.ThrottleRule{rule})
	require.NoError(t, err)
	require.Equal(t, 30*time.Minute, retry)

	// A success takes its attempt back; a reset forgets the key.
	fresh := domain.ThrottleRule{Key: "login:ip:10.0.0.9", Limit: 1,
		Window: time.Minute, Lockout: time.Minute, MaxLockout: time.Hour}
	for range 3 {
		retry, err := db.Attempt(ctx, []domain.ThrottleRule{fresh})
		require.NoError(t, err)
		require.Zero(t, retry)
		require.NoError(t, db.Forgive(ctx, []string{fresh.Key}, nil))
	}
	require.NoError(t, db.Forgive(ctx, nil, []string{rule.Key}))
	retry, err = db.Attempt(ctx, []domain.ThrottleRule{rule})
	require.NoError(t, err)
	require.Zero(t, retry)
}

func TestLockoutDoublesUpToTheCap(t *testing.T) {
	r := domain.ThrottleRule{Key: "k", Limit: 1, Window: time.Minute, Lockout: 15 * time.Minute, MaxLockout: time.Hour}
	require.Equal(t, []time.Duration{15 * time.Minute, 30 * time.Minute, time.Hour, time.Hour},
		[]time.Duration{r.LockoutAfter(0), r.LockoutAfter(1), r.LockoutAfter(2), r.LockoutAfter(50)})
}
