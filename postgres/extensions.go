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

// Extensions keeps customers' extensions of their own rentals
// (rental_extensions, migration 00069): the offers and their price, the
// check that the rental's machine is free for the added days and the
// reservation that goes with it, the payment that applies it, and its
// lapse. Provisioner says which machine driver holds the rentals'
// machines (ProvisionerSSH: hosts; else the local driver's GPUs).
type Extensions struct {
	DB          *DB
	Provisioner string
}

const extensionColumns = `e.ref, e.order_ref, e.account_id, e.days, e.amount_cents, e.method, e.state, e.reason,
	e.held_until, e.period_end, t.ref AS topup_ref, e.created_at, e.paid_at, e.lapsed_at`

const extensionFrom = ` FROM rental_extensions e LEFT JOIN topups t ON t.extension_ref = e.ref`

// extensionOrder is what an extension reads of its order.
type extensionOrder struct {
	Ref        string     `db:"ref"`
	AccountID  int64      `db:"account_id"`
	Model      string     `db:"gpu_model"`
	ModelName  string     `db:"gpu_model_name"`
	Lots       int        `db:"lots"`
	GPUs       int        `db:"total_gpus"`
	Status     string     `db:"status"`
	PeriodEnd  *time.Time `db:"period_end"`
	PriceCents int64      `db:"price_cents"`
}

// readExtensionOrder reads the order of accountID (ErrNotFound when it is
// another's) with its price for days more; lock takes its row FOR UPDATE.
func readExtensionOrder(ctx context.Context, q sqlx.QueryerContext, orderRef string, accountID int64, days int, lock bool) (extensionOrder, error) {
	query := `SELECT o.ref, o.account_id, o.gpu_model, COALESCE(m.display_name, o.gpu_model) AS gpu_model_name, o.lots,
			o.total_gpus, o.status, o.period_end, COALESCE(p.lot_cents * o.lots, 0) AS price_cents
		FROM orders o LEFT JOIN gpu_models m ON m.model = o.gpu_model
		LEFT JOIN gpu_prices p ON p.model = o.gpu_model AND p.duration_days = $3
		WHERE o.ref = $1 AND o.account_id = $2`
	if lock {
		query += ` FOR UPDATE OF o`
	}
	var o extensionOrder
	if err := sqlx.GetContext(ctx, q, &o, query, orderRef, accountID, days); err != nil {
		return extensionOrder{}, fmt.Errorf("order %s: %w", orderRef, notFound(err))
	}
	return o, nil
}

// ExtensionOffers is what the customer of orderRef may add to it now,
// priced as a new rental of that length (the catalog's lot price times
// the order's lots), whether the machine is free for it, and the
// extensions asked so far. step is the length of a day (24 hours, shorter
// in tests) for the new end dates.
func (x Extensions) ExtensionOffers(ctx context.Context, orderRef string, accountID int64, step time.Duration) (domain.ExtensionOffers, error) {
	out := domain.ExtensionOffers{OrderRef: orderRef, Offers: []domain.ExtensionOffer{}}
	for _, days := range domain.ExtensionDays {
		o, err := readExtensionOrder(ctx, x.DB, orderRef, accountID, days, false)
		if err != nil {
			return domain.ExtensionOffers{}, err
		}
		out.PeriodEnd = o.PeriodEnd
		if o.PriceCents <= 0 {
			continue
		}
		offer := domain.ExtensionOffer{Days: days, AmountCents: o.PriceCents, AmountUSD: domain.FormatUSD(o.PriceCents)}
		if o.PeriodEnd != nil {
			end := o.PeriodEnd.Add(time.Duration(days) * step).UTC()
			offer.NewPeriodEnd = &end
		}
		out.Offers = append(out.Offers, offer)
	}
	list, err := x.OrderExtensions(ctx, orderRef, accountID)
	if err != nil {
		return domain.ExtensionOffers{}, err
	}
	out.Extensions = list
	err = x.DB.inTx(ctx, func(tx *sqlx.Tx) error {
		o, err := readExtensionOrder(ctx, tx, orderRef, accountID, domain.ExtensionDays[0], false)
		if err != nil {
			return err
		}
		if err := x.checkExtendable(ctx, tx, o); err != nil {
			return err
		}
		for _, e := range list {
			if e.State == domain.ExtensionReserved {
				return errExtensionOpen
			}
		}
		return x.checkLine(ctx, tx, o)
	})
	var de *domain.Error
	switch {
	case err == nil:
		out.Available = len(out.Offers) > 0
	case errors.As(err, &de):
		out.Code, out.Message = de.Code, de.Message
	default:
		return domain.ExtensionOffers{}, err
	}
	return out, nil
}

