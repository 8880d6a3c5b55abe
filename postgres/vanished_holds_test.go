package postgres_test

import (
	"context"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// vanishEnv is a database with one host per order of a test, each order
// awaiting payment with a bitcoin request and a short (20 minutes) hold on
// its own host, and bitcoin's lease taken as "w".
type vanishEnv struct {
	t   *testing.T
	ctx context.Context
	db  *postgres.DB
	acc int64
	n   int
}

func newVanishEnv(t *testing.T) *vanishEnv {
	e := &vanishEnv{t: t, ctx: context.Background(), db: pgtest.NewDB(t)}
	e.acc = seedAccount(t, e.db, "vanish@example.com")
	ok, err := e.db.AcquireLease(e.ctx, "bitcoin", "w", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	return e
}

// order seeds an order, its request (address returned) and its short hold.
func (e *vanishEnv) order() (ref, address string) {
	e.t.Helper()
	e.n++
	host := fmt.Sprintf("gpu-vanish-%d", e.n)
	addGPUHost(e.t, e.db, host, "rtx-a5000", 1)
	ref = seedOrder(e.t, e.db, e.acc, 1)
	address = fmt.Sprintf("bc1qvanish%d", e.n)
	seedIntent(e.t, e.db, fmt.Sprintf("PI-VANISH%d", e.n), ref, e.acc, address, 950+e.n)
	_, err := e.db.Exec(`INSERT INTO capacity_holds (order_ref, gpu_model, gpus, host_id, held_until)
		VALUES ($1, 'rtx-a5000', 1, (SELECT id FROM gpu_hosts WHERE name = $2), now() + interval '20 minutes')`, ref, host)
	require.NoError(e.t, err)
	return ref, address
}

func (e *vanishEnv) mempool(txid, address string, dust bool) {
	e.t.Helper()
	require.NoError(e.t, e.db.RecordMempool(e.ctx, "bitcoin", "w", []chainwatch.Seen{
		{TxID: txid, Asset: "BTC", Address: address, Amount: big.NewInt(36262), Dust: dust}}))
}

func (e *vanishEnv) revert(txid string) {
	e.t.Helper()
	require.NoError(e.t, e.db.RevertMempool(e.ctx, "bitcoin", "w", txid))
}

// live is whether the order's hold still counts (live_capacity_holds).
func (e *vanishEnv) live(ref string) bool {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.db.Get(&n, `SELECT count(*) FROM live_capacity_holds WHERE order_ref = $1`, ref))
	return n == 1
}

func (e *vanishEnv) hold(ref string) (state string, until time.Time) {
	e.t.Helper()
	require.NoError(e.t, e.db.QueryRow(`SELECT state, held_until FROM capacity_holds WHERE order_ref = $1`, ref).
		Scan(&state, &until))
	return state, until
}

func (e *vanishEnv) deadline(ref string) time.Time {
	e.t.Helper()
	var at time.Time
	require.NoError(e.t, e.db.Get(&at, `SELECT deadline FROM payment_intents WHERE target_ref = $1`, ref))
	return at
}

// A mempool payment extends its order's hold to the request's deadline;
// replaced (RevertMempool), it gives the hold back at once (issue 35: one
// replaceable low-fee transaction held a host until the deadline), unless
// another counted payment of the order is still seen, or the order is
// paid. Reverted dust, which never extended anything, gives nothing back.
func TestReplacedMempoolPaymentReleasesItsHold(t *testing.T) {
	e := newVanishEnv(t)

	// One payment, replaced: the host is free again.
	ref, addr := e.order()
	e.mempool("rbf1", addr, false)
	state, until := e.hold(ref)
	require.Equal(t, "held", state)
	require.WithinDuration(t, e.deadline(ref).Add(domain.HoldGrace), until, time.Millisecond, "the sighting extends the hold")
	e.revert("rbf1")
	require.False(t, e.live(ref), "the replaced payment's hold still counts")
	state, _ = e.hold(ref)
	require.Equal(t, "released", state)

	// Two payments: the first replaced, the second still seen holds; then
	// the second replaced too, released.
	ref2, addr2 := e.order()
	e.mempool("two-a", addr2, false)
	e.mempool("two-b", addr2, false)
	e.revert("two-a")
	require.True(t, e.live(ref2), "a payment is still seen: the hold stays")
	e.revert("two-b")
	require.False(t, e.live(ref2))

	// The order was paid meanwhile: its hold is its host's, kept.
	ref3, addr3 := e.order()
	e.mempool("paid", addr3, false)
	setStatus(t, e.db, ref3, domain.StatusPaid)
	e.revert("paid")
	require.True(t, e.live(ref3), "a paid order's hold is released")
	state, _ = e.hold(ref3)
	require.Equal(t, "held", state)

	// Seen (payment_detected) and not paid: released like awaiting_payment.
	ref4, addr4 := e.order()
	e.mempool("detected", addr4, false)
	setStatus(t, e.db, ref4, domain.StatusPaymentDetected)
	e.revert("detected")
	require.False(t, e.live(ref4))

	// Dust replaced: the short hold of the request stays.
	ref5, addr5 := e.order()
	e.mempool("dust", addr5, true)
	e.revert("dust")
	require.True(t, e.live(ref5), "reverted dust released the request's hold")
}

// A reorganisation that undoes the block of a seen (unconfirmed) payment
// releases its order's hold as a replacement does; a payment still seen in
// the mempool keeps it, and a paid order keeps its hold.
func TestReorganisedPaymentReleasesItsHold(t *testing.T) {
	e := newVanishEnv(t)
	mined := func(txid, address string, h int64) chainwatch.Seen {
		return chainwatch.Seen{TxID: txid, Asset: "BTC", Address: address, Amount: big.NewInt(36262),
			BlockHeight: h, BlockHash: fmt.Sprint("h", h), BlockTime: time.Now()}
	}
	ref, addr := e.order()
	ref2, addr2 := e.order()
	ref3, addr3 := e.order()
	e.mempool("pool2", addr2, false)
	block := []chainwatch.Seen{mined("m1", addr, 70), mined("m2", addr2, 70), mined("m3", addr3, 70)}
	require.NoError(t, e.db.RecordBlock(e.ctx, "bitcoin", "w", 70, "h70", block))
	setStatus(t, e.db, ref3, domain.StatusPaid)
	for _, r := range []string{ref, ref2, ref3} {
		state, until := e.hold(r)
		require.Equal(t, "held", state)
		require.WithinDuration(t, e.deadline(r).Add(domain.HoldGrace), until, time.Millisecond)
	}

	n, err := e.db.Rewind(e.ctx, "bitcoin", "w", 69)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.False(t, e.live(ref), "the reorganised payment's hold still counts")
	require.True(t, e.live(ref2), "a payment is still seen in the mempool: the hold stays")
	require.True(t, e.live(ref3), "a paid order's hold is released")
}
