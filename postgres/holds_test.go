package postgres_test

import (
	"context"
	"fmt"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// holdsEnv is the payment-request path of the worker over one database:
// the real activity (CreatePaymentIntent, its short hold through
// postgres.Capacity) with a payment service that stores a bitcoin request
// valid an hour from the activity's clock. The clock is the test's: a hold
// "taken 21 minutes ago" is taken with the clock 21 minutes back.
type holdsEnv struct {
	t    *testing.T
	ctx  context.Context
	db   *postgres.DB
	acts *activities.Activities
	now  atomic.Pointer[time.Time]
	n    atomic.Int64
}

func newHoldsEnv(t *testing.T, hosts int) *holdsEnv {
	e := &holdsEnv{t: t, ctx: context.Background(), db: pgtest.NewDB(t)}
	for i := range hosts {
		addGPUHost(t, e.db, fmt.Sprintf("gpu-%d", i+1), "rtx-a5000", 1)
	}
	e.acts = &activities.Activities{
		Store:    e.db,
		Payments: e,
		Capacity: postgres.Capacity{DB: e.db, Provisioner: postgres.ProvisionerSSH,
			MaxUnpaidPerAccount: domain.DefaultUnpaidHolds, MaxUnpaidPerNetwork: domain.DefaultUnpaidHolds},
		Now: func() time.Time { return *e.now.Load() },
	}
	e.setClock(0)
	return e
}

// setClock puts the activity's clock ago before the real time.
func (e *holdsEnv) setClock(ago time.Duration) {
	at := time.Now().Add(-ago)
	e.now.Store(&at)
}

// CreateIntent stores the request as package payments would (the
// activity's IntentCreator).
func (e *holdsEnv) CreateIntent(ctx context.Context, in activities.CreateIntentInput) (domain.Intent, error) {
	i := e.n.Add(1)
	it := domain.Intent{ID: fmt.Sprintf("PI-HOLD%04d", i), TargetRef: in.TargetRef, Address: fmt.Sprintf("bc1qhold%04d", i),
		Deadline: e.acts.Now().Add(time.Hour)}
	_, err := e.db.ExecContext(ctx, `INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals,
		amount_base, usd_cents, rate, rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until, request_key)
		VALUES ($1, 'order', $2, $3, 'BTC', 'bitcoin', 8, $4, 2357, 65000, 'test', now(), $5, $8,
			'bitcoin:x', $6, $6::timestamptz + interval '24 hours', $7)`,
		it.ID, in.TargetRef, in.AccountID, 36000+i, it.Address, it.Deadline, in.RequestKey, i)
	return it, err
}

// request asks for a payment request on ref from network, as the API then
// the workflow do: the ask is recorded (with its network), then the
// activity runs. It returns the activity's refusal code ("" when made).
func (e *holdsEnv) request(ref string, acc int64, network string) string {
	e.t.Helper()
	require.NoError(e.t, e.db.AskPaymentRequest(e.ctx, ref, network,
		domain.Limit{Quota: domain.QuotaOrderPaymentRequests, Max: 100, Window: time.Hour}))
	_, err := e.acts.CreatePaymentIntent(e.ctx, activities.CreateIntentInput{TargetKind: "order", TargetRef: ref,
		AccountID: acc, Asset: "BTC", Network: "bitcoin", USDCents: 2357, RequestKey: "intent:1"})
	if err == nil {
		return ""
	}
	var app *temporal.ApplicationError
	require.ErrorAs(e.t, err, &app)
	require.True(e.t, app.NonRetryable())
	return app.Type()
}

func (e *holdsEnv) liveHolds(acc int64) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.db.Get(&n, `SELECT count(*) FROM live_capacity_holds l JOIN orders o ON o.ref = l.order_ref
		WHERE o.account_id = $1`, acc))
	return n
}

func (e *holdsEnv) written(ref string) (intents, holds int) {
	e.t.Helper()
	require.NoError(e.t, e.db.Get(&intents, `SELECT count(*) FROM payment_intents WHERE target_ref = $1`, ref))
	require.NoError(e.t, e.db.Get(&holds, `SELECT count(*) FROM capacity_holds WHERE order_ref = $1`, ref))
	return intents, holds
}