// OrderExtensions lists the extensions of accountID's order, newest first.
func (x Extensions) OrderExtensions(ctx context.Context, orderRef string, accountID int64) ([]domain.RentalExtension, error) {
	list := []domain.RentalExtension{}
	if err := x.DB.SelectContext(ctx, &list, `SELECT `+extensionColumns+extensionFrom+`
		WHERE e.order_ref = $1 AND e.account_id = $2 ORDER BY e.created_at DESC, e.ref`, orderRef, accountID); err != nil {
		return nil, fmt.Errorf("extensions of %s: %w", orderRef, err)
	}
	return list, nil
}

// Extension returns one extension of accountID (ErrNotFound otherwise).
func (x Extensions) Extension(ctx context.Context, ref string, accountID int64) (domain.RentalExtension, error) {
	return getExtension(ctx, x.DB, ref, accountID, false)
}

func getExtension(ctx context.Context, q sqlx.QueryerContext, ref string, accountID int64, lock bool) (domain.RentalExtension, error) {
	query := `SELECT ` + extensionColumns + extensionFrom + ` WHERE e.ref = $1 AND e.account_id = $2`
	if lock {
		query += ` FOR UPDATE OF e`
	}
	var e domain.RentalExtension
	if err := sqlx.GetContext(ctx, q, &e, query, ref, accountID); err != nil {
		return domain.RentalExtension{}, fmt.Errorf("extension %s: %w", ref, notFound(err))
	}
	return e, nil
}

// ReserveExtension checks that the machine of the customer's order is
// free for the days added and reserves them, with the top-up that takes
// their crypto payment, in one transaction; the same reference again
// returns the extension as it is (a retried request). Refused with a
// domain error, nothing written, when the order may not be extended, the
// price differs from the catalog's, another extension awaits payment, or
// the machine is not free for the added days (extension_unavailable).
func (x Extensions) ReserveExtension(ctx context.Context, in domain.ExtensionNew) (domain.RentalExtension, error) {
	var out domain.RentalExtension
	err := x.DB.inTx(ctx, func(tx *sqlx.Tx) error {
		if e, err := getExtension(ctx, tx, in.Ref, in.AccountID, false); err == nil {
			out = e
			return nil
		} else if !errors.Is(err, domain.ErrNotFound) {
			return err
		}
		o, hostID, err := x.checkNew(ctx, tx, in)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO rental_extensions (ref, order_ref, account_id, days, amount_cents,
				method, state, host_id, held_until) VALUES ($1, $2, $3, $4, $5, 'crypto', 'reserved', $6, $7)`,
			in.Ref, in.OrderRef, in.AccountID, in.Days, o.PriceCents, hostID, in.HeldUntil); err != nil {
			if isUniqueViolation(err) {
				return errExtensionOpen
			}
			return fmt.Errorf("reserve extension %s: %w", in.Ref, err)
		}
		if _, err := x.createExtensionTopUp(ctx, tx, in, o); err != nil {
			return err
		}
		out, err = getExtension(ctx, tx, in.Ref, in.AccountID, false)
		return err
	})
	return out, err
}

// createExtensionTopUp inserts the top-up that takes a crypto extension's
// payment, with its "created" event, in the reservation's transaction.
func (x Extensions) createExtensionTopUp(ctx context.Context, tx *sqlx.Tx, in domain.ExtensionNew, o extensionOrder) (string, error) {
	for attempt := 1; ; attempt++ {
		ref := domain.NewRef(domain.TopUpRefPrefix)
		_, err := tx.ExecContext(ctx, `SAVEPOINT topup_ref`)
		if err == nil {
			_, err = tx.ExecContext(ctx, `INSERT INTO topups (ref, account_id, amount_cents, status, workflow_id, extension_ref)
				VALUES ($1, $2, $3, $4, $5, $6)`, ref, in.AccountID, o.PriceCents, domain.TopUpAwaitingPayment,
				domain.TopUpWorkflowID(ref), in.Ref)
		}
		if isUniqueViolation(err) && attempt < refAttempts {
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT topup_ref`); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			return "", fmt.Errorf("extension top-up of %s: %w", in.Ref, err)
		}
		msg := fmt.Sprintf("Paiement de la prolongation de %s de la commande %s : %s USD. Le montant reçu est crédité sur votre solde, puis débité pour la prolongation ; si elle ne peut plus être appliquée, il reste sur votre solde.",
			domain.Plural(in.Days, "jour", "jours"), in.OrderRef, domain.FormatUSD(o.PriceCents))
		return ref, insertCreatedEvent(ctx, tx, ref, msg, nil)
	}
}

