package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/kernodeck/kernodeck/domain"
)

const keyRequestColumns = `id, order_ref, kind, state, failure, created_at, done_at`

// RequestKeyChange records a key change for a running rental (status
// active, access not revoked). One may be pending per order: a second is
// refused with conflict.
func (db *DB) RequestKeyChange(ctx context.Context, orderRef, kind, publicKey string) (domain.KeyRequest, error) {
	var key any
	if kind == domain.KeyRequestReplace {
		key = publicKey
	}
	var kr domain.KeyRequest
	err := db.GetContext(ctx, &kr, `INSERT INTO access_key_requests (order_ref, kind, public_key)
		SELECT o.ref, $2, $3 FROM orders o JOIN order_access a ON a.order_ref = o.ref
		WHERE o.ref = $1 AND o.status = 'active' AND a.revoked_at IS NULL
		RETURNING `+keyRequestColumns, orderRef, kind, key)
	var pqErr *pq.Error
	switch {
	case errors.As(err, &pqErr) && pqErr.Code == "23505":
		return domain.KeyRequest{}, domain.Errorf(domain.ECodeConflict, "Un changement de clé est déjà en cours pour cette commande.")
	case errors.Is(err, sql.ErrNoRows):
		return domain.KeyRequest{}, domain.Errorf(domain.ECodeConflict, "La location n'est pas en cours : aucune clé à changer.")
	case err != nil:
		return domain.KeyRequest{}, fmt.Errorf("key request for %s: %w", orderRef, err)
	}
	return kr, nil
}

// LatestKeyRequest returns the order's last key request.
func (db *DB) LatestKeyRequest(ctx context.Context, orderRef string) (domain.KeyRequest, error) {
	var kr domain.KeyRequest
	err := db.GetContext(ctx, &kr, `SELECT `+keyRequestColumns+` FROM access_key_requests
		WHERE order_ref = $1 ORDER BY id DESC LIMIT 1`, orderRef)
	if err != nil {
		return domain.KeyRequest{}, fmt.Errorf("key request of %s: %w", orderRef, notFound(err))
	}
	return kr, nil
}

// PendingKeyRequest is a key request to apply, with the key to install.
type PendingKeyRequest struct {
	domain.KeyRequest
	PublicKey sql.NullString `db:"public_key"`
	Attempts  int            `db:"attempts"`
}

// ClaimKeyRequest takes the oldest pending key request no worker holds,
// for lease, and counts the attempt; ok is false when none is waiting. A
// worker that dies while applying it lets it go when the lease ends.
func (db *DB) ClaimKeyRequest(ctx context.Context, lease time.Duration) (p PendingKeyRequest, ok bool, err error) {
	err = db.GetContext(ctx, &p, `UPDATE access_key_requests SET attempts = attempts + 1,
			claimed_until = now() + make_interval(secs => $1)
		WHERE id = (SELECT id FROM access_key_requests
			WHERE state = 'pending' AND (claimed_until IS NULL OR claimed_until < now())
			ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING `+keyRequestColumns+`, public_key, attempts`, lease.Seconds())
	if errors.Is(err, sql.ErrNoRows) {
		return PendingKeyRequest{}, false, nil
	}
	if err != nil {
		return PendingKeyRequest{}, false, fmt.Errorf("claim key request: %w", err)
	}
	return p, true, nil
}

// FinishKeyRequest marks a claimed request done, or failed with a French
// reason for the customer, and tells it on the order's timeline (which
// also updates the customer's open order page).
func (db *DB) FinishKeyRequest(ctx context.Context, id int64, failure string) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		state := domain.KeyRequestDone
		if failure != "" {
			state = domain.KeyRequestFailed
		}
		var kr domain.KeyRequest
		err := tx.GetContext(ctx, &kr, `UPDATE access_key_requests SET state = $2, failure = NULLIF($3, ''),
				done_at = now(), claimed_until = NULL
			WHERE id = $1 AND state = 'pending' RETURNING `+keyRequestColumns, id, state, failure)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // finished already
		}
		if err != nil {
			return fmt.Errorf("finish key request %d: %w", id, err)
		}
		_, err = insertEvent(ctx, tx, kr.OrderRef, domain.KeyAccessKey(id), domain.EventAccessKeyChanged,
			keyChangeMessage(kr), map[string]any{"kind": kr.Kind, "state": kr.State}, time.Now())
		return err
	})
}

// keyChangeMessage tells the customer how their key change ended.
func keyChangeMessage(kr domain.KeyRequest) string {
	switch {
	case kr.State == domain.KeyRequestFailed:
		return "Le changement de clé SSH n'a pas abouti. " + *kr.Failure +
			" Réessayez ou contactez le support avec la référence de la commande."
	case kr.Kind == domain.KeyRequestReissue:
		return "Nouvelle paire de clés générée : téléchargez la clé privée sur la page de la commande (remise pendant 10 minutes). L'ancienne clé est désormais refusée."
	default:
		return "Votre nouvelle clé publique SSH est installée sur la machine. L'ancienne clé est désormais refusée."
	}
}
