package postgres

import (
	"context"
	"fmt"
)

// LocalGPUs is the local machine driver's store (provision/localpg): its
// reservations of GPUs (gpu_reservations, counted against gpu_inventory)
// and what it writes on the order (its access). Only this package writes
// those tables.
type LocalGPUs struct {
	DB *DB
}

// ReserveGPUs takes gpus GPUs of model for the order and says how:
// "held" (its hold became its reservation, without the model's capacity
// lock: kd_take_held_gpus, migration 00056), else kd_reserve_gpus's
// outcome (migrations 00055 and 00061: "reserved", "already",
// "no_inventory", "no_capacity" with the GPUs free, "closed").
func (l LocalGPUs) ReserveGPUs(ctx context.Context, orderRef, model string, gpus int) (outcome string, free int, err error) {
	var held bool
	if err := l.DB.GetContext(ctx, &held, `SELECT kd_take_held_gpus($1, $2, $3)`, orderRef, model, gpus); err != nil {
		return "", 0, fmt.Errorf("reserve %d GPU %s for %s from its hold: %w", gpus, model, orderRef, err)
	}
	if held {
		return "held", 0, nil
	}
	var r struct {
		Outcome string `db:"outcome"`
		Free    int    `db:"free"`
	}
	if err := l.DB.GetContext(ctx, &r, `SELECT outcome, free FROM kd_reserve_gpus($1, $2, $3)`, orderRef, model, gpus); err != nil {
		return "", 0, fmt.Errorf("reserve %d GPU %s for %s: %w", gpus, model, orderRef, err)
	}
	return r.Outcome, r.Free, nil
}

// PrepareGPUs records the preset on the order's reservation (ok false: it
// has none active).
func (l LocalGPUs) PrepareGPUs(ctx context.Context, orderRef, preset string) (ok bool, err error) {
	res, err := l.DB.ExecContext(ctx, `
		UPDATE gpu_reservations SET preset = $2,
			state = CASE WHEN state = 'reserved' THEN 'prepared' ELSE state END
		WHERE order_ref = $1 AND state <> 'released'`, orderRef, preset)
	if err != nil {
		return false, fmt.Errorf("prepare %s: %w", orderRef, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// ReservedGPUs is what the order's active reservation holds.
func (l LocalGPUs) ReservedGPUs(ctx context.Context, orderRef string) (model string, gpus int, err error) {
	var r struct {
		Model string `db:"gpu_model"`
		GPUs  int    `db:"gpus"`
	}
	if err := l.DB.GetContext(ctx, &r, `SELECT gpu_model, gpus FROM gpu_reservations
		WHERE order_ref = $1 AND state <> 'released'`, orderRef); err != nil {
		return "", 0, fmt.Errorf("verify %s: %w", orderRef, err)
	}
	return r.Model, r.GPUs, nil
}

// MarkGPUsVerified marks the order's reservation verified.
func (l LocalGPUs) MarkGPUsVerified(ctx context.Context, orderRef string) error {
	if _, err := l.DB.ExecContext(ctx, `UPDATE gpu_reservations SET state = 'verified'
		WHERE order_ref = $1 AND state IN ('reserved', 'prepared')`, orderRef); err != nil {
		return fmt.Errorf("verify %s: %w", orderRef, err)
	}
	return nil
}

// ReleaseGPUs frees the order's GPUs (once); an order never reserved is a
// no-op.
func (l LocalGPUs) ReleaseGPUs(ctx context.Context, orderRef string) error {
	if _, err := l.DB.ExecContext(ctx, `UPDATE gpu_reservations SET state = 'released', released_at = now()
		WHERE order_ref = $1 AND state <> 'released'`, orderRef); err != nil {
		return fmt.Errorf("release %s: %w", orderRef, err)
	}
	return nil
}

// OrderPublicKey is the customer's own SSH public key on the order ("":
// none given).
func (l LocalGPUs) OrderPublicKey(ctx context.Context, orderRef string) (string, error) {
	return orderPublicKey(ctx, l.DB, orderRef)
}

// CreateAccess writes the order's access once and returns the access the
// order has.
func (l LocalGPUs) CreateAccess(ctx context.Context, a NewAccess) (AccessAddress, error) {
	if err := insertAccess(ctx, l.DB, a); err != nil {
		return AccessAddress{}, err
	}
	return accessAddress(ctx, l.DB, a.OrderRef)
}

// RevokeAccess marks the order's access revoked (once).
func (l LocalGPUs) RevokeAccess(ctx context.Context, orderRef string) error {
	if _, err := l.DB.ExecContext(ctx, `UPDATE order_access SET revoked_at = now() WHERE order_ref = $1 AND revoked_at IS NULL`,
		orderRef); err != nil {
		return fmt.Errorf("revoke %s: %w", orderRef, err)
	}
	return nil
}
