package postgres_test

import (
	"context"
	"crypto/sha256"
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

// newHoldsEnv has hosts RTX A5000 hosts of one GPU and the product's
// limits per account and per network; no share nor budget of unpaid holds
// unless a test sets them (e.capa).
func newHoldsEnv(t *testing.T, hosts int) *holdsEnv {
	e := &holdsEnv{t: t, ctx: context.Background(), db: pgtest.NewDB(t)}
	for i := range hosts {
		addGPUHost(t, e.db, fmt.Sprintf("gpu-%d", i+1), "rtx-a5000", 1)
	}
	e.acts = &activities.Activities{
		Store:    e.db,
		Payments: e,
		Now:      func() time.Time { return *e.now.Load() },
	}
	e.capa(func(c *postgres.Capacity) {})
	e.setClock(0)
	return e
}

// capa sets the activity's capacity rules: the defaults changed by set.
func (e *holdsEnv) capa(set func(*postgres.Capacity)) {
	c := postgres.Capacity{DB: e.db, Provisioner: postgres.ProvisionerSSH,
		MaxUnpaidPerAccount: domain.DefaultUnpaidHolds, MaxUnpaidPerNetwork: domain.DefaultUnpaidHolds}
	set(&c)
	e.acts.Capacity = c
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
	// A new request replaces the order's open one (as package payments
	// does).
	if _, err := e.db.ExecContext(ctx, `UPDATE payment_intents SET status = 'superseded'
		WHERE target_ref = $1 AND status = 'open'`, in.TargetRef); err != nil {
		return domain.Intent{}, err
	}
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
		AccountID: acc, Asset: "BTC", Network: "bitcoin", USDCents: 2357, RequestKey: fmt.Sprintf("intent:%d", e.n.Load()+1)})
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

// made checks that ref's latest request was made (a payment asked) and
// whether the order now holds a machine.
func (e *holdsEnv) made(ref string, held bool, msg string) {
	e.t.Helper()
	intents, _ := e.written(ref)
	require.NotZero(e.t, intents, "%s: the request is made", msg)
	var live int
	require.NoError(e.t, e.db.Get(&live, `SELECT count(*) FROM live_capacity_holds WHERE order_ref = $1`, ref))
	require.Equal(e.t, held, live == 1, "%s: held", msg)
}

func (e *holdsEnv) heldUntil(ref string) time.Time {
	e.t.Helper()
	var at time.Time
	require.NoError(e.t, e.db.Get(&at, `SELECT held_until FROM capacity_holds WHERE order_ref = $1 AND state = 'held'`, ref))
	return at
}

func (e *holdsEnv) exec(q string, args ...any) {
	e.t.Helper()
	_, err := e.db.Exec(q, args...)
	require.NoError(e.t, err)
}

// netHash is the stored form of a client network (postgres.networkKey).
func netHash(network string) []byte {
	h := sha256.Sum256([]byte("kd-network:" + network))
	return h[:]
}

