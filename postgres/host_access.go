package postgres

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// OrderPublicKey is the customer's own SSH public key on the order ("":
// none given).
func (h Hosts) OrderPublicKey(ctx context.Context, orderRef string) (string, error) {
	return orderPublicKey(ctx, h.DB, orderRef)
}

// CreateHostAccess writes the order's access once, marks its host in use,
// and erases the generated private key from the reservation (it now lives,
// sealed, on the access only). It returns the access the order has.
func (h Hosts) CreateHostAccess(ctx context.Context, a NewAccess, r HostReservation) (AccessAddress, error) {
	err := InTx(ctx, h.DB.DB, func(tx *sqlx.Tx) error {
		if err := insertAccess(ctx, tx, a); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'in_use', updated_at = now()
			WHERE id = $1 AND state = 'reserved'`, r.SSHHost.ID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE host_reservations SET private_key = NULL WHERE id = $1`, r.ID); err != nil {
			return fmt.Errorf("create access %s: %w", a.OrderRef, err)
		}
		return nil
	})
	if err != nil {
		return AccessAddress{}, err
	}
	return accessAddress(ctx, h.DB, a.OrderRef)
}

// RevokeAccess marks the order's access revoked (once) and erases its
// private key and Jupyter token.
func (h Hosts) RevokeAccess(ctx context.Context, orderRef string) error {
	if _, err := h.DB.ExecContext(ctx, `UPDATE order_access SET revoked_at = now(), private_key = NULL, jupyter_token = NULL
		WHERE order_ref = $1 AND revoked_at IS NULL`, orderRef); err != nil {
		return fmt.Errorf("revoke %s: %w", orderRef, err)
	}
	return nil
}

// LiveAccess says whether the order has an access not revoked: keys are
// changed on running rentals only.
func (h Hosts) LiveAccess(ctx context.Context, orderRef string) (bool, error) {
	var live bool
	if err := h.DB.GetContext(ctx, &live, `SELECT EXISTS (SELECT 1 FROM order_access
		WHERE order_ref = $1 AND revoked_at IS NULL)`, orderRef); err != nil {
		return false, fmt.Errorf("access of %s: %w", orderRef, err)
	}
	return live, nil
}

// ReplaceOrderKey makes publicKey (the customer's own, fingerprint its
// SHA256 fingerprint) the order's key: recorded on the order, so that a
// prepare retry installs it too, and on the access, where a generated
// private key is erased.
func (h Hosts) ReplaceOrderKey(ctx context.Context, orderRef, publicKey, fingerprint string) error {
	return InTx(ctx, h.DB.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE orders SET ssh_public_key = $2 WHERE ref = $1`, orderRef, publicKey); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE order_access SET private_key = NULL, key_fingerprint = $2 WHERE order_ref = $1`,
			orderRef, fingerprint)
		return err
	})
}

// ReissueOrderKey makes a generated pair the order's key: the order's own
// key is forgotten, the reservation's public key is publicKey, and the
// access holds privateKey (sealed with AccessPrivateKey) to be shown to
// the owner again, once.
func (h Hosts) ReissueOrderKey(ctx context.Context, orderRef string, reservationID int64, publicKey, privateKey, fingerprint string) error {
	return InTx(ctx, h.DB.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE orders SET ssh_public_key = NULL WHERE ref = $1`, orderRef); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE host_reservations SET public_key = $2, private_key = NULL WHERE id = $1`,
			reservationID, publicKey); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE order_access SET private_key = $2, key_fingerprint = $3, private_key_shown_at = NULL
			WHERE order_ref = $1`, orderRef, privateKey, fingerprint)
		return err
	})
}
