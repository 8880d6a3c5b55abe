package postgres

// The limits on holds for unpaid orders (issue 35): a hold is taken only
// while paid orders are served first, within the account's and the
// network's counts, the daily budget of unpaid hold time and the model's
// unpaid share.

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// paidStatusSQL: the order o of a hold is paid (or further): its hold is
// not one of an unpaid order.
const paidStatusSQL = `o.status NOT IN ('awaiting_payment', 'payment_detected')`

// checkSellable refuses a payment request (nothingFree) when no host of the
// order's configuration is available without being held by a paid order
// (local driver: not enough GPUs left once reservations and paid orders'
// holds are counted): everything is rented by payers. Otherwise a host
// held for an unpaid order may still come back: the request is made.
func (c Capacity) checkSellable(ctx context.Context, tx *sqlx.Tx, orderRef string, o holdOrder) error {
	var left int
	var err error
	if c.Provisioner == ProvisionerSSH {
		err = tx.GetContext(ctx, &left, `SELECT count(*) FROM gpu_hosts h
			WHERE h.gpu_model = $1 AND h.gpu_count = $2 AND h.state = 'available'
			AND NOT EXISTS (SELECT 1 FROM live_capacity_holds l JOIN orders o ON o.ref = l.order_ref
				WHERE l.host_id = h.id AND l.order_ref <> $3 AND `+paidStatusSQL+`)`, o.Model, o.GPUs, orderRef)
		if err == nil && left > 0 {
			return nil
		}
	} else {
		err = tx.GetContext(ctx, &left, `SELECT (COALESCE((SELECT total_gpus FROM gpu_inventory WHERE gpu_model = $1), 0)
			- COALESCE((SELECT SUM(gpus) FROM gpu_reservations WHERE gpu_model = $1 AND state <> 'released'), 0)
			- COALESCE((SELECT SUM(l.gpus) FROM live_capacity_holds l JOIN orders o ON o.ref = l.order_ref
				WHERE l.gpu_model = $1 AND l.order_ref <> $2 AND `+paidStatusSQL+`), 0))::int`, o.Model, orderRef)
		if err == nil && left >= o.GPUs {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("capacity left for %s: %w", orderRef, err)
	}
	return c.nothingFree(ctx, tx, o)
}

// lockHolder serialises the unpaid-hold decisions of an account and of a
// client network until the end of tx.
func (c Capacity) lockHolder(ctx context.Context, tx *sqlx.Tx, accountID int64, network []byte) error {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('kd-holds:account:' || $1))`, accountID); err != nil {
		return fmt.Errorf("lock holds of account %d: %w", accountID, err)
	}
	if network != nil {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('kd-holds:network:' || encode($1, 'hex')))`, network); err != nil {
			return fmt.Errorf("lock holds of a network: %w", err)
		}
	}
	return nil
}

// unpaidHoldsSQL counts the live holds of unpaid orders (awaiting payment,
// or a payment seen but not confirmed) other than $1: add the owner's
// condition on l.
const unpaidHoldsSQL = `SELECT count(*) FROM live_capacity_holds l JOIN orders o ON o.ref = l.order_ref
	WHERE o.status IN ('awaiting_payment', 'payment_detected') AND l.order_ref <> $1`

// holdSpentSQL is the unpaid hold time, in seconds, of an owner's holds
// ($1: the condition's argument) taken in the last 24 hours that no
// reservation consumed: each from its taking until its end, or until it
// was given back when that came first. Add the owner's condition on h.
const holdSpentSQL = `SELECT COALESCE(SUM(GREATEST(extract(epoch FROM
		CASE WHEN h.state = 'released' THEN LEAST(h.held_until, h.updated_at) ELSE h.held_until END - h.created_at), 0)), 0)::float8
	FROM capacity_holds h WHERE h.state <> 'consumed' AND h.created_at > now() - make_interval(secs => $2)`

