package postgres

import (
	"context"
	"fmt"

	"github.com/kernodeck/kernodeck/domain"
)

// OrderHosts lists the hosts an order held (SSH driver), oldest first,
// with each host's state now. None with the local driver.
func (db *DB) OrderHosts(ctx context.Context, orderRef string) ([]domain.HostReservation, error) {
	out := []domain.HostReservation{}
	err := db.SelectContext(ctx, &out, `
		SELECT r.host_name, COALESCE(h.state, '') AS host_state, COALESCE(h.note, '') AS host_note, r.unix_user,
			r.state, r.failure, r.prepared_at, r.gpu_model_seen, r.gpu_count_seen, r.driver_version, r.cuda_version,
			r.customer_flag, r.customer_flag_closed_at, r.created_at, r.released_at
		FROM host_reservations r LEFT JOIN gpu_hosts h ON h.id = r.host_id
		WHERE r.order_ref = $1 ORDER BY r.id`, orderRef)
	if err != nil {
		return nil, fmt.Errorf("order hosts %s: %w", orderRef, err)
	}
	return out, nil
}

// maxStuckOrders bounds the orders (or hosts) of one list of support's
// queue read at once.
const maxStuckOrders = 200

// ProvisioningFailures lists the orders whose provisioning failed and
// waits for support, the longest waiting first (since: the order's last
// change, the failure).
func (db *DB) ProvisioningFailures(ctx context.Context) ([]domain.StuckOrder, error) {
	out := []domain.StuckOrder{}
	err := db.SelectContext(ctx, &out, `
		SELECT o.ref, a.email, o.gpu_model, o.total_gpus, o.total_cents, o.paid_cents, o.updated_at AS since
		FROM orders o JOIN accounts a ON a.id = o.account_id
		WHERE o.status = $1 ORDER BY o.updated_at, o.ref LIMIT $2`, domain.StatusProvisioningFailed, maxStuckOrders)
	if err != nil {
		return nil, fmt.Errorf("provisioning failures: %w", err)
	}
	return out, nil
}

// TeardownsStuck lists the rentals whose teardown is stuck (still ending,
// with a "teardown_stuck" event), the longest stuck first (since: the
// event's time), with the step that failed and its error as the event
// recorded them, and the host the order still holds. An order leaves the
// list once its teardown completes (ended).
func (db *DB) TeardownsStuck(ctx context.Context) ([]domain.StuckTeardown, error) {
	out := []domain.StuckTeardown{}
	err := db.SelectContext(ctx, &out, `
		SELECT o.ref, a.email, o.gpu_model, o.total_gpus, o.total_cents, o.paid_cents, e.at AS since,
			COALESCE(e.data->>'step', '') AS step, COALESCE(e.data->>'error', '') AS error,
			COALESCE((SELECT r.host_name FROM host_reservations r WHERE r.order_ref = o.ref AND r.state = 'active'), '') AS host_name
		FROM orders o JOIN accounts a ON a.id = o.account_id
		JOIN timeline_events e ON e.ref = o.ref AND e.idem_key = $2 AND e.kind = $3
		WHERE o.status = $1 ORDER BY e.at, o.ref LIMIT $4`,
		domain.StatusEnding, domain.KeyTeardownStuck, domain.EventTeardownStuck, maxStuckOrders)
	if err != nil {
		return nil, fmt.Errorf("teardowns stuck: %w", err)
	}
	return out, nil
}

// HostFlags lists the hosts their customer made dirty on purpose that
// support has not closed yet, the longest waiting first (support's queue).
func (db *DB) HostFlags(ctx context.Context) ([]domain.HostFlag, error) {
	out := []domain.HostFlag{}
	err := db.SelectContext(ctx, &out, `
		SELECT r.order_ref, a.email, r.host_name, COALESCE(h.state, '') AS host_state, r.unix_user, r.customer_flag,
			r.customer_flag_at AS since
		FROM host_reservations r JOIN orders o ON o.ref = r.order_ref JOIN accounts a ON a.id = o.account_id
		LEFT JOIN gpu_hosts h ON h.id = r.host_id
		WHERE r.customer_flag IS NOT NULL AND r.customer_flag_closed_at IS NULL
		ORDER BY r.customer_flag_at, r.id LIMIT $1`, maxStuckOrders)
	if err != nil {
		return nil, fmt.Errorf("host flags: %w", err)
	}
	return out, nil
}

// CloseHostFlag closes the open customer flags of an order's hosts
// (support read them and acted on the customer's side); a conflict when
// none is open.
func (db *DB) CloseHostFlag(ctx context.Context, orderRef, agent string) error {
	res, err := db.ExecContext(ctx, `UPDATE host_reservations SET customer_flag_closed_at = now(), customer_flag_closed_by = $2
		WHERE order_ref = $1 AND customer_flag IS NOT NULL AND customer_flag_closed_at IS NULL`, orderRef, agent)
	if err != nil {
		return fmt.Errorf("close host flag of %s: %w", orderRef, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return domain.Errorf(domain.ECodeConflict, "Aucun signalement ouvert sur les machines de cette commande.")
	}
	return nil
}
