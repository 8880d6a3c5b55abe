package postgres_test

import (
	"context"
	"crypto/sha256"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// viewReadsLive are the relations the order's view statement reads that
// need no notification, and why.
var viewReadsLive = map[string]string{
	"chain_blocks": "the tips are read with every request whose view has a payment in a block (confirmations)",
}

// Every table the owner's view of an order reads notifies the order_view
// channel when it changes (migration 00073), and the session's tables the
// session_view channel (00074), so that no change can leave a cached view
// or session behind.
func TestOrderViewTablesNotify(t *testing.T) {
	db := pgtest.NewDB(t)
	var triggered []string
	require.NoError(t, db.Select(&triggered, `SELECT DISTINCT c.relname FROM pg_trigger g
		JOIN pg_class c ON c.oid = g.tgrelid
		WHERE g.tgfoid IN ('order_view_notify'::regproc, 'session_view_notify'::regproc)`))
	read := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?:FROM|JOIN)\s+([a-z_]+)\s`).FindAllStringSubmatch(postgres.SessionOrderPageSQL(), -1) {
		read[m[1]] = true
	}
	// A view notifies through the tables it reads.
	if read["live_capacity_holds"] {
		delete(read, "live_capacity_holds")
		read["capacity_holds"] = true
	}
	for _, table := range []string{"orders", "timeline_events", "payment_intents", "chain_payments", "gpu_models", "sessions", "accounts"} {
		require.True(t, read[table], "the statement's tables are not found (%s)", table)
	}
	for table := range read {
		if viewReadsLive[table] == "" {
			assert.Contains(t, triggered, table, "the view reads %s, which notifies no change", table)
		}
	}
}

// viewFixture is an account with a session and an order, and a listener
// keeping the DB's cached views.
type viewFixture struct {
	ctx   context.Context
	t     *testing.T
	db    *postgres.DB
	store *postgres.Store
	// whole reads the same database through a pool of its own, whose
	// cache no listener keeps: every read is whole.
	whole *postgres.Store
	acc   domain.Account
	ref   string
	tok   []byte
	stop  func()
}

func newViewFixture(t *testing.T, email string) *viewFixture {
	t.Helper()
	ctx := context.Background()
	db := pgtest.NewDB(t)
	f := &viewFixture{ctx: ctx, t: t, db: db, store: postgres.NewStore(db, nil, "")}
	other, err := postgres.Open(ctx, db.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	f.whole = postgres.NewStore(other, nil, "")
	f.acc = mkAccount(t, db, email)
	f.ref = mkOrder(t, db, f.acc.ID, "rtx-a5000", 1).Ref
	tok := sha256.Sum256([]byte(email))
	f.tok = tok[:]
	require.NoError(t, db.CreateSession(ctx, f.tok, f.acc.ID, "csrf", time.Now().Add(time.Hour), time.Hour, domain.SessionClient{}))
	f.stop = pgtest.Listen(t, db)
	return f
}

// read is the view as a session reads it (cached while the listener runs).
func (f *viewFixture) read(page bool) domain.SessionOrder { return f.readFrom(f.store, page) }

// fresh is the view read whole, the cache left as it is.
func (f *viewFixture) fresh(page bool) domain.SessionOrder { return f.readFrom(f.whole, page) }

func (f *viewFixture) readFrom(st *postgres.Store, page bool) domain.SessionOrder {
	f.t.Helper()
	read := st.SessionOrder
	if page {
		read = st.SessionOrderPage
	}
	so, err := read(f.ctx, f.tok, f.ref)
	require.NoError(f.t, err)
	return so
}

func (f *viewFixture) exec(query string, args ...any) {
	f.t.Helper()
	_, err := f.db.Exec(query, args...)
	require.NoError(f.t, err)
}

// quiet runs a write whose triggers do not fire: nobody is notified.
func (f *viewFixture) quiet(query string, args ...any) {
	f.t.Helper()
	tx := f.db.MustBegin()
	_, err := tx.Exec(`SET LOCAL session_replication_role = replica`)
	require.NoError(f.t, err)
	_, err = tx.Exec(query, args...)
	require.NoError(f.t, err)
	require.NoError(f.t, tx.Commit())
}

// follows waits until both cached reads show what the statement reads.
func (f *viewFixture) follows(what string) {
	f.t.Helper()
	for _, page := range []bool{false, true} {
		require.EventuallyWithT(f.t, func(c *assert.CollectT) {
			cached := f.read(page)
			assert.Equal(c, f.fresh(page), cached)
		}, 10*time.Second, 5*time.Millisecond, "%s (page %v): the cached view stays behind", what, page)
		f.read(page) // cached again for the next change
	}
}

// The cached view is read (a change that notifies nobody is not seen), and
// every change to a table the view reads reaches it: after each, the
// cached reads equal a whole read.
func TestCachedOrderViewFollowsEveryChange(t *testing.T) {
	f := newViewFixture(t, "views@example.com")
	ctx, db, ref := f.ctx, f.db, f.ref

	// Served from the cache: a quiet change stays unseen until a
	// notified one (waiting for a listener's ping when none answered yet).
	require.Eventually(t, func() bool {
		before := f.read(false)
		f.quiet(`UPDATE orders SET updated_at = updated_at + interval '1 second' WHERE ref = $1`, ref)
		return f.read(false).Order.Order.UpdatedAt.Equal(before.Order.Order.UpdatedAt)
	}, 10*time.Second, 5*time.Millisecond, "the view is never served from the cache")
	f.exec(`UPDATE orders SET updated_at = now() WHERE ref = $1`, ref)
	f.follows("orders")

	f.exec(`INSERT INTO capacity_holds (order_ref, gpu_model, gpus, held_until) VALUES ($1, 'rtx-a5000', 1, now() + interval '1 hour')`, ref)
	f.follows("capacity_holds")
	require.True(t, f.read(false).Order.MachineHold.Held)

	seedIntent(t, db, "PI-VIEW", ref, f.acc.ID, "btc-view-1", 7)
	f.follows("payment_intents")
	_, err := db.ClaimPaid(ctx, "PI-VIEW", f.acc.ID, time.Now())
	require.NoError(t, err)
	f.follows("payment_claims")
	f.exec(`DELETE FROM payment_claims WHERE intent_id = 'PI-VIEW'`) // a deletion notifies too
	f.follows("payment_claims (deleted)")
	_, err = db.ClaimPaid(ctx, "PI-VIEW", f.acc.ID, time.Now())
	require.NoError(t, err)
	f.follows("payment_claims (again)")

	f.exec(`INSERT INTO chain_blocks (network, height, hash) VALUES ('bitcoin', 100, 'h100')`)
	f.exec(`INSERT INTO chain_payments (network, txid, output_index, asset, intent_id, address, amount_base, amount_cents,
		late, state, block_height) VALUES ('bitcoin', 'view-tx', 0, 'BTC', 'PI-VIEW', 'btc-view-1', 36262, 2357, false, 'seen', 100)`)
	f.follows("chain_payments")
	require.Equal(t, int64(1), f.read(false).Order.Payments["PI-VIEW"][0].Confirmations)
	// The tip is read with the session: a new block counts at once, the
	// view cached or not.
	f.quiet(`INSERT INTO chain_blocks (network, height, hash) VALUES ('bitcoin', 101, 'h101')`)
	require.Equal(t, int64(2), f.read(false).Order.Payments["PI-VIEW"][0].Confirmations)
	require.Equal(t, int64(2), f.read(true).Order.Payments["PI-VIEW"][0].Confirmations)
	f.exec(`UPDATE chain_payments SET state = 'confirmed' WHERE txid = 'view-tx'`)
	f.follows("chain_payments (state)")

	f.exec(`INSERT INTO payment_exceptions (target_kind, target_ref, account_id, reason, payment_key, network, txid, amount_cents)
		VALUES ('order', $1, $2, 'late', 'bitcoin:view-late:0', 'bitcoin', 'view-late', 100)`, ref, f.acc.ID)
	f.follows("payment_exceptions")
	require.Equal(t, int64(100), f.read(false).Order.Order.LateCents)

	f.exec(`INSERT INTO order_access (order_ref, host, port, username, gpu_model_seen, gpu_count_seen,
		driver_version, cuda_version) VALUES ($1, 'gpu1.example', 22, 'kd', 'RTX A5000', 1, '550', '12.4')`, ref)
	f.follows("order_access")
	setStatus(t, db, ref, domain.StatusActive)
	f.follows("orders (status)")
	require.NotNil(t, f.read(false).Order.Access)

	_, err = db.CreateSupportRequest(ctx, domain.SupportRequest{OrderRef: ref, AccountID: f.acc.ID, Message: "Le GPU n'apparaît pas."})
	require.NoError(t, err)
	f.follows("support_requests")
	require.Len(t, f.read(true).Page.SupportRequests, 1)
	_, err = db.RequestKeyChange(ctx, ref, domain.KeyRequestReissue, "")
	require.NoError(t, err)
	f.follows("access_key_requests")
	require.NotNil(t, f.read(true).Page.KeyRequest)

	f.exec(`INSERT INTO timeline_events (ref, idem_key, kind, message) VALUES ($1, 'view-note', 'created', 'Noté.')`, ref)
	f.follows("timeline_events")
	f.exec(`UPDATE gpu_models SET display_name = 'NVIDIA RTX A5000 (vue)' WHERE model = 'rtx-a5000'`)
	f.follows("gpu_models")
	require.Equal(t, "NVIDIA RTX A5000 (vue)", f.read(false).Order.Order.ModelName)

	// Another account's session reads nothing of it, cached or not.
	other := mkAccount(t, db, "views-other@example.com")
	otok := sha256.Sum256([]byte("views-other"))
	require.NoError(t, db.CreateSession(ctx, otok[:], other.ID, "csrf", time.Now().Add(time.Hour), time.Hour, domain.SessionClient{}))
	_, err = f.store.SessionOrder(ctx, otok[:], ref)
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))
}

// The session is cached with the view: a read of an unchanged order needs
// no statement at all (a quiet change of the account stays unseen), and
// every change of the account or the session, and its end by the clock,
// reaches it.
func TestCachedSessionFollowsEveryChange(t *testing.T) {
	f := newViewFixture(t, "sessions@example.com")
	ctx, db := f.ctx, f.db
	refused := func(tok []byte) bool {
		_, err := f.store.SessionOrder(ctx, tok, f.ref)
		return domain.ErrorCode(err) == domain.ECodeNotFound
	}
	require.Eventually(t, func() bool {
		f.read(false)
		f.quiet(`UPDATE accounts SET first_name = first_name || 'x' WHERE id = $1`, f.acc.ID)
		return f.read(false).Account.FirstName != f.fresh(false).Account.FirstName
	}, 10*time.Second, 5*time.Millisecond, "the session is never served from the cache")
	f.exec(`UPDATE accounts SET first_name = 'Grace' WHERE id = $1`, f.acc.ID)
	f.follows("accounts")
	require.Equal(t, "Grace", f.read(false).Account.FirstName)

	f.exec(`UPDATE sessions SET csrf_token = 'csrf-2' WHERE token_hash = $1`, f.tok)
	f.follows("sessions")
	require.Equal(t, "csrf-2", f.read(true).CSRFToken)
	// Deleted (signed out, ended from another session, a new password):
	// refused once the notification is heard...
	f.exec(`DELETE FROM sessions WHERE token_hash = $1`, f.tok)
	require.Eventually(t, func() bool { return refused(f.tok) }, 10*time.Second, 5*time.Millisecond,
		"a deleted session is still served")
	// ...and at once after ForgetOrderViews (the API's own writes).
	tok := sha256.Sum256([]byte("sessions-forget"))
	require.NoError(t, db.CreateSession(ctx, tok[:], f.acc.ID, "csrf", time.Now().Add(time.Hour), time.Hour, domain.SessionClient{}))
	require.Eventually(t, func() bool {
		f.store.SessionOrder(ctx, tok[:], f.ref) //nolint:errcheck // filling the cache
		f.quiet(`DELETE FROM sessions WHERE token_hash = $1`, tok[:])
		served := !refused(tok[:])
		f.quiet(`INSERT INTO sessions (token_hash, account_id, csrf_token, expires_at, idle_timeout)
			VALUES ($1, $2, 'csrf', now() + interval '1 hour', interval '1 hour') ON CONFLICT DO NOTHING`, tok[:], f.acc.ID)
		return served
	}, 10*time.Second, 5*time.Millisecond, "the session is never served from the cache")
	f.quiet(`DELETE FROM sessions WHERE token_hash = $1`, tok[:])
	db.ForgetOrderViews()
	require.True(t, refused(tok[:]), "served after ForgetOrderViews")

	// The clock ends a cached session: its end is kept with it.
	clock := sha256.Sum256([]byte("sessions-clock"))
	require.NoError(t, db.CreateSession(ctx, clock[:], f.acc.ID, "csrf", time.Now().Add(2*time.Second), time.Hour, domain.SessionClient{}))
	require.False(t, refused(clock[:]))
	require.Eventually(t, func() bool { return refused(clock[:]) }, 10*time.Second, 5*time.Millisecond,
		"a session past its end is still served")
}

// A capacity hold of an unpaid order ends with the clock alone, without a
// write: the cached view ends with it.
func TestCachedOrderViewHoldEndsWithTheClock(t *testing.T) {
	f := newViewFixture(t, "views-hold@example.com")
	f.exec(`INSERT INTO capacity_holds (order_ref, gpu_model, gpus, held_until) VALUES ($1, 'rtx-a5000', 1, now() + interval '1 second')`, f.ref)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		so := f.read(false)
		assert.True(c, so.Order.MachineHold.Held)
		assert.Equal(c, f.fresh(false), f.read(false))
	}, 10*time.Second, 5*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.False(c, f.read(false).Order.MachineHold.Held)
	}, 10*time.Second, 20*time.Millisecond, "the hold's end never shows")
	require.Equal(t, f.fresh(false), f.read(false))
}

// Without a listener the cache is not read: a change nobody is told of
// shows at once.
func TestOrderViewsUnusedWithoutListener(t *testing.T) {
	f := newViewFixture(t, "views-stop@example.com")
	f.stop()
	for i := range 3 {
		f.quiet(`UPDATE orders SET updated_at = now() + make_interval(secs => $2) WHERE ref = $1`, f.ref, i+1)
		var want time.Time
		require.NoError(t, f.db.Get(&want, `SELECT updated_at FROM orders WHERE ref = $1`, f.ref))
		for _, page := range []bool{false, true} {
			require.True(t, f.read(page).Order.Order.UpdatedAt.Equal(want))
		}
	}
}