// unpaidRefusal says in French why a payment request takes no new hold
// ("" when it may): the account's address not confirmed, the account or
// the network at its count of unpaid holds, the model's unpaid share
// reached, or the owners' daily budget of unpaid hold time spent.
func (c Capacity) unpaidRefusal(ctx context.Context, tx *sqlx.Tx, orderRef string, o holdOrder, until time.Time) (string, error) {
	if !o.Verified {
		return "Votre adresse e-mail n'est pas encore confirmée : aucune machine n'est réservée tant qu'elle ne l'est pas.", nil
	}
	count := func(cond string, arg any) (int, error) {
		var n int
		err := tx.GetContext(ctx, &n, unpaidHoldsSQL+` AND `+cond, orderRef, arg)
		return n, err
	}
	if c.MaxUnpaidPerAccount > 0 {
		n, err := count(`l.account_id = $2`, o.AccountID)
		if err != nil {
			return "", fmt.Errorf("unpaid holds of account %d: %w", o.AccountID, err)
		}
		if n >= c.MaxUnpaidPerAccount {
			return fmt.Sprintf("Votre compte réserve déjà %s pour des commandes non payées.", domain.Plural(n, "machine", "machines")), nil
		}
	}
	if c.MaxUnpaidPerNetwork > 0 && o.HoldNetwork != nil {
		n, err := count(`l.network = $2`, o.HoldNetwork)
		if err != nil {
			return "", fmt.Errorf("unpaid holds of a network: %w", err)
		}
		if n >= c.MaxUnpaidPerNetwork {
			return "Trop de machines sont déjà réservées depuis votre réseau pour des commandes non payées.", nil
		}
	}
	share, err := c.shareLeft(ctx, tx, orderRef, o)
	if err != nil {
		return "", err
	}
	if !share {
		return fmt.Sprintf("La part des machines %s réservables avant paiement est atteinte.", o.Model), nil
	}
	if c.UnpaidHoldBudget > 0 {
		var need float64
		if err := tx.GetContext(ctx, &need, `SELECT GREATEST(extract(epoch FROM $1::timestamptz - now()), 0)::float8`, until); err != nil {
			return "", fmt.Errorf("hold length: %w", err)
		}
		spent := func(cond string, arg any) (float64, error) {
			var s float64
			err := tx.GetContext(ctx, &s, holdSpentSQL+` AND `+cond, arg, domain.HoldBudgetWindow.Seconds())
			return s, err
		}
		s, err := spent(`h.account_id = $1`, o.AccountID)
		if err != nil {
			return "", fmt.Errorf("unpaid hold time of account %d: %w", o.AccountID, err)
		}
		if s+need > c.UnpaidHoldBudget.Seconds() {
			return "Votre compte a épuisé son temps de réservation sans paiement des dernières 24 heures.", nil
		}
		if o.HoldNetwork != nil {
			if s, err = spent(`h.network = $1`, o.HoldNetwork); err != nil {
				return "", fmt.Errorf("unpaid hold time of a network: %w", err)
			}
			if s+need > c.UnpaidHoldBudget.Seconds() {
				return "Votre réseau a épuisé son temps de réservation sans paiement des dernières 24 heures.", nil
			}
		}
	}
	return "", nil
}

// shareLeft says whether one more hold of an unpaid order stays within
// UnpaidShare percent of the model's capacity: its hosts in service (not
// broken), or with the local driver its inventory's GPUs, the holds then
// counted in GPUs.
func (c Capacity) shareLeft(ctx context.Context, tx *sqlx.Tx, orderRef string, o holdOrder) (bool, error) {
	if c.UnpaidShare == nil {
		return true, nil
	}
	var r struct {
		Held     int `db:"held"`
		Capacity int `db:"capacity"`
	}
	q := `SELECT (` + unpaidHoldsSQL + ` AND l.gpu_model = $2) AS held,
		(SELECT count(*) FROM gpu_hosts WHERE gpu_model = $2 AND state <> 'broken') AS capacity`
	need := 1
	if c.Provisioner != ProvisionerSSH {
		q = `SELECT COALESCE((SELECT SUM(l.gpus) FROM live_capacity_holds l JOIN orders o ON o.ref = l.order_ref
				WHERE o.status IN ('awaiting_payment', 'payment_detected') AND l.order_ref <> $1 AND l.gpu_model = $2), 0) AS held,
			COALESCE((SELECT total_gpus FROM gpu_inventory WHERE gpu_model = $2), 0) AS capacity`
		need = o.GPUs
	}
	if err := tx.GetContext(ctx, &r, q, orderRef, o.Model); err != nil {
		return false, fmt.Errorf("unpaid share of %s: %w", o.Model, err)
	}
	return r.Held+need <= *c.UnpaidShare*r.Capacity/100, nil
}
