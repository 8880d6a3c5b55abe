package postgres_test

import (
	"context"
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

func quote() domain.Quote {
	return domain.Quote{Configuration: domain.Configuration{Model: "rtx-a5000", Lots: 1, DurationDays: 3, Preset: "python"},
		GPUsPerLot: 1, TotalGPUs: 1, LotCents: 2357, TotalCents: 2357}
}

// mails lists the templates queued for an account, oldest first.
func mails(t *testing.T, db *postgres.DB, accountID int64) []string {
	t.Helper()
	var out []string
	require.NoError(t, db.Select(&out, `SELECT template FROM mail_outbox WHERE account_id = $1 ORDER BY id`, accountID))
	return out
}

// A registered account gets its confirmation mail and nothing else, and one
// unpaid order at most, until its address is confirmed; then order mails
// are queued again and the limit is gone. Accounts created any other way
// (existing ones, operators, fixtures) count as confirmed.
func TestRegisteredAccountUnverifiedUntilConfirmed(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	a, err := db.RegisterAccount(ctx, domain.Account{FirstName: "Ada", LastName: "Lovelace", Email: "Ada@Example.com"}, "$argon2id$fake", time.Now())
	require.NoError(t, err)
	require.False(t, a.EmailVerified)
	require.Equal(t, []string{postgres.MailEmailVerification}, mails(t, db, a.ID))

	o, err := db.CreateOrder(ctx, a.ID, quote())
	require.NoError(t, err)
	_, err = db.CreateOrder(ctx, a.ID, quote())
	require.Equal(t, domain.ECodeEmailUnverified, domain.ErrorCode(err), "%v", err)
	var orders int
	require.NoError(t, db.Get(&orders, `SELECT count(*) FROM orders WHERE account_id = $1`, a.ID))
	require.Equal(t, 1, orders)
	// The order's later events queue no mail either.
	require.NoError(t, db.RecordOrderEvent(ctx, activities.OrderEvent{OrderRef: o.Ref, Key: "paid", Kind: domain.EventPaid,
		Message: "Commande réglée.", Status: domain.StatusPaid, At: time.Now()}))
	require.Equal(t, []string{postgres.MailEmailVerification}, mails(t, db, a.ID))

	// Paid, it no longer counts: another unpaid order is allowed.
	o2, err := db.CreateOrder(ctx, a.ID, quote())
	require.NoError(t, err)

	// A link names the account and its address: another address confirms nothing.
	_, err = db.VerifyEmail(ctx, a.ID, "someone@example.com")
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))
	already, err := db.VerifyEmail(ctx, a.ID, "ADA@example.com")
	require.NoError(t, err)
	require.False(t, already)
	already, err = db.VerifyEmail(ctx, a.ID, "ada@example.com")
	require.NoError(t, err)
	require.True(t, already)
	got, err := db.Account(ctx, a.ID)
	require.NoError(t, err)
	require.True(t, got.EmailVerified)

	o3, err := db.CreateOrder(ctx, a.ID, quote())
	require.NoError(t, err, "confirmed: no unpaid-order limit")
	require.NoError(t, db.RecordOrderEvent(ctx, activities.OrderEvent{OrderRef: o2.Ref, Key: "paid", Kind: domain.EventPaid,
		Message: "Commande réglée.", Status: domain.StatusPaid, At: time.Now()}))
	require.Equal(t, []string{postgres.MailEmailVerification, postgres.MailOrderCreated, postgres.MailPaymentConfirmed},
		mails(t, db, a.ID), "orders %s, %s", o2.Ref, o3.Ref)

	fixture := mkAccount(t, db, "fixture@example.com")
	require.True(t, fixture.EmailVerified)
	var sqlID int64
	require.NoError(t, db.Get(&sqlID, `INSERT INTO accounts (first_name, last_name, email, password_hash)
		VALUES ('a', 'b', 'sql@example.com', 'h') RETURNING id`))
	byHand, err := db.Account(ctx, sqlID)
	require.NoError(t, err)
	require.True(t, byHand.EmailVerified)
}

// Orders created at once by an unconfirmed account: exactly one passes.
func TestUnverifiedOrderLimitUnderRace(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	a, err := db.RegisterAccount(ctx, domain.Account{FirstName: "Ada", LastName: "L", Email: "race@example.com"}, "h", time.Now())
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 12)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = db.CreateOrder(ctx, a.ID, quote())
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else {
			require.Equal(t, domain.ECodeEmailUnverified, domain.ErrorCode(err), "%v", err)
		}
	}
	require.Equal(t, 1, ok)
}