// 5 hosts, one account with 5 orders asking for 5 payment requests: every
// request is made, but the account holds at most 2 hosts (the 3 others are
// made without a hold), and another customer still gets a host; a third
// account on the first one's network takes no hold either (2 per network).
// A hold whose request saw no payment lapses at its short deadline (20
// minutes) and frees its host; a payment seen extends a hold to the
// request's deadline plus the grace.
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
	// so a third request holds; then the account is at its limit.
	require.Equal(t, 1, e.liveHolds(mallory))
	require.Equal(t, "", e.request(refs[2], mallory, net))
	require.Equal(t, 2, e.liveHolds(mallory))
	for _, ref := range refs[3:] {
		require.Equal(t, "", e.request(ref, mallory, net))
		e.made(ref, false, "past the account's limit")
	}
	require.Equal(t, 2, e.liveHolds(mallory))

	// Another customer, from another network, still gets a host.
	alice := seedAccount(t, e.db, "alice@example.com")
	aliceRef := seedOrder(t, e.db, alice, 1)
	require.Equal(t, "", e.request(aliceRef, alice, "198.51.100.20"))
	require.Equal(t, 1, e.liveHolds(alice))

	// A fresh account on mallory's network (IPv6 counts per /56: another
	// /64 of it is the same network) holds nothing yet and takes no hold:
	// the network holds its 2. From another network it holds.
	sybil := seedAccount(t, e.db, "sybil@example.com")
	sybilRef := seedOrder(t, e.db, sybil, 1)
	require.Equal(t, "", e.request(sybilRef, sybil, domain.ClientNetwork("2001:db8:7:2a::9")))
	e.made(sybilRef, false, "past the network's limit")
	sybilRef2 := seedOrder(t, e.db, sybil, 1)
	require.Equal(t, "", e.request(sybilRef2, sybil, domain.ClientNetwork("2001:db8:7:100::9")))
	e.made(sybilRef2, true, "the next /56 is another network")

	// refs[1]'s hold ends in about a minute (held 19 minutes ago). A payment
	// seen in the mempool keeps it until the request's deadline + 15 min.
	var intentID, address string
	var deadline time.Time
	require.NoError(t, e.db.QueryRow(`SELECT id, address, deadline FROM payment_intents WHERE target_ref = $1`, refs[1]).
		Scan(&intentID, &address, &deadline))
	require.WithinDuration(t, time.Now().Add(time.Minute), e.heldUntil(refs[1]), 5*time.Second)
	ok, err := e.db.AcquireLease(e.ctx, "bitcoin", "w", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, e.db.RecordMempool(e.ctx, "bitcoin", "w", []chainwatch.Seen{
		{TxID: "paid1", Asset: "BTC", Address: address, Amount: big.NewInt(36000)}}))
	require.WithinDuration(t, deadline.Add(domain.HoldGrace), e.heldUntil(refs[1]), time.Millisecond)

	// Dust seen on refs[2]'s request extends nothing (it costs nothing).
	var addr2 string
	require.NoError(t, e.db.Get(&addr2, `SELECT address FROM payment_intents WHERE target_ref = $1`, refs[2]))
	before := e.heldUntil(refs[2])
	require.NoError(t, e.db.RecordMempool(e.ctx, "bitcoin", "w", []chainwatch.Seen{
		{TxID: "dust1", Asset: "BTC", Address: addr2, Amount: big.NewInt(10), Dust: true}}))
	require.Equal(t, before, e.heldUntil(refs[2]))

	// A payment seen after its hold lapsed does not take it back: refs[0]'s
	// host may be another order's by now.
	var addr0 string
	require.NoError(t, e.db.Get(&addr0, `SELECT address FROM payment_intents WHERE target_ref = $1`, refs[0]))
	require.NoError(t, e.db.RecordMempool(e.ctx, "bitcoin", "w", []chainwatch.Seen{
		{TxID: "late1", Asset: "BTC", Address: addr0, Amount: big.NewInt(36000)}}))
	var live int
	require.NoError(t, e.db.Get(&live, `SELECT count(*) FROM live_capacity_holds WHERE order_ref = $1`, refs[0]))
	require.Zero(t, live)
}

// Five requests of one account at once, from five networks: all are made,
// exactly two with a hold (the decision is made under the account's lock).
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
	held := 0
	for i, c := range codes {
		require.Equal(t, "", c, "request %d", i)
		intents, holds := e.written(refs[i])
		require.Equal(t, 1, intents)
		held += holds
	}
	require.Equal(t, domain.DefaultUnpaidHolds, held)
	require.Equal(t, domain.DefaultUnpaidHolds, e.liveHolds(acc))
}

