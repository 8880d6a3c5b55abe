package postgres_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/postgres"
)

// A holder's write that lasts (here a mempool payment whose insert waits
// for another transaction) does not keep the holder from renewing its
// lease, while a takeover waits for that write to end: the write commits
// under the lease, then the lease changes hands. Before, the renewal waited
// for the holder's own write, and a mempool push longer than the TTL lost
// the lease, its work cancelled, again and again.
func TestRenewalDuringAWriteTakeoverAfterIt(t *testing.T) {
	ctx, db, _, _ := leasedIntent(t, "slow@example.com", "PI-SLOW", "bc1qslow", 907)
	lockWaiters := func(n int) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var waiting int
			require.NoError(c, db.Get(&waiting, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`))
			assert.Equal(c, n, waiting, "sessions waiting for a lock")
		}, 30*time.Second, 20*time.Millisecond)
	}
	// Another transaction inserts the same payment and stays open.
	blocker, err := db.BeginTxx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback() }()
	_, err = blocker.Exec(`INSERT INTO chain_payments (network, txid, output_index, asset, intent_id, address,
		amount_base, amount_cents, late, state) VALUES ('bitcoin', 'slowtx', 0, 'BTC', 'PI-SLOW', 'bc1qslow', 36262, 2357, false, 'seen')`)
	require.NoError(t, err)

	written := make(chan error, 1)
	go func() {
		written <- db.RecordMempool(ctx, "bitcoin", "w", []chainwatch.Seen{{TxID: "slowtx", Asset: "BTC",
			Address: "bc1qslow", Amount: big.NewInt(36262)}})
	}()
	lockWaiters(1) // the holder's write, past its lease check

	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ok, err := db.AcquireLease(rctx, "bitcoin", "w", time.Minute)
	cancel()
	require.NoError(t, err, "renewal during the holder's write")
	require.True(t, ok, "renewal during the holder's write")

	// The lease runs out; another process takes it over, after the write.
	_, err = db.Exec(`UPDATE watcher_leases SET expires_at = now() - interval '1 second' WHERE network = 'bitcoin'`)
	require.NoError(t, err)
	other, err := postgres.Open(ctx, db.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	taken := make(chan bool, 1)
	go func() {
		ok, err := other.AcquireLease(ctx, "bitcoin", "other", time.Minute)
		assert.NoError(t, err)
		taken <- ok
	}()
	lockWaiters(2) // and the takeover, waiting for the write
	select {
	case <-taken:
		t.Fatal("lease taken over while the holder's write was in progress")
	case err := <-written:
		t.Fatalf("the write ended before its blocker: %v", err)
	default:
	}
	require.NoError(t, blocker.Rollback())
	select {
	case err := <-written:
		require.NoError(t, err, "the holder's write, under its lease")
	case <-time.After(time.Minute):
		t.Fatal("the holder's write did not end")
	}
	select {
	case ok := <-taken:
		require.True(t, ok, "takeover once the write ended")
	case <-time.After(time.Minute):
		t.Fatal("the takeover did not end")
	}
	var stored int
	require.NoError(t, db.Get(&stored, `SELECT count(*) FROM chain_payments WHERE txid = 'slowtx'`))
	require.Equal(t, 1, stored, "the payment stored by the write")
}