// Resends: one per interval and a few per day (the registration's mail
// counts), measured on the caller's clock; none for a confirmed address.
func TestResendVerificationLimits(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	a, err := db.RegisterAccount(ctx, domain.Account{FirstName: "Ada", LastName: "L", Email: "resend@example.com"}, "h", time.Now())
	require.NoError(t, err)
	var registered time.Time
	require.NoError(t, db.Get(&registered, `SELECT created_at FROM mail_outbox WHERE account_id = $1`, a.ID))

	every, perDay := 5*time.Minute, 3
	now := registered.Add(time.Minute)
	retry, err := db.ResendVerification(ctx, a.ID, now, every, perDay)
	require.NoError(t, err)
	require.Equal(t, 4*time.Minute, retry, "too soon after the registration's mail")
	require.Len(t, mails(t, db, a.ID), 1)

	now = registered.Add(every)
	retry, err = db.ResendVerification(ctx, a.ID, now, every, perDay)
	require.NoError(t, err)
	require.Zero(t, retry)
	now = now.Add(every)
	retry, err = db.ResendVerification(ctx, a.ID, now, every, perDay)
	require.NoError(t, err)
	require.Zero(t, retry)
	require.Len(t, mails(t, db, a.ID), 3)

	// The day's three are used: the next goes 24 h after the first.
	now = now.Add(time.Hour)
	retry, err = db.ResendVerification(ctx, a.ID, now, every, perDay)
	require.NoError(t, err)
	require.Equal(t, registered.Add(24*time.Hour).Sub(now), retry)
	require.Len(t, mails(t, db, a.ID), 3)
	now = registered.Add(24*time.Hour + time.Second)
	retry, err = db.ResendVerification(ctx, a.ID, now, every, perDay)
	require.NoError(t, err)
	require.Zero(t, retry)
	require.Len(t, mails(t, db, a.ID), 4)

	_, err = db.VerifyEmail(ctx, a.ID, "resend@example.com")
	require.NoError(t, err)
	_, err = db.ResendVerification(ctx, a.ID, now.Add(time.Hour), every, perDay)
	require.Equal(t, domain.ECodeEmailAlreadyVerified, domain.ErrorCode(err))
}

// A session unused for its idle timeout ends; its last use is written at
// most every SessionTouchEvery, not at each request. The order read that
// checks the session itself follows the same rule.
func TestSessionIdleTimeout(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	a := mkAccount(t, db, "idle@example.com")
	o, err := db.CreateOrder(ctx, a.ID, quote())
	require.NoError(t, err)
	tok := sha256.Sum256([]byte("idle-token"))
	require.NoError(t, db.CreateSession(ctx, tok[:], a.ID, "csrf", time.Now().Add(30*24*time.Hour), 7*24*time.Hour, domain.SessionClient{}))
	lastUse := func() time.Time {
		var at time.Time
		require.NoError(t, db.Get(&at, `SELECT last_used_at FROM sessions WHERE token_hash = $1`, tok[:]))
		return at
	}
	setLastUse := func(ago time.Duration) time.Time {
		var at time.Time
		require.NoError(t, db.Get(&at, `UPDATE sessions SET last_used_at = now() - make_interval(secs => $2)
			WHERE token_hash = $1 RETURNING last_used_at`, tok[:], ago.Seconds()))
		return at
	}

	first := lastUse()
	_, _, err = db.SessionAccount(ctx, tok[:])
	require.NoError(t, err)
	require.Equal(t, first, lastUse(), "used again at once: no write")

	// Used 4 minutes ago: still no write; 6 minutes ago: recorded now.
	at := setLastUse(4 * time.Minute)
	_, _, err = db.SessionAccount(ctx, tok[:])
	require.NoError(t, err)
	require.Equal(t, at, lastUse())
	at = setLastUse(6 * time.Minute)
	_, err = postgres.NewStore(db, nil, "").SessionOrder(ctx, tok[:], o.Ref)
	require.NoError(t, err)
	require.True(t, lastUse().After(at.Add(5*time.Minute)), "the order read records the use too")

	// Unused for 7 days less a minute: alive, and the use moves the idle end.
	at = setLastUse(7*24*time.Hour - time.Minute)
	_, _, err = db.SessionAccount(ctx, tok[:])
	require.NoError(t, err)
	require.True(t, lastUse().After(at))

	// Unused for 7 days: over, for both reads, and pruned.
	setLastUse(7*24*time.Hour + time.Second)
	_, _, err = db.SessionAccount(ctx, tok[:])
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))
	_, err = postgres.NewStore(db, nil, "").SessionOrder(ctx, tok[:], o.Ref)
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))
	n, err := db.DeleteExpiredSessions(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}