// 5 hosts, one account with 5 orders asking for 5 payment requests: it
// holds at most 2 hosts (the other 3 requests are refused, with nothing
// written), and another customer still gets a host; a third account on
// the first one's network is refused too (2 per network). A hold whose
// request saw no payment lapses at its short deadline (20 minutes) and
// frees its host; a payment seen extends a hold to the request's deadline
// plus the grace.
func TestUnpaidHoldsCostTheHolder(t *testing.T) {
	e := newHoldsEnv(t, 5)
	mallory := seedAccount(t, e.db, "mallory@example.com")
	refs := make([]string, 5)
	for i := range refs {
		refs[i] = seedOrder(t, e.db, mallory, 1)
	}
	// Mallory's network, as the API names it: an IPv6 /56.
	net := domain.ClientNetwork("2001:db8:7:1::1")

	// The first two requests were asked 21 and 19 minutes ago.
	e.setClock(21 * time.Minute)
	require.Equal(t, "", e.request(refs[0], mallory, net))
	e.setClock(19 * time.Minute)
	require.Equal(t, "", e.request(refs[1], mallory, net))
	e.setClock(0)
	// refs[0]'s hold lapsed a minute ago (no payment seen): one live hold,
	// so a third request is accepted; then the account is at its limit.
	require.Equal(t, 1, e.liveHolds(mallory))
	require.Equal(t, "", e.request(refs[2], mallory, net))
	require.Equal(t, 2, e.liveHolds(mallory))
	for _, ref := range refs[3:] {
		require.Equal(t, domain.ECodeHoldLimit, e.request(ref, mallory, net))
		intents, holds := e.written(ref)
		require.Zero(t, intents, "a refused request asks no payment")
		require.Zero(t, holds)
	}

	// Another customer, from another network, still gets a host.
	alice := seedAccount(t, e.db, "alice@example.com")
	aliceRef := seedOrder(t, e.db, alice, 1)
	require.Equal(t, "", e.request(aliceRef, alice, "198.51.100.20"))
	require.Equal(t, 1, e.liveHolds(alice))

	// A fresh account on mallory's network (IPv6 counts per /56: another
	// /64 of it is the same network) holds nothing yet and is refused: the
	// network holds its 2. From another network it may hold.
	sybil := seedAccount(t, e.db, "sybil@example.com")
	sybilRef := seedOrder(t, e.db, sybil, 1)
	require.Equal(t, domain.ECodeHoldLimit, e.request(sybilRef, sybil, domain.ClientNetwork("2001:db8:7:2a::9")))
	intents, holds := e.written(sybilRef)
	require.Zero(t, intents+holds)
	require.Equal(t, "", e.request(sybilRef, sybil, domain.ClientNetwork("2001:db8:7:100::9")), "the next /56 is another network")

	// refs[1]'s hold ends in about a minute (held 19 minutes ago). A payment
	// seen in the mempool keeps it until the request's deadline + 15 min.
	var intentID, address string
	var deadline time.Time
	require.NoError(t, e.db.QueryRow(`SELECT id, address, deadline FROM payment_intents WHERE target_ref = $1`, refs[1]).
		Scan(&intentID, &address, &deadline))
	heldUntil := func(ref string) time.Time {
		var at time.Time
		require.NoError(t, e.db.Get(&at, `SELECT held_until FROM capacity_holds WHERE order_ref = $1 AND state = 'held'`, ref))
		return at
	}
	require.WithinDuration(t, time.Now().Add(time.Minute), heldUntil(refs[1]), 5*time.Second)
	ok, err := e.db.AcquireLease(e.ctx, "bitcoin", "w", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, e.db.RecordMempool(e.ctx, "bitcoin", "w", []chainwatch.Seen{
		{TxID: "paid1", Asset: "BTC", Address: address, Amount: big.NewInt(36000)}}))
	require.WithinDuration(t, deadline.Add(domain.HoldGrace), heldUntil(refs[1]), time.Millisecond)

	// Dust seen on refs[2]'s request extends nothing (it costs nothing).
	var addr2 string
	require.NoError(t, e.db.Get(&addr2, `SELECT address FROM payment_intents WHERE target_ref = $1`, refs[2]))
	before := heldUntil(refs[2])
	require.NoError(t, e.db.RecordMempool(e.ctx, "bitcoin", "w", []chainwatch.Seen{
		{TxID: "dust1", Asset: "BTC", Address: addr2, Amount: big.NewInt(10), Dust: true}}))
	require.Equal(t, before, heldUntil(refs[2]))

	// A payment seen after its hold lapsed does not take it back: refs[0]'s
	// host may be another order's by now.
	var addr0 string
	require.NoError(t, e.db.Get(&addr0, `SELECT address FROM payment_intents WHERE target_ref = $1`, refs[0]))
	require.NoError(t, e.db.RecordMempool(e.ctx, "bitcoin", "w", []chainwatch.Seen{
		{TxID: "late1", Asset: "BTC", Address: addr0, Amount: big.NewInt(36000)}}))
	var live int
	require.NoError(t, e.db.Get(&live, `SELECT count(*) FROM live_capacity_holds WHERE order_ref = $1`, refs[0]))
	require.Zero(t, live)

	// The API's Retry-After for mallory: until refs[2]'s short hold lapses
	// (the sooner of its two holds), about 20 minutes.
	wait, err := e.db.UnpaidHoldsRetry(e.ctx, mallory, net)
	require.NoError(t, err)
	require.InDelta(t, (20 * time.Minute).Seconds(), wait.Seconds(), 10)
}

// Five requests of one account at once, from five networks: exactly two
// holds are taken (the decision is made under the account's lock), the
// three others are refused and write nothing.
func TestParallelRequestsHoldAtMostTheLimit(t *testing.T) {
	e := newHoldsEnv(t, 5)
	acc := seedAccount(t, e.db, "rush@example.com")
	refs := make([]string, 5)
	for i := range refs {
		refs[i] = seedOrder(t, e.db, acc, 1)
	}
	codes := make([]string, len(refs))
	var wg sync.WaitGroup
	for i, ref := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = e.request(ref, acc, fmt.Sprintf("198.51.100.%d", i+1))
		}()
	}
	wg.Wait()
	made := 0
	for i, c := range codes {
		intents, holds := e.written(refs[i])
		switch c {
		case "":
			made++
			require.Equal(t, 1, intents)
			require.Equal(t, 1, holds)
		case domain.ECodeHoldLimit:
			require.Zero(t, intents+holds)
		default:
			t.Fatalf("request %d: %s", i, c)
		}
	}
	require.Equal(t, domain.DefaultUnpaidHolds, made)
	require.Equal(t, domain.DefaultUnpaidHolds, e.liveHolds(acc))
}
