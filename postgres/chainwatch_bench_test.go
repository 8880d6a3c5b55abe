package postgres_test

import (
	"context"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// busyBlockPayments seeds n bitcoin requests (one order each) and returns
// one payment of each, as a block pays them.
func busyBlockPayments(tb testing.TB, db *postgres.DB, n int) []chainwatch.Seen {
	tb.Helper()
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash)
		VALUES ('Ada', 'Lovelace', 'busy@example.com', 'x') RETURNING id`); err != nil {
		tb.Fatal(err)
	}
	if _, err := db.Exec(`
		WITH o AS (
			INSERT INTO orders (ref, account_id, gpu_model, lots, gpus_per_lot, total_gpus,
				duration_days, preset, lot_cents, total_cents, status, workflow_id)
			SELECT 'ORD-BUSY' || i, $1, 'rtx-a5000', 1, 1, 1, 3, 'python', 2357, 2357, 'awaiting_payment', 'rental-ORD-BUSY' || i
			FROM generate_series(1, $2) i RETURNING ref)
		INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals,
			amount_base, usd_cents, rate, rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until, request_key)
		SELECT 'PI-' || ref, 'order', ref, $1, 'BTC', 'bitcoin', 8, 36262, 2357, 65000, 'test', now(),
			'bc1qbusy' || ref, 100000 + substr(ref, 9)::int, 'bitcoin:x', now() + interval '1 hour', now() + interval '25 hours', 'intent:1'
		FROM o`, acc, n); err != nil {
		tb.Fatal(err)
	}
	out := make([]chainwatch.Seen, n)
	for i := range out {
		out[i] = chainwatch.Seen{TxID: fmt.Sprintf("busytx%d", i/1000), Index: int64(i % 1000), Asset: "BTC",
			Address: fmt.Sprintf("bc1qbusyORD-BUSY%d", i+1), Amount: big.NewInt(36262)}
	}
	return out
}

// BenchmarkRecordBusyBlock: a block paying 5,000 requests whose payments
// were all seen in the mempool before (issue 23's burst), recorded by the
// lease holder. One op is one block.
func BenchmarkRecordBusyBlock(b *testing.B) {
	ctx := context.Background()
	db := pgtest.NewDB(b)
	seen := busyBlockPayments(b, db, 5000)
	if ok, err := db.AcquireLease(ctx, "bitcoin", "w", time.Hour); err != nil || !ok {
		b.Fatalf("lease %v %v", ok, err)
	}
	if err := db.RecordMempool(ctx, "bitcoin", "w", seen); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		h := int64(100 + i)
		mined := make([]chainwatch.Seen, len(seen))
		for j, s := range seen {
			s.BlockHeight, s.BlockHash, s.BlockTime = h, fmt.Sprint("h", h), time.Now()
			mined[j] = s
		}
		if err := db.RecordBlock(ctx, "bitcoin", "w", h, fmt.Sprint("h", h), mined); err != nil {
			b.Fatal(err)
		}
	}
}