// A hold belongs to whoever took it: the account and the network that
// asked are recorded on the hold, and a second ask from another network
// neither moves it (the order's hold_network does change) nor extends it.
// The network limit counts the hold under its owner: the first network is
// still at its limit, the second is not charged for it. The owners cannot
// be rewritten.
func TestHoldBelongsToWhoeverTookIt(t *testing.T) {
	e := newHoldsEnv(t, 4)
	e.capa(func(c *postgres.Capacity) { c.MaxUnpaidPerNetwork = 1 })
	mallory := seedAccount(t, e.db, "owner@example.com")
	ref := seedOrder(t, e.db, mallory, 1)
	first, second := "203.0.113.7", "198.51.100.9"

	e.setClock(10 * time.Minute)
	require.Equal(t, "", e.request(ref, mallory, first))
	e.made(ref, true, "first request")
	until := e.heldUntil(ref)
	var owner struct {
		Account int64  `db:"account_id"`
		Network []byte `db:"network"`
	}
	require.NoError(t, e.db.Get(&owner, `SELECT account_id, network FROM capacity_holds WHERE order_ref = $1`, ref))
	require.Equal(t, mallory, owner.Account)
	require.Equal(t, netHash(first), owner.Network)

	// A second request, 10 minutes later, from another network.
	e.setClock(0)
	require.Equal(t, "", e.request(ref, mallory, second))
	intents, holds := e.written(ref)
	require.Equal(t, 2, intents, "the second request is made")
	require.Equal(t, 1, holds, "with the same hold")
	require.Equal(t, until, e.heldUntil(ref), "a new request never extends a hold")
	var orderNet []byte
	require.NoError(t, e.db.Get(&orderNet, `SELECT hold_network FROM orders WHERE ref = $1`, ref))
	require.Equal(t, netHash(second), orderNet, "the order names the latest ask's network")
	require.NoError(t, e.db.Get(&owner, `SELECT account_id, network FROM capacity_holds WHERE order_ref = $1`, ref))
	require.Equal(t, netHash(first), owner.Network, "the hold still belongs to the first network")

	// The first network still holds its one; the second holds none.
	bob := seedAccount(t, e.db, "bob@example.com")
	bobRef := seedOrder(t, e.db, bob, 1)
	require.Equal(t, "", e.request(bobRef, bob, first))
	e.made(bobRef, false, "the first network is at its limit")
	carol := seedAccount(t, e.db, "carol@example.com")
	carolRef := seedOrder(t, e.db, carol, 1)
	require.Equal(t, "", e.request(carolRef, carol, second))
	e.made(carolRef, true, "the second network holds nothing")

	_, err := e.db.Exec(`UPDATE capacity_holds SET network = $2 WHERE order_ref = $1`, ref, netHash(second))
	require.Error(t, err, "the owners are never rewritten")
}

// An account whose address is not confirmed takes no hold, but its
// request is made; once confirmed it holds.
func TestUnconfirmedAccountTakesNoHold(t *testing.T) {
	e := newHoldsEnv(t, 2)
	acc := seedAccount(t, e.db, "unconfirmed@example.com")
	ref := seedOrder(t, e.db, acc, 1)
	e.exec(`UPDATE accounts SET email_verified_at = NULL WHERE id = $1`, acc)
	require.Equal(t, "", e.request(ref, acc, "203.0.113.1"))
	e.made(ref, false, "unconfirmed")
	e.exec(`UPDATE accounts SET email_verified_at = now() WHERE id = $1`, acc)
	require.Equal(t, "", e.request(ref, acc, "203.0.113.1"))
	e.made(ref, true, "confirmed")
}

// Holds of unpaid orders take at most the share of the model's hosts in
// service: 4 hosts (and 2 broken ones, not counted) at 50 %, the 3rd unpaid
// hold is refused (its request made); a paid order's hold does not count.
func TestUnpaidHoldsStayWithinTheShare(t *testing.T) {
	e := newHoldsEnv(t, 4)
	// Two broken hosts: counted, the share would allow 3 (6 × 50 %).
	addGPUHost(t, e.db, "gpu-broken-1", "rtx-a5000", 1)
	addGPUHost(t, e.db, "gpu-broken-2", "rtx-a5000", 1)
	e.exec(`UPDATE gpu_hosts SET state = 'broken' WHERE name LIKE 'gpu-broken-%'`)
	e.capa(func(c *postgres.Capacity) { c.UnpaidShare = new(50) })
	refs := make([]string, 4)
	accs := make([]int64, 4)
	for i := range refs {
		accs[i] = seedAccount(t, e.db, fmt.Sprintf("share%d@example.com", i))
		refs[i] = seedOrder(t, e.db, accs[i], 1)
	}
	net := func(i int) string { return fmt.Sprintf("198.51.100.%d", i+1) }
	for i := range 2 {
		require.Equal(t, "", e.request(refs[i], accs[i], net(i)))
		e.made(refs[i], true, fmt.Sprintf("unpaid hold %d", i+1))
	}
	require.Equal(t, "", e.request(refs[2], accs[2], net(2)))
	e.made(refs[2], false, "the 3rd unpaid hold passes the share")
	// refs[0] is paid: its hold is a payer's, out of the share.
	setStatus(t, e.db, refs[0], domain.StatusPaid)
	require.Equal(t, "", e.request(refs[2], accs[2], net(2)))
	e.made(refs[2], true, "a paid order's hold is not counted")
	require.Equal(t, "", e.request(refs[3], accs[3], net(3)))
	e.made(refs[3], false, "the share is full again")
}

