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
			r.created_at, r.released_at
		FROM host_reservations r LEFT JOIN gpu_hosts h ON h.id = r.host_id
		WHERE r.order_ref = $1 ORDER BY r.id`, orderRef)
	if err != nil {
		return nil, fmt.Errorf("order hosts %s: %w", orderRef, err)
	}
	return out, nil
}

// maxStuckOrders bounds the provisioning failures listed at once.
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