var errExtensionOpen = domain.Errorf(domain.ECodeConflict,
	"Une prolongation de cette location attend déjà son paiement : réglez-la, ou attendez son échéance, avant d'en demander une autre.")

// checkNew checks a new extension of the customer's order under the
// order's row lock and the model's capacity lock: extendable, priced as
// the catalog says, no other awaiting payment, the machine free for the
// added days. It returns the order and the host kept (SSH driver).
func (x Extensions) checkNew(ctx context.Context, tx *sqlx.Tx, in domain.ExtensionNew) (extensionOrder, sql.NullInt64, error) {
	var host sql.NullInt64
	if err := (domain.ExtensionRequest{Days: in.Days, Method: in.Method, IdempotencyKey: in.Ref}).Validate(); err != nil {
		return extensionOrder{}, host, err
	}
	o, err := readExtensionOrder(ctx, tx, in.OrderRef, in.AccountID, in.Days, true)
	if err != nil {
		return o, host, err
	}
	if o.PriceCents <= 0 {
		return o, host, domain.FieldError("days", "Cette durée n'est pas proposée pour ce modèle.")
	}
	if o.PriceCents != in.AmountCents {
		return o, host, domain.Errorf(domain.ECodeConflict,
			"Le prix de la prolongation est maintenant de %s USD : vérifiez-le avant de confirmer. Rien n'a été débité.", domain.FormatUSD(o.PriceCents))
	}
	if err := LockCapacity(ctx, tx, o.Model); err != nil {
		return o, host, err
	}
	if err := x.checkExtendable(ctx, tx, o); err != nil {
		return o, host, err
	}
	var open int
	if err := tx.GetContext(ctx, &open, `SELECT count(*) FROM rental_extensions WHERE order_ref = $1 AND state = 'reserved'`, in.OrderRef); err != nil {
		return o, host, fmt.Errorf("open extensions of %s: %w", in.OrderRef, err)
	}
	if open > 0 {
		return o, host, errExtensionOpen
	}
	if err := x.checkLine(ctx, tx, o); err != nil {
		return o, host, err
	}
	host, err = x.machineOf(ctx, tx, o.Ref)
	return o, host, err
}

// checkExtendable refuses an order that is not paid or active, or whose
// machine is leaving service (a host drained or broken; the local
// driver's inventory shrunk below what is reserved): the added days
// could not be served on the same machine.
func (x Extensions) checkExtendable(ctx context.Context, tx *sqlx.Tx, o extensionOrder) error {
	if !domain.ExtendableStatus(o.Status) {
		return domain.ErrNotExtendable
	}
	gone, err := x.machineGone(ctx, tx, o)
	if err != nil || !gone {
		return err
	}
	return domain.Errorf(domain.ECodeExtensionUnavailable,
		"La machine %s de cette location sort du service à la fin de la période : elle n'est pas libre pour des jours de plus. Rien n'a été débité.", o.ModelName)
}

