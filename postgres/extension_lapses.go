package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// The lapse of a customer's extension: it can no longer be applied (its
// top-up expired or was cancelled, its rental is ending or closed, or the
// rental's workflow refused it); whatever was received stays on the
// balance, and the reason is on the order's timeline.

// LapseExtension lapses a reserved extension that can no longer be
// applied (its rental's workflow is over), with reason on the order's
// timeline; what its top-up credited stays on the balance. A paid or
// lapsed extension is left as it is.
func (x Extensions) LapseExtension(ctx context.Context, ref string, accountID int64, reason string, at time.Time) error {
	return x.DB.inTx(ctx, func(tx *sqlx.Tx) error {
		e, err := getExtension(ctx, tx, ref, accountID, true)
		if err != nil || e.State != domain.ExtensionReserved {
			return err
		}
		return lapseExtension(ctx, tx, e, reason, at)
	})
}

func lapseExtension(ctx context.Context, tx *sqlx.Tx, e domain.RentalExtension, reason string, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE rental_extensions SET state = 'lapsed', reason = $2, lapsed_at = $3,
		updated_at = now() WHERE ref = $1 AND state = 'reserved'`, e.Ref, reason, at); err != nil {
		return fmt.Errorf("lapse extension %s: %w", e.Ref, err)
	}
	msg := fmt.Sprintf("Prolongation de %s non appliquée : %s", domain.Plural(e.Days, "jour", "jours"), reason)
	_, err := insertEventRow(ctx, tx, e.OrderRef, domain.KeyExtensionLapsed(e.Ref), domain.EventExtensionLapsed, msg,
		map[string]any{"extension": e.Ref, "days": e.Days, "amount_cents": e.AmountCents}, at)
	return err
}

// lapseTopUpExtension lapses the extension a top-up was paying when the
// top-up expires or is cancelled unpaid, in the transaction of its event:
// whatever it received is handled as the top-up's (partial amounts go to
// support, who refunds them to the balance).
func lapseTopUpExtension(ctx context.Context, tx *sqlx.Tx, topUpRef, status string, at time.Time) error {
	if status != domain.TopUpExpired && status != domain.TopUpCancelled {
		return nil
	}
	var e domain.RentalExtension
	err := tx.GetContext(ctx, &e, `SELECT `+extensionColumns+extensionFrom+`
		WHERE t.ref = $1 AND e.state = 'reserved' FOR UPDATE OF e`, topUpRef)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("extension of %s: %w", topUpRef, err)
	}
	reason := "son paiement n'a pas été reçu avant l'échéance de la demande ; les jours réservés sont libérés."
	if status == domain.TopUpCancelled {
		reason = "son paiement a été annulé ; les jours réservés sont libérés."
	}
	return lapseExtension(ctx, tx, e, reason, at)
}

// lapseEndedRentalExtensions lapses the extensions of an order awaiting
// their payment once it ends or closes, in the transaction of that event:
// the days can no longer be added, and a payment still sent to the
// extension's top-up is credited to the balance like any top-up.
func lapseEndedRentalExtensions(ctx context.Context, tx *sqlx.Tx, orderRef, status string, at time.Time) error {
	switch status {
	case domain.StatusEnding, domain.StatusEnded, domain.StatusCancelled, domain.StatusExpired, domain.StatusRefunded:
	default:
		return nil
	}
	var open []domain.RentalExtension
	if err := tx.SelectContext(ctx, &open, `SELECT `+extensionColumns+extensionFrom+`
		WHERE e.order_ref = $1 AND e.state = 'reserved' FOR UPDATE OF e`, orderRef); err != nil {
		return fmt.Errorf("open extensions of %s: %w", orderRef, err)
	}
	for _, e := range open {
		if err := lapseExtension(ctx, tx, e, "la location se termine : ces jours ne peuvent plus s'y ajouter. Un paiement envoyé pour cette prolongation est crédité sur votre solde.", at); err != nil {
			return err
		}
	}
	return nil
}
