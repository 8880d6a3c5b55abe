package postgres

import (
	"context"
	"fmt"
)

// StateCount is a number of rows in one state (of one network, where the
// rows have one).
type StateCount struct {
	Network string `db:"network"`
	State   string `db:"state"`
	Count   int64  `db:"n"`
}

// Undelivered is, per network, the chain payments whose current state the
// workflow has not acknowledged, and how long the oldest has waited.
type Undelivered struct {
	Network       string  `db:"network"`
	Count         int64   `db:"n"`
	OldestSeconds float64 `db:"oldest_seconds"`
}

// OrdersByStatus counts the orders per status (metrics, at scrape time).
func (db *DB) OrdersByStatus(ctx context.Context) ([]StateCount, error) {
	var out []StateCount
	if err := db.SelectContext(ctx, &out, `SELECT '' AS network, status AS state, count(*) AS n FROM orders GROUP BY status`); err != nil {
		return nil, fmt.Errorf("orders by status: %w", err)
	}
	return out, nil
}

// MailByState counts the mail outbox rows per state.
func (db *DB) MailByState(ctx context.Context) ([]StateCount, error) {
	var out []StateCount
	if err := db.SelectContext(ctx, &out, `SELECT '' AS network, state, count(*) AS n FROM mail_outbox GROUP BY state`); err != nil {
		return nil, fmt.Errorf("mail by state: %w", err)
	}
	return out, nil
}

// ChainPaymentsByState counts the chain payments per network and state.
func (db *DB) ChainPaymentsByState(ctx context.Context) ([]StateCount, error) {
	var out []StateCount
	if err := db.SelectContext(ctx, &out, `SELECT network, state, count(*) AS n FROM chain_payments GROUP BY network, state`); err != nil {
		return nil, fmt.Errorf("chain payments by state: %w", err)
	}
	return out, nil
}

// UndeliveredPayments lists, per network with any, the payments whose state
// the workflow has not acknowledged and the age of the oldest state change
// among them (served by chain_payments_unsignaled_idx).
func (db *DB) UndeliveredPayments(ctx context.Context) ([]Undelivered, error) {
	var out []Undelivered
	if err := db.SelectContext(ctx, &out, `
		SELECT network, count(*) AS n,
		       EXTRACT(EPOCH FROM now() - min(GREATEST(seen_at, confirmed_at, reverted_at)))::float8 AS oldest_seconds
		FROM chain_payments WHERE signaled_version IS DISTINCT FROM state_version AND NOT dust AND to_support IS NULL
		GROUP BY network`); err != nil {
		return nil, fmt.Errorf("undelivered payments: %w", err)
	}
	return out, nil
}

// ExceptionQueue is support's exception queue at a glance: its rows
// (received amounts not yet settled, reorg flags not yet resolved) and how
// long the oldest has waited.
type ExceptionQueue struct {
	Open          int64   `db:"n"`
	OldestSeconds float64 `db:"oldest_seconds"`
}

// OpenExceptionQueue counts the rows OpenExceptions lists.
func (db *DB) OpenExceptionQueue(ctx context.Context) (ExceptionQueue, error) {
	var q ExceptionQueue
	if err := db.GetContext(ctx, &q, `
		SELECT count(*) AS n, COALESCE(EXTRACT(EPOCH FROM now() - min(x.created_at))::float8, 0) AS oldest_seconds
		FROM payment_exceptions x WHERE `+openExceptionWhere); err != nil {
		return ExceptionQueue{}, fmt.Errorf("exception queue: %w", err)
	}
	return q, nil
}
