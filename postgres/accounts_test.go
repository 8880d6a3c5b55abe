package postgres_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

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
	require.NoError(t, db.CreateSession(ctx, old[:], a.ID, "csrf-old", time.Now().Add(-time.Minute)))
	require.NoError(t, db.CreateSession(ctx, live[:], a.ID, "csrf-live", time.Now().Add(30*24*time.Hour)))

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

func TestLoginFailuresCountPerEmailAndIP(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	for range 3 {
		require.NoError(t, db.RecordLoginFailure(ctx, "Who@Example.com", "10.0.0.1"))
	}
	require.NoError(t, db.RecordLoginFailure(ctx, "other@example.com", "10.0.0.1"))
	require.NoError(t, db.RecordLoginFailure(ctx, "who@example.com", "10.0.0.2"))
	_, err := db.Exec(`INSERT INTO login_failures (email, ip, at) VALUES ('who@example.com', '10.0.0.1', now() - interval '1 hour')`)
	require.NoError(t, err)

	perEmail, perIP, err := db.RecentLoginFailures(ctx, "WHO@example.com", "10.0.0.1", 15*time.Minute)
	require.NoError(t, err)
	require.Equal(t, 4, perEmail)
	require.Equal(t, 4, perIP)

	require.NoError(t, db.ClearLoginFailures(ctx, "who@EXAMPLE.com"))
	perEmail, perIP, err = db.RecentLoginFailures(ctx, "who@example.com", "10.0.0.1", 15*time.Minute)
	require.NoError(t, err)
	require.Equal(t, 0, perEmail)
	require.Equal(t, 1, perIP)
}