// machineGone says whether the order's machine will not serve it longer.
func (x Extensions) machineGone(ctx context.Context, q sqlx.QueryerContext, o extensionOrder) (bool, error) {
	var gone bool
	var err error
	if x.Provisioner == ProvisionerSSH {
		err = sqlx.GetContext(ctx, q, &gone, `SELECT EXISTS (SELECT 1 FROM gpu_hosts h WHERE h.state IN ('draining', 'broken')
			AND (h.id IN (SELECT host_id FROM host_reservations WHERE order_ref = $1 AND state = 'active')
				OR h.id IN (SELECT host_id FROM live_capacity_holds WHERE order_ref = $1)))`, o.Ref)
	} else {
		err = sqlx.GetContext(ctx, q, &gone, `SELECT kd_free_gpus($1, $2) < 0`, o.Model, o.Ref)
	}
	if err != nil {
		return false, fmt.Errorf("machine of %s: %w", o.Ref, err)
	}
	return gone, nil
}

// checkLine refuses a new extension while paid orders wait for a machine
// of the order's model and size that the free ones do not cover: the
// first freed, this one at its end, is theirs (the line comes first).
// The caller holds the model's capacity lock.
func (x Extensions) checkLine(ctx context.Context, tx *sqlx.Tx, o extensionOrder) error {
	var r struct {
		Waiting int `db:"waiting"`
		Free    int `db:"free"`
	}
	var err error
	if x.Provisioner == ProvisionerSSH {
		err = tx.GetContext(ctx, &r, `SELECT kd_waiting_ahead($1, $2, '') AS waiting,
			(SELECT count(*) FROM (`+freeHostSQL+`) f) AS free`, o.Model, o.GPUs, o.Ref)
	} else {
		err = tx.GetContext(ctx, &r, `SELECT kd_waiting_ahead($1, 0, '') AS waiting, kd_free_gpus($1, $2) AS free`, o.Model, o.Ref)
	}
	if err != nil {
		return fmt.Errorf("line of %s: %w", o.Model, err)
	}
	if r.Waiting > r.Free {
		return domain.Errorf(domain.ECodeExtensionUnavailable,
			"Des commandes déjà payées attendent une machine %s : la vôtre leur revient à la fin de votre période, elle n'est pas libre pour des jours de plus. Rien n'a été débité.", o.ModelName)
	}
	return nil
}

// machineOf is the host the order holds or rents (SSH driver; none with
// the local driver, or before the order has one).
func (x Extensions) machineOf(ctx context.Context, q sqlx.QueryerContext, orderRef string) (sql.NullInt64, error) {
	var id sql.NullInt64
	if x.Provisioner != ProvisionerSSH {
		return id, nil
	}
	err := sqlx.GetContext(ctx, q, &id, `SELECT COALESCE(
		(SELECT host_id FROM host_reservations WHERE order_ref = $1 AND state = 'active'),
		(SELECT host_id FROM live_capacity_holds WHERE order_ref = $1 LIMIT 1))`, orderRef)
	if err != nil {
		return id, fmt.Errorf("machine of %s: %w", orderRef, err)
	}
	return id, nil
}

