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

func register(t *testing.T, db *postgres.DB, first, email string) domain.Account {
	t.Helper()
	a, err := db.RegisterAccount(context.Background(), domain.Account{FirstName: first, LastName: "L", Email: email}, "hash-"+first, time.Now())
	require.NoError(t, err)
	require.False(t, a.EmailVerified)
	return a
}

func accountExists(t *testing.T, db *postgres.DB, id int64) bool {
	t.Helper()
	var n int
	require.NoError(t, db.Get(&n, `SELECT count(*) FROM accounts WHERE id = $1`, id))
	return n == 1
}

func openSession(t *testing.T, db *postgres.DB, accountID int64, token string) []byte {
	t.Helper()
	h := sha256.Sum256([]byte(token))
	require.NoError(t, db.CreateSession(context.Background(), h[:], accountID, "csrf", time.Now().Add(time.Hour), time.Hour, domain.SessionClient{}))
	return h[:]
}

// A registration replaces the address's earlier unconfirmed account that
// holds nothing, with its sessions, activity and mails, in its own
// transaction; one that has an order is left alone (its workflow runs, its
// deposit address is watched), and so is an account of another address.
func TestRegistrationReplacesUnconfirmedAccount(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	squatter := register(t, db, "Eve", "ada@example.com")
	tok := openSession(t, db, squatter.ID, "squatter")
	require.NoError(t, db.RecordActivity(ctx, squatter.ID, domain.ActivityLogin, domain.SessionClient{}))
	withOrder := register(t, db, "Mal", "grace@example.com")
	_, err := db.CreateOrder(ctx, withOrder.ID, quote())
	require.NoError(t, err)
	other := register(t, db, "Bob", "bob@example.com")

	ada := register(t, db, "Ada", "ADA@example.com")
	require.False(t, accountExists(t, db, squatter.ID), "the squatter's account is replaced")
	_, _, err = db.SessionAccount(ctx, tok)
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err), "its sessions end")
	var left int
	require.NoError(t, db.Get(&left, `SELECT (SELECT count(*) FROM mail_outbox WHERE account_id = $1)
		+ (SELECT count(*) FROM account_activity WHERE account_id = $1)`, squatter.ID))
	require.Zero(t, left)
	require.Equal(t, []string{postgres.MailEmailVerification}, mails(t, db, ada.ID))
	require.True(t, accountExists(t, db, other.ID))

	grace := register(t, db, "Grace", "grace@example.com")
	require.True(t, accountExists(t, db, withOrder.ID), "an account with an order stays")
	// Neither holds the address: the first to confirm it gets it.
	already, err := db.VerifyEmail(ctx, grace.ID, "grace@example.com")
	require.NoError(t, err)
	require.False(t, already)
	_, err = db.VerifyEmail(ctx, withOrder.ID, "grace@example.com")
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err), "taken by the account that confirmed it")
}

// A registration for an address a confirmed account holds succeeds like
// any other and leaves that account as it was: a new unconfirmed account,
// which cannot sign in with its password nor take the address.
func TestRegistrationOfKnownAddressChangesNothing(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	owner := mkAccount(t, db, "grace@example.com")
	tok := openSession(t, db, owner.ID, "owner")

	stranger := register(t, db, "Eve", "Grace@Example.com")
	require.NotEqual(t, owner.ID, stranger.ID)
	got, hash, err := db.AccountByEmail(ctx, "grace@example.com")
	require.NoError(t, err)
	require.Equal(t, owner.ID, got.ID)
	require.Equal(t, "$argon2id$fake", hash)
	_, _, err = db.SessionAccount(ctx, tok)
	require.NoError(t, err, "the owner's session stands")
	require.Empty(t, mails(t, db, owner.ID))
	_, err = db.VerifyEmail(ctx, stranger.ID, "grace@example.com")
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))

	// Registered since migration 00057, an unconfirmed account does not sign
	// in: the answer would tell that the address was no one's.
	register(t, db, "Ada", "ada@example.com")
	_, _, err = db.AccountByEmail(ctx, "ada@example.com")
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))
	// One that existed before still does.
	legacy := register(t, db, "Old", "old@example.com")
	_, err = db.Exec(`UPDATE accounts SET signin_unconfirmed = true WHERE id = $1`, legacy.ID)
	require.NoError(t, err)
	got, _, err = db.AccountByEmail(ctx, "old@example.com")
	require.NoError(t, err)
	require.Equal(t, legacy.ID, got.ID)
}

// An unconfirmed account that holds nothing expires when its newest link
// does (the TTL after its mail was sent); a mail still to send, a newer
// resend, an order or a confirmed address keeps it.
func TestExpiredRegistrationsDeleted(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	ttl := 48 * time.Hour
	age := func(id int64, d time.Duration, state string) {
		t.Helper()
		_, err := db.Exec(`UPDATE accounts SET created_at = now() - make_interval(secs => $2) WHERE id = $1`, id, d.Seconds())
		require.NoError(t, err)
		_, err = db.Exec(`UPDATE mail_outbox SET state = $3, sent_at = CASE WHEN $3 = 'sent' THEN now() - make_interval(secs => $2) END,
			created_at = now() - make_interval(secs => $2) WHERE account_id = $1`, id, d.Seconds(), state)
		require.NoError(t, err)
	}
	expired := register(t, db, "A", "a@example.com")
	tok := openSession(t, db, expired.ID, "a")
	age(expired.ID, ttl+time.Minute, "sent")
	young := register(t, db, "B", "b@example.com")
	age(young.ID, ttl-time.Minute, "sent")
	unsent := register(t, db, "C", "c@example.com")
	age(unsent.ID, ttl+time.Minute, "pending")
	resent := register(t, db, "D", "d@example.com")
	age(resent.ID, ttl+time.Minute, "sent")
	_, err := db.ResendVerification(ctx, resent.ID, time.Now(), time.Minute, 5)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE mail_outbox SET state = 'sent', sent_at = now() WHERE account_id = $1 AND state = 'pending'`, resent.ID)
	require.NoError(t, err)
	ordered := register(t, db, "E", "e@example.com")
	_, err = db.CreateOrder(ctx, ordered.ID, quote())
	require.NoError(t, err)
	age(ordered.ID, ttl+time.Minute, "sent")
	confirmed := register(t, db, "F", "f@example.com")
	_, err = db.VerifyEmail(ctx, confirmed.ID, "f@example.com")
	require.NoError(t, err)
	age(confirmed.ID, ttl+time.Minute, "sent")

	n, err := db.DeleteExpiredRegistrations(ctx, ttl)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.False(t, accountExists(t, db, expired.ID))
	_, _, err = db.SessionAccount(ctx, tok)
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))
	for _, a := range []domain.Account{young, unsent, resent, ordered, confirmed} {
		require.True(t, accountExists(t, db, a.ID), a.FirstName)
	}
}