// The local driver counts the share in GPUs: rtx-a5000's inventory at 25 %
// leaves room for one order of 2 GPUs' hold only when no more than that is
// held for unpaid orders.
func TestUnpaidShareInGPUsWithTheLocalDriver(t *testing.T) {
	e := newHoldsEnv(t, 0)
	e.exec(`UPDATE gpu_inventory SET total_gpus = 8 WHERE gpu_model = 'rtx-a5000'`)
	e.capa(func(c *postgres.Capacity) { c.Provisioner = postgres.ProvisionerLocal; c.UnpaidShare = new(25) })
	a := seedAccount(t, e.db, "gpus-a@example.com")
	b := seedAccount(t, e.db, "gpus-b@example.com")
	refA, refB := seedOrder(t, e.db, a, 2), seedOrder(t, e.db, b, 1)
	require.Equal(t, "", e.request(refA, a, "198.51.100.1"))
	e.made(refA, true, "2 of the 2 GPUs the share allows")
	require.Equal(t, "", e.request(refB, b, "198.51.100.2"))
	e.made(refB, false, "one GPU more passes the share")
}

// Each account and each network has a daily budget of unpaid hold time:
// holds that lapsed (or were given back, until then) spend it, holds a
// reservation consumed do not. Past it, requests are made without a hold.
func TestUnpaidHoldTimeBudget(t *testing.T) {
	e := newHoldsEnv(t, 4)
	e.capa(func(c *postgres.Capacity) {
		c.MaxUnpaidPerAccount, c.MaxUnpaidPerNetwork, c.UnpaidHoldBudget = 0, 0, time.Hour
	})
	acc := seedAccount(t, e.db, "budget@example.com")
	net := "203.0.113.50"
	past := func(status, state, created, until, updated string) {
		ref := seedOrder(t, e.db, acc, 1)
		setStatus(t, e.db, ref, status)
		e.exec(`INSERT INTO capacity_holds (order_ref, gpu_model, gpus, held_until, state, created_at, updated_at, account_id, network)
			VALUES ($1, 'rtx-a5000', 1, now() - $3::interval, $2, now() - $4::interval, now() - $5::interval, $6, $7)`,
			ref, state, until, created, updated, acc, netHash(net))
	}
	// Lapsed unpaid: 30 minutes spent.
	past(domain.StatusExpired, "held", "5 hours", "4 hours 30 minutes", "5 hours")
	// Given back 5 minutes after it was taken (its end was an hour later).
	past(domain.StatusCancelled, "released", "2 hours", "1 hour", "1 hour 55 minutes")
	// Consumed by a reservation: a payer's, nothing spent.
	past(domain.StatusActive, "consumed", "3 hours", "1 hour", "1 hour")
	// Older than 24 hours: out of the window.
	past(domain.StatusExpired, "held", "30 hours", "25 hours", "30 hours")

	// 35 minutes spent: a hold of 20 fits (55 minutes of 60).
	ref := seedOrder(t, e.db, acc, 1)
	require.Equal(t, "", e.request(ref, acc, net))
	e.made(ref, true, "within the budget")
	// 55 minutes spent: another 20 does not fit.
	ref2 := seedOrder(t, e.db, acc, 1)
	require.Equal(t, "", e.request(ref2, acc, "198.51.100.77"))
	e.made(ref2, false, "past the account's budget")

	// The network spent it too: a fresh account there takes no hold; from
	// another network it does.
	other := seedAccount(t, e.db, "budget-other@example.com")
	ref3 := seedOrder(t, e.db, other, 1)
	require.Equal(t, "", e.request(ref3, other, net))
	e.made(ref3, false, "past the network's budget")
	ref4 := seedOrder(t, e.db, other, 1)
	require.Equal(t, "", e.request(ref4, other, "198.51.100.78"))
	e.made(ref4, true, "another network")
}

