package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// The line of paid orders waiting for a machine (migration 00059): read by
// support's console and by the metrics. Its order is kd_waiting_ahead's:
// per model and size, by paid_at then ref; served by
// orders_machine_queue_idx.

// maxWaitingOrders bounds the waiting orders listed at once.
const maxWaitingOrders = 500

// MachineQueue lists the orders waiting for a machine, line by line (model,
// then GPUs), each line in payment order with its position (1 = served
// next), and how long each has waited since its payment.
func (db *DB) MachineQueue(ctx context.Context) ([]domain.WaitingOrder, error) {
	out := []domain.WaitingOrder{}
	err := db.SelectContext(ctx, &out, `
		SELECT o.ref, o.gpu_model, o.total_gpus, a.email, o.paid_cents,
			COALESCE(o.paid_at, o.updated_at) AS paid_at,
			row_number() OVER (PARTITION BY o.gpu_model, o.total_gpus ORDER BY o.paid_at, o.ref) AS position,
			GREATEST(0, floor(EXTRACT(EPOCH FROM now() - COALESCE(o.paid_at, o.updated_at))))::bigint AS waited_seconds
		FROM orders o JOIN accounts a ON a.id = o.account_id
		WHERE o.status = $1
		ORDER BY o.gpu_model, o.total_gpus, position LIMIT $2`, domain.StatusWaitingForMachine, maxWaitingOrders)
	if err != nil {
		return nil, fmt.Errorf("machine queue: %w", err)
	}
	return out, nil
}

// MachineQueueStat is one GPU model's line at a glance (metrics): the paid
// orders waiting for a machine of that model (every size), the age of the
// oldest wait, and those waiting longer than the alert threshold.
type MachineQueueStat struct {
	Model         string  `db:"gpu_model"`
	Waiting       int64   `db:"waiting"`
	OldestSeconds float64 `db:"oldest_seconds"`
	Overdue       int64   `db:"overdue"`
}

// MachineQueueStats reads, for every model of the catalog (0 when none
// waits) and any other model an order waits for, the line's size, its
// oldest wait in seconds since payment, and the orders that have waited
// longer than overdueAfter.
func (db *DB) MachineQueueStats(ctx context.Context, overdueAfter time.Duration) ([]MachineQueueStat, error) {
	out := []MachineQueueStat{}
	err := db.SelectContext(ctx, &out, `
		WITH w AS (
			SELECT gpu_model, count(*) AS waiting,
				GREATEST(0, EXTRACT(EPOCH FROM now() - min(COALESCE(paid_at, updated_at))))::float8 AS oldest_seconds,
				count(*) FILTER (WHERE COALESCE(paid_at, updated_at) < now() - make_interval(secs => $2)) AS overdue
			FROM orders WHERE status = $1 GROUP BY gpu_model)
		SELECT m.model AS gpu_model, COALESCE(w.waiting, 0) AS waiting,
			COALESCE(w.oldest_seconds, 0) AS oldest_seconds, COALESCE(w.overdue, 0) AS overdue
		FROM (SELECT model FROM gpu_models UNION SELECT gpu_model FROM w) m
		LEFT JOIN w ON w.gpu_model = m.model
		ORDER BY m.model`, domain.StatusWaitingForMachine, overdueAfter.Seconds())
	if err != nil {
		return nil, fmt.Errorf("machine queue stats: %w", err)
	}
	return out, nil
}
