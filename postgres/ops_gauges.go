package postgres

import (
	"context"
	"fmt"

	"github.com/lib/pq"
)

// The queries behind the operators' alerts on backlogs and ages (package
// metrics reads them at scrape time; issue 38, item 6).

// Backlog is a number of rows waiting and the age of the oldest (0 when
// none waits), in seconds.
type Backlog struct {
	Waiting       int64   `db:"n"`
	OldestSeconds float64 `db:"oldest_seconds"`
}

// MailBacklog is the customer mail not delivered yet (pending, or being
// sent) and the age of the oldest since it was queued: a dispatcher that
// does not run, or an SMTP server that refuses, shows as an age that grows.
func (db *DB) MailBacklog(ctx context.Context) (Backlog, error) {
	var b Backlog
	err := db.GetContext(ctx, &b, `
		SELECT count(*) AS n, COALESCE(GREATEST(0, EXTRACT(EPOCH FROM now() - min(created_at))), 0)::float8 AS oldest_seconds
		FROM mail_outbox WHERE state IN ('pending', 'sending')`)
	if err != nil {
		return Backlog{}, fmt.Errorf("mail backlog: %w", err)
	}
	return b, nil
}

// StatusAge is, for one order status, the orders in it and how long the
// one unchanged the longest has been (seconds since its row last changed:
// every transition and timeline event touches updated_at, so an order that
// does not move keeps its age).
type StatusAge struct {
	Status        string  `db:"status"`
	Count         int64   `db:"n"`
	OldestSeconds float64 `db:"oldest_seconds"`
}

// OrdersAgeInStatus returns one row per status asked (0 and 0 when no order
// is in it), in the order asked.
func (db *DB) OrdersAgeInStatus(ctx context.Context, statuses []string) ([]StatusAge, error) {
	return db.ageInStatus(ctx, "orders", statuses)
}

// RateAge is how old the newest recorded rate of an asset is.
type RateAge struct {
	Asset   string  `db:"asset"`
	Seconds float64 `db:"age_seconds"`
}

// RateAges returns, for each asset asked that has a recorded rate, the age
// of its newest observation (one index probe per asset: the history grows
// by every sample).
func (db *DB) RateAges(ctx context.Context, assets []string) ([]RateAge, error) {
	out := []RateAge{}
	err := db.SelectContext(ctx, &out, `
		SELECT a.asset, GREATEST(0, EXTRACT(EPOCH FROM now() - r.observed_at))::float8 AS age_seconds
		FROM unnest($1::text[]) AS a(asset)
		CROSS JOIN LATERAL (SELECT max(observed_at) AS observed_at FROM asset_rates WHERE asset = a.asset) r
		WHERE r.observed_at IS NOT NULL ORDER BY a.asset`, pq.Array(assets))
	if err != nil {
		return nil, fmt.Errorf("rate ages: %w", err)
	}
	return out, nil
}

// UnpaidHolds is, per GPU model, what holds of unpaid orders (awaiting
// payment, payment detected) keep and the model's capacity, in the unit
// the capacity holds count in: hosts with the SSH driver (those not
// broken), GPUs with the local driver (its inventory).
type UnpaidHolds struct {
	Model    string `db:"gpu_model"`
	Held     int64  `db:"held"`
	Capacity int64  `db:"capacity"`
}

// UnpaidHoldsByModel returns every model of the catalog, counted as
// Capacity's share check counts them (postgres.Capacity.shareLeft).
func (db *DB) UnpaidHoldsByModel(ctx context.Context, provisioner string) ([]UnpaidHolds, error) {
	held, capacity := `count(*)`, `(SELECT count(*) FROM gpu_hosts WHERE gpu_model = m.model AND state <> 'broken')`
	if provisioner != ProvisionerSSH {
		held, capacity = `COALESCE(SUM(l.gpus), 0)`, `COALESCE((SELECT total_gpus FROM gpu_inventory WHERE gpu_model = m.model), 0)`
	}
	out := []UnpaidHolds{}
	err := db.SelectContext(ctx, &out, `
		SELECT m.model AS gpu_model,
		       (SELECT `+held+` FROM live_capacity_holds l JOIN orders o ON o.ref = l.order_ref
		        WHERE o.status IN ('awaiting_payment', 'payment_detected') AND l.gpu_model = m.model) AS held,
		       `+capacity+` AS capacity
		FROM gpu_models m ORDER BY m.model`)
	if err != nil {
		return nil, fmt.Errorf("unpaid holds by model: %w", err)
	}
	return out, nil
}

// PayoutsAgeInStatus is OrdersAgeInStatus for payouts (every move touches
// updated_at too).
func (db *DB) PayoutsAgeInStatus(ctx context.Context, statuses []string) ([]StatusAge, error) {
	return db.ageInStatus(ctx, "payouts", statuses)
}

// ageInStatus is the query of both: table is one of this file's constants,
// never input.
func (db *DB) ageInStatus(ctx context.Context, table string, statuses []string) ([]StatusAge, error) {
	out := []StatusAge{}
	err := db.SelectContext(ctx, &out, `
		SELECT s.status, count(t.ref) AS n,
		       COALESCE(GREATEST(0, EXTRACT(EPOCH FROM now() - min(t.updated_at))), 0)::float8 AS oldest_seconds
		FROM unnest($1::text[]) WITH ORDINALITY AS s(status, i)
		LEFT JOIN `+table+` t ON t.status = s.status
		GROUP BY s.status, s.i ORDER BY s.i`, pq.Array(statuses))
	if err != nil {
		return nil, fmt.Errorf("%s age in status: %w", table, err)
	}
	return out, nil
}