// The paid line comes first: while paid orders wait for a machine of the
// model and size, a new hold (for a request or a balance payment) takes a
// free host only when more are free than wait; the request is made
// without a hold, the balance payment refused.
func TestPaidLineComesBeforeNewHolds(t *testing.T) {
	e := newHoldsEnv(t, 2)
	payer := seedAccount(t, e.db, "payer@example.com")
	waiting := seedOrder(t, e.db, payer, 1)
	e.exec(`UPDATE orders SET status = 'waiting_for_machine', paid_at = now() WHERE ref = $1`, waiting)
	// Another size's line does not count.
	other := seedOrder(t, e.db, payer, 2)
	e.exec(`UPDATE orders SET status = 'waiting_for_machine', paid_at = now() WHERE ref = $1`, other)

	a := seedAccount(t, e.db, "line-a@example.com")
	b := seedAccount(t, e.db, "line-b@example.com")
	refA, refB := seedOrder(t, e.db, a, 1), seedOrder(t, e.db, b, 1)
	require.Equal(t, "", e.request(refA, a, "198.51.100.1"))
	e.made(refA, true, "2 free hosts, 1 paid order waiting")
	require.Equal(t, "", e.request(refB, b, "198.51.100.2"))
	e.made(refB, false, "1 free host, 1 paid order waiting: it is the payer's")
	capa := postgres.Capacity{DB: e.db, Provisioner: postgres.ProvisionerSSH}
	require.Equal(t, domain.ECodeNoCapacity, domain.ErrorCode(hold(capa, refB, time.Now().Add(time.Hour))),
		"a balance payment does not take the payer's host either")

	// The waiting order served: the host is free for anyone.
	setStatus(t, e.db, waiting, domain.StatusActive)
	require.Equal(t, "", e.request(refB, b, "198.51.100.2"))
	e.made(refB, true, "nobody waits")
}

// The request is refused (no_capacity, nothing written) only when every
// host of the configuration is rented or held by paid orders; a host held
// for an unpaid order may still come back, so then the request is made.
func TestNoCapacityOnlyWhenPayersHoldEverything(t *testing.T) {
	e := newHoldsEnv(t, 3)
	e.exec(`UPDATE gpu_hosts SET state = 'in_use' WHERE name = 'gpu-3'`)
	accs := make([]int64, 3)
	refs := make([]string, 3)
	for i := range refs {
		accs[i] = seedAccount(t, e.db, fmt.Sprintf("full%d@example.com", i))
		refs[i] = seedOrder(t, e.db, accs[i], 1)
	}
	net := func(i int) string { return fmt.Sprintf("198.51.100.%d", i+1) }
	require.Equal(t, "", e.request(refs[0], accs[0], net(0)))
	require.Equal(t, "", e.request(refs[1], accs[1], net(1)))
	setStatus(t, e.db, refs[0], domain.StatusPaid)
	// gpu-1 held by a paid order, gpu-2 by an unpaid one, gpu-3 rented.
	require.Equal(t, "", e.request(refs[2], accs[2], net(2)))
	e.made(refs[2], false, "the unpaid hold may lapse")

	setStatus(t, e.db, refs[1], domain.StatusPaymentDetected)
	require.Equal(t, "", e.request(refs[2], accs[2], net(2)), "a payment seen is not a payer yet")
	setStatus(t, e.db, refs[1], domain.StatusPaid)
	before, _ := e.written(refs[2])
	require.Equal(t, domain.ECodeNoCapacity, e.request(refs[2], accs[2], net(2)))
	after, holds := e.written(refs[2])
	require.Equal(t, before, after, "no payment asked")
	require.Zero(t, holds)
}
