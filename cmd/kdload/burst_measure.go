package main

// The burst's measures and its check, read from the deployment's database.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// waitStatus polls the orders' statuses every 250 ms and returns, per
// stage and per order, when the order was first seen in one of the
// stage's statuses (zero if never). Each stage's statuses include the
// next stage's: an order is read until it reaches the last stage. With
// within 0 it waits until every order is seen there (or ctx ends: an
// error); otherwise at most within. One query per poll, of the orders not
// seen at the end yet: the poll weighs on the database it measures.
func (b *burst) waitStatus(ctx context.Context, db *sqlx.DB, refs []string, stages [][]string, within time.Duration) ([][]time.Time, error) {
	idx := make(map[string]int, len(refs))
	for i, r := range refs {
		idx[r] = i
	}
	seen := make([][]time.Time, len(stages))
	for k := range stages {
		seen[k] = make([]time.Time, len(refs))
	}
	last := seen[len(stages)-1]
	pending := slices.Clone(refs)
	deadline := time.Now().Add(within)
	err := poll(ctx, 250*time.Millisecond, func() (bool, error) {
		var got []struct{ Ref, Status string }
		if err := db.SelectContext(ctx, &got, `SELECT ref, status FROM orders WHERE ref = ANY($1) AND status = ANY($2)`,
			pq.Array(pending), pq.Array(stages[0])); err != nil {
			return false, err
		}
		now := time.Now()
		for _, o := range got {
			for k, st := range stages {
				if at := &seen[k][idx[o.Ref]]; at.IsZero() && slices.Contains(st, o.Status) {
					*at = now
				}
			}
		}
		pending = slices.DeleteFunc(pending, func(r string) bool { return !last[idx[r]].IsZero() })
		return len(pending) == 0 || (within > 0 && now.After(deadline)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("%d of %d orders never reached %v: %w", len(pending), len(refs), stages[len(stages)-1], err)
	}
	return seen, nil
}

// check compares, order by order, the chain with the books: one confirmed
// chain payment of exactly the request's amount per order, in one of the
// paying transactions (txids) and the blocks this run mined (blocks), the
// order paid its total, one reservation, and each of paid /
// payment_confirmed / access_available once on its timeline.
func (b *burst) check(ctx context.Context, out io.Writer, db *sqlx.DB, refs, txids, blocks []string) error {
	var bad []string
	if err := db.SelectContext(ctx, &bad, `
		SELECT o.ref FROM orders o
		WHERE o.ref = ANY($1) AND (
			o.status <> 'active' OR o.paid_cents <> o.total_cents
			OR (SELECT count(*) FROM chain_payments c JOIN payment_intents i ON i.id = c.intent_id
			    WHERE i.target_ref = o.ref AND c.state = 'confirmed' AND c.amount_base = i.amount_base
			      AND c.txid = ANY($2) AND c.block_hash = ANY($3)) <> 1
			OR (SELECT count(*) FROM chain_payments c JOIN payment_intents i ON i.id = c.intent_id
			    WHERE i.target_ref = o.ref) <> 1
			OR (SELECT count(*) FROM gpu_reservations r WHERE r.order_ref = o.ref) <> 1
			OR (SELECT count(*) FROM timeline_events e WHERE e.ref = o.ref AND e.kind = 'payment_confirmed') <> 1
			OR (SELECT count(*) FROM timeline_events e WHERE e.ref = o.ref AND e.kind = 'access_available') <> 1)`,
		pq.Array(refs), pq.Array(txids), pq.Array(blocks)); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if len(bad) > 0 {
		return fmt.Errorf("check: %d orders where the chain and the books disagree, e.g. %v", len(bad), bad[:min(5, len(bad))])
	}
	var unbalanced int
	if err := db.GetContext(ctx, &unbalanced, `SELECT count(*) FROM (SELECT transaction_id FROM ledger_entries GROUP BY transaction_id HAVING sum(amount_cents) <> 0) t`); err != nil {
		return err
	}
	if unbalanced > 0 {
		return fmt.Errorf("check: %d unbalanced ledger transactions", unbalanced)
	}
	fmt.Fprintf(out, "check: every order active, paid its total by exactly one confirmed chain payment of its request's amount "+
		"(in a paying transaction, in a block this run mined), one reservation, each step once on its timeline\n")
	return nil
}

// printLatencies prints one line of block -> state latencies.
func printLatencies(out io.Writer, chain, state string, l latencies) {
	fmt.Fprintf(out, "%sblock -> %s p50 %s p95 %s max %s (%d orders; %.0f orders/s to the last)\n",
		chain, state, sec(l.q(.5)), sec(l.q(.95)), sec(l.q(1)), len(l), float64(len(l))/l.q(1).Seconds())
}

func since(ts []time.Time, t0 time.Time) latencies {
	var l latencies
	for _, t := range ts {
		if !t.IsZero() {
			l = append(l, max(0, t.Sub(t0)))
		}
	}
	return l
}

func countSet(ts []time.Time) int {
	n := 0
	for _, t := range ts {
		if !t.IsZero() {
			n++
		}
	}
	return n
}
