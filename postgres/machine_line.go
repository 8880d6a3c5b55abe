package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// The line of paid orders waiting for a machine (issue 35, migration
// 00059): orders in waiting_for_machine, per model and size, in payment
// order. A reservation that takes no hold of its own, and a new hold,
// leave the free machines to the paid orders waiting ahead.

// closedStatuses are those of an order that takes no machine any more.
var closedStatuses = []string{domain.StatusCancelled, domain.StatusExpired, domain.StatusRefunded,
	domain.StatusEnding, domain.StatusEnded}

// LockOpenOrder reads the order's status FOR SHARE in tx and refuses
// (ErrOrderClosed) an order that is closed: a reservation and the refund
// that closes the order from the line are decided one after the other.
func LockOpenOrder(ctx context.Context, tx sqlx.QueryerContext, orderRef string) error {
	var status string
	err := sqlx.GetContext(ctx, tx, &status, `SELECT status FROM orders WHERE ref = $1 FOR SHARE`, orderRef)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("status of %s: %w", orderRef, err)
	}
	if slices.Contains(closedStatuses, status) {
		return ErrOrderClosed(orderRef)
	}
	return nil
}

// ErrOrderClosed refuses a reservation for an order closed meanwhile (its
// money taken back from the line, or cancelled).
func ErrOrderClosed(orderRef string) error {
	return domain.Errorf(domain.ECodeConflict, "La commande %s est close : aucune machine ne lui est réservée.", orderRef)
}

// WaitingAhead counts the paid orders waiting for a machine of model ahead
// of orderRef: with gpus > 0 those of that size (one whole host each),
// else the GPUs they wait for; every waiting order is ahead of an order
// not in the line ("" included).
func WaitingAhead(ctx context.Context, q sqlx.QueryerContext, model string, gpus int, orderRef string) (int, error) {
	var n int
	if err := sqlx.GetContext(ctx, q, &n, `SELECT kd_waiting_ahead($1, $2, $3)`, model, gpus, orderRef); err != nil {
		return 0, fmt.Errorf("waiting ahead of %s: %w", orderRef, err)
	}
	return n, nil
}

// FreeHosts counts the free hosts gpus GPUs of model that orderRef may
// take (freeHostSQL).
func FreeHosts(ctx context.Context, q sqlx.QueryerContext, model string, gpus int, orderRef string) (int, error) {
	var n int
	if err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM (`+freeHostSQL+`) f`, model, gpus, orderRef); err != nil {
		return 0, fmt.Errorf("free hosts of %s: %w", model, err)
	}
	return n, nil
}