// PayExtension pays the extension from the customer's balance and applies
// it, in one transaction: the check and reservation of the added days
// (a balance extension is reserved and paid at once), the debit, the
// order's event and period end, the extension paid and its mail. Once
// paid it changes nothing again. A balance extension that cannot be paid
// is refused with a domain error and nothing is written; a crypto one
// (its top-up credited the balance) lapses instead, with its reason on
// the order's timeline, and what was received stays on the balance.
func (x Extensions) PayExtension(ctx context.Context, in domain.ExtensionPayment) (domain.ExtensionOutcome, error) {
	var out domain.ExtensionOutcome
	err := x.DB.inTx(ctx, func(tx *sqlx.Tx) error {
		out = domain.ExtensionOutcome{}
		e, err := getExtension(ctx, tx, in.Ref, in.AccountID, true)
		switch {
		case err == nil && e.State == domain.ExtensionPaid:
			out.Paid = true
			return nil
		case err == nil && e.State == domain.ExtensionLapsed:
			out.Lapsed, out.Reason = true, e.Reason
			return nil
		case err == nil:
			return x.payReserved(ctx, tx, in, e, &out)
		case !errors.Is(err, domain.ErrNotFound):
			return err
		case in.Method != domain.ExtensionByBalance:
			return domain.Errorf(domain.ECodeConflict, "Cette prolongation n'a pas été réservée.")
		}
		o, host, err := x.checkNew(ctx, tx, in.ExtensionNew)
		if err != nil {
			return err
		}
		if err := debitForExtension(ctx, tx, in, o.PriceCents); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO rental_extensions (ref, order_ref, account_id, days, amount_cents,
				method, state, host_id, held_until, period_end, paid_at) VALUES ($1, $2, $3, $4, $5, 'balance', 'paid', $6, $7, $8, $7)`,
			in.Ref, in.OrderRef, in.AccountID, in.Days, o.PriceCents, host, in.At, in.PeriodEnd); err != nil {
			return fmt.Errorf("extension %s: %w", in.Ref, err)
		}
		out.Paid = true
		return nil
	})
	return out, err
}

// payReserved pays a reserved (crypto) extension from the balance its
// top-up credited, or lapses it when it can no longer be applied.
func (x Extensions) payReserved(ctx context.Context, tx *sqlx.Tx, in domain.ExtensionPayment, e domain.RentalExtension, out *domain.ExtensionOutcome) error {
	o, err := readExtensionOrder(ctx, tx, e.OrderRef, e.AccountID, e.Days, true)
	if err != nil {
		return err
	}
	reason := ""
	if err := x.checkExtendable(ctx, tx, o); err != nil {
		reason = domain.ErrorMessage(err)
	} else {
		if err := lockAccount(ctx, tx, e.AccountID); err != nil {
			return err
		}
		avail, err := availableCents(ctx, tx, e.AccountID)
		if err != nil {
			return err
		}
		if avail < e.AmountCents {
			reason = fmt.Sprintf("Votre solde disponible (%s USD) ne couvre plus la prolongation (%s USD).",
				domain.FormatUSD(max(avail, 0)), domain.FormatUSD(e.AmountCents))
		}
	}
	if reason != "" {
		out.Lapsed, out.Reason = true, reason
		return lapseExtension(ctx, tx, e, reason, in.At)
	}
	in.Days, in.AmountCents = e.Days, e.AmountCents
	if err := debitForExtension(ctx, tx, in, e.AmountCents); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE rental_extensions SET state = 'paid', paid_at = $2, period_end = $3,
		updated_at = now() WHERE ref = $1`, e.Ref, in.At, in.PeriodEnd); err != nil {
		return fmt.Errorf("extension %s paid: %w", e.Ref, err)
	}
	out.Paid = true
	return nil
}

// debitForExtension records the order's extension event with its debit
// of the balance (customer → revenue), its new period end and its mail.
func debitForExtension(ctx context.Context, tx *sqlx.Tx, in domain.ExtensionPayment, cents int64) error {
	if err := lockAccount(ctx, tx, in.AccountID); err != nil {
		return err
	}
	avail, err := availableCents(ctx, tx, in.AccountID)
	if err != nil {
		return err
	}
	if avail < cents {
		return domain.Errorf(domain.ECodeInsufficient,
			"Votre solde disponible (%s USD) ne couvre pas la prolongation (%s USD) : rien n'a été débité. Rechargez votre solde ou payez en crypto.",
			domain.FormatUSD(max(avail, 0)), domain.FormatUSD(cents))
	}
	return recordOrderEvent(ctx, tx, domain.OrderEvent{
		OrderRef: in.OrderRef, Key: domain.KeyExtensionPaid(in.Ref), Kind: domain.EventExtensionPaid, At: in.At,
		Message: in.Message, Status: in.Status, PeriodEnd: in.PeriodEnd,
		Data: map[string]any{"extension": in.Ref, "days": in.Days, "amount_cents": cents, "method": in.Method, "by": "customer"},
		Posting: &domain.Posting{Kind: domain.PostingOrderPayment, AccountID: in.AccountID, Cents: cents,
			Memo: "rental extension " + in.Ref},
	})
}
