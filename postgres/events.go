package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// insertEvent appends a timeline event once per (ref, key) and, when its
// kind calls for a mail, queues that mail in the same transaction (from the
// order's or top-up's state as the transaction sees it). It reports whether
// the event is new: a retried activity finds it already there and must not
// apply its changes twice.
func insertEvent(ctx context.Context, tx *sqlx.Tx, ref, key, kind, message string, data map[string]any, at time.Time) (bool, error) {
	fresh, err := insertEventRow(ctx, tx, ref, key, kind, message, data, at)
	if err != nil || !fresh {
		return fresh, err
	}
	return true, queueMailForRef(ctx, tx, ref, key, kind, message, data, at)
}

// insertEventRow is insertEvent without the mail, for callers that queue it
// themselves after changing the state the mail describes.
func insertEventRow(ctx context.Context, tx *sqlx.Tx, ref, key, kind, message string, data map[string]any, at time.Time) (bool, error) {
	return insertEventFrom(ctx, tx, `VALUES ($1, $2, $3, $4, $5, $6)`, ref, key, kind, message, data, at)
}

// insertOrderEventRow is insertEventRow for an event of an order that must
// exist (checked by its key, as the UPDATE of RecordOrderEvent would).
func insertOrderEventRow(ctx context.Context, tx *sqlx.Tx, ref, key, kind, message string, data map[string]any, at time.Time) (bool, error) {
	fresh, err := insertEventFrom(ctx, tx, `SELECT $1::text, $2::text, $3::text, $4::text, $5::jsonb, $6::timestamptz
		FROM orders WHERE ref = $1`, ref, key, kind, message, data, at)
	if err != nil || fresh {
		return fresh, err
	}
	// Nothing inserted: written before, or no such order.
	var exists bool
	if err := tx.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM orders WHERE ref = $1)`, ref); err != nil {
		return false, fmt.Errorf("order %s: %w", ref, err)
	}
	if !exists {
		return false, fmt.Errorf("event %s of order %s: %w", key, ref, domainNotFound)
	}
	return false, nil
}

// insertEventFrom inserts the event whose columns rows ($1-$6) gives, once
// per (ref, key), and reports whether it is new.
func insertEventFrom(ctx context.Context, tx *sqlx.Tx, rows, ref, key, kind, message string, data map[string]any, at time.Time) (bool, error) {
	var raw []byte
	if data != nil {
		var err error
		if raw, err = json.Marshal(data); err != nil {
			return false, fmt.Errorf("event data: %w", err)
		}
	}
	if at.IsZero() {
		at = time.Now()
	}
	var id int64
	err := tx.QueryRowxContext(ctx, `
		INSERT INTO timeline_events (ref, idem_key, kind, message, data, at)
		`+rows+`
		ON CONFLICT (ref, idem_key) DO NOTHING
		RETURNING id`, ref, key, kind, message, nullJSON(raw), at).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("insert event %s/%s: %w", ref, key, err)
	}
	return true, nil
}

// nullJSON passes JSON to a jsonb column as a string (or NULL): the pool
// sends []byte arguments in binary (openPool), which jsonb refuses.
func nullJSON(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// RecordOrderEvent applies one transition of an order, written by its
// workflow: the timeline event, the order's changes, and what the event
// causes (ledger posting, amounts put in or taken from support's queue), in
// one transaction, once per (OrderRef, Key). A refusal (balance short,
// queued amount already settled) writes nothing.
func (db *DB) RecordOrderEvent(ctx context.Context, ev domain.OrderEvent) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error { return recordOrderEvent(ctx, tx, ev) })
}

// RecordOrderEventsTogether applies transitions of an order in their
// order, in one transaction: all of them or none (a provisioning step's
// end and the next step's start).
func (db *DB) RecordOrderEventsTogether(ctx context.Context, evs ...domain.OrderEvent) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		for _, ev := range evs {
			if err := recordOrderEvent(ctx, tx, ev); err != nil {
				return err
			}
		}
		return nil
	})
}

// recordOrderEvent applies one transition inside tx (RecordOrderEvent).
func recordOrderEvent(ctx context.Context, tx *sqlx.Tx, ev domain.OrderEvent) error {
	if _, mailed := MailTemplates[ev.Kind]; !mailed && !ev.ChangesOrder() && !ev.MovesMoney() {
		// A provisioning step's start or end: the order's row stays as it
		// is (its updated_at is when the order itself last changed). One
		// statement instead of two, and no row version, for seven of the
		// eleven events of every order a busy block pays.
		_, err := insertOrderEventRow(ctx, tx, ev.OrderRef, ev.Key, ev.Kind, ev.Message, ev.Data, ev.At)
		return err
	}
	fresh, err := insertEventRow(ctx, tx, ev.OrderRef, ev.Key, ev.Kind, ev.Message, ev.Data, ev.At)
	if err != nil || !fresh {
		return err
	}
	var o orderMailRow
	err = tx.GetContext(ctx, &o, `
			UPDATE orders SET
				status = COALESCE(NULLIF($2, ''), status),
				paid_cents = COALESCE($3, paid_cents),
				payment_method = COALESCE(NULLIF($4, ''), payment_method),
				paid_at = COALESCE($5, paid_at),
				period_start = COALESCE($6, period_start),
				period_end = COALESCE($7, period_end),
				ended_at = COALESCE($8, ended_at),
				refunded_cents = COALESCE($9, refunded_cents),
				unbacked_cents = COALESCE($10, unbacked_cents),
				shortfall_cents = COALESCE($11, shortfall_cents),
				updated_at = now()
			WHERE ref = $1
			RETURNING `+orderMailColumns,
		ev.OrderRef, ev.Status, ev.PaidCents, ev.PaymentMethod, ev.PaidAt, ev.PeriodStart, ev.PeriodEnd, ev.EndedAt,
		ev.RefundedCents, ev.UnbackedCents, ev.ShortfallCents)
	if err != nil {
		return fmt.Errorf("update order %s: %w", ev.OrderRef, notFound(err))
	}
	if err := applyMoney(ctx, tx, moneyChange{kind: domain.TargetOrder, ref: ev.OrderRef, accountID: o.AccountID,
		key: ev.Key, posting: ev.Posting, exceptions: ev.Exceptions, use: ev.Use, reversal: ev.Reversal}); err != nil {
		return err
	}
	if err := lapseEndedRentalExtensions(ctx, tx, ev.OrderRef, ev.Status, ev.At); err != nil {
		return err
	}
	// The mail announcing the event commits or rolls back with it.
	return queueMail(ctx, tx, o.AccountID, ev.OrderRef, ev.Key, ev.Kind, o.data(ev.Kind, ev.Message, ev.Data, ev.At))
}

// RecordTopUpEvent applies one transition of a top-up (see RecordOrderEvent).
func (db *DB) RecordTopUpEvent(ctx context.Context, ev domain.TopUpEvent) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		fresh, err := insertEventRow(ctx, tx, ev.TopUpRef, ev.Key, ev.Kind, ev.Message, ev.Data, ev.At)
		if err != nil || !fresh {
			return err
		}
		var t struct {
			AccountID   int64 `db:"account_id"`
			AmountCents int64 `db:"amount_cents"`
		}
		err = tx.GetContext(ctx, &t, `
			UPDATE topups SET status = COALESCE(NULLIF($2, ''), status), credited_at = COALESCE($3, credited_at),
				received_cents = COALESCE($4, received_cents), updated_at = now()
			WHERE ref = $1 RETURNING account_id, amount_cents`, ev.TopUpRef, ev.Status, ev.CreditedAt, ev.ReceivedCents)
		if err != nil {
			return fmt.Errorf("update top-up %s: %w", ev.TopUpRef, notFound(err))
		}
		if err := applyMoney(ctx, tx, moneyChange{kind: domain.TargetTopUp, ref: ev.TopUpRef, accountID: t.AccountID,
			key: ev.Key, posting: ev.Posting, exceptions: ev.Exceptions, use: ev.Use, reversal: ev.Reversal}); err != nil {
			return err
		}
		if err := lapseTopUpExtension(ctx, tx, ev.TopUpRef, ev.Status, ev.At); err != nil {
			return err
		}
		return queueMail(ctx, tx, t.AccountID, ev.TopUpRef, ev.Key, ev.Kind, MailData{
			Kind: ev.Kind, Message: ev.Message, Event: ev.Data, AmountCents: t.AmountCents, At: ev.At})
	})
}
