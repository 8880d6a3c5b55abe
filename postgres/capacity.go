package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// Capacity is the one calculation of what can be sold: the quote's
// availability, the check before a payment request or a balance payment, and
// the hold that keeps capacity for the order until provisioning takes it
// (live_capacity_holds says which holds still count). With the SSH driver an
// order takes one whole host whose GPU count is exactly the order's; with
// the local driver GPUs are counted.
type Capacity struct {
	DB          *DB
	Provisioner string // ProvisionerSSH or ProvisionerLocal
	// MaxUnpaidPerAccount and MaxUnpaidPerNetwork bound the holds one
	// account, and one client network (the network that asked for the
	// payment request), keep for orders awaiting payment at once
	// (HoldForRequest): a payment request costs nothing, and holds a whole
	// host. 0: no limit.
	MaxUnpaidPerAccount int
	MaxUnpaidPerNetwork int
}

// LockCapacity serialises every decision about model's capacity (holds and
// reservations) until the end of tx. It first gives back, for good, the
// model's holds that no longer count (payment window over, order unpaid): a
// lapsed hold must not count again when its order is paid late, once its
// host may have been held or taken by another order. The lock and the
// release are the database's kd_lock_capacity (migration 00055), which the
// local driver's reservation (kd_reserve_gpus) takes too.
func LockCapacity(ctx context.Context, tx sqlx.ExecerContext, model string) error {
	if _, err := tx.ExecContext(ctx, `SELECT kd_lock_capacity($1)`, model); err != nil {
		return fmt.Errorf("lock capacity of %s: %w", model, err)
	}
	return nil
}

// freeHostSQL selects the free hosts an order ($1: model, $2: GPU count,
// $3: the order) may take: available, that configuration, held by no other
// order. Capacity and the SSH driver (through FreeHost) share it.
const freeHostSQL = `SELECT h.id, h.name FROM gpu_hosts h
	WHERE h.gpu_model = $1 AND h.gpu_count = $2 AND ` + hostFreeSQL

// hostFreeSQL: host h is available and held by no other order than $3.
const hostFreeSQL = `h.state = 'available'
	AND NOT EXISTS (SELECT 1 FROM live_capacity_holds l WHERE l.host_id = h.id AND l.order_ref <> $3)`

// FreeHost picks, and locks (SKIP LOCKED: a host another transaction is
// taking is passed over), a free host gpus GPUs of model that orderRef may
// take, prefer first (the host it holds; 0: none), else the lowest ID.
// found is false when none is free.
func FreeHost(ctx context.Context, q sqlx.QueryerContext, model string, gpus int, orderRef string, prefer int64) (id int64, name string, found bool, err error) {
	return pickHost(ctx, q, freeHostSQL+` ORDER BY h.id = $4 DESC, h.id LIMIT 1 FOR UPDATE SKIP LOCKED`,
		model, gpus, orderRef, prefer)
}

// HeldHostFree locks host id, the one orderRef holds, if it is still free
// for the order (gpus GPUs of model, available). Other orders pass over a
// host an order holds, so this needs no capacity lock.
func HeldHostFree(ctx context.Context, q sqlx.QueryerContext, model string, gpus int, orderRef string, id int64) (name string, found bool, err error) {
	_, name, found, err = pickHost(ctx, q, freeHostSQL+` AND h.id = $4 FOR UPDATE SKIP LOCKED`, model, gpus, orderRef, id)
	return name, found, err
}

func pickHost(ctx context.Context, q sqlx.QueryerContext, query, model string, gpus int, orderRef string, id int64) (int64, string, bool, error) {
	var h struct {
		ID   int64  `db:"id"`
		Name string `db:"name"`
	}
	err := sqlx.GetContext(ctx, q, &h, query, model, gpus, orderRef, id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("free host of %s: %w", model, err)
	}
	return h.ID, h.Name, true, nil
}

// freeGPUsSQL counts the local driver's free GPUs of model $1 for order $2:
// inventory minus reservations minus other orders' live holds (one
// definition, kd_free_gpus, shared with the reservation itself).
const freeGPUsSQL = `SELECT kd_free_gpus($1, $2)`

// FreeGPUs is freeGPUsSQL for holds and availability.
func FreeGPUs(ctx context.Context, q sqlx.QueryerContext, model, orderRef string) (int, error) {
	var free int
	if err := sqlx.GetContext(ctx, q, &free, freeGPUsSQL, model, orderRef); err != nil {
		return 0, fmt.Errorf("free GPUs of %s: %w", model, err)
	}
	return free, nil
}

// Availability says whether gpus GPUs of model (gpusPerLot per lot) could
// be sold now (other orders' holds count as taken), with the same French
// message as the refusal a payment request or an order would get.
func (c Capacity) Availability(ctx context.Context, model string, gpus, gpusPerLot int) (domain.Availability, error) {
	if c.Provisioner != ProvisionerSSH {
		free, err := FreeGPUs(ctx, c.DB, model, "")
		a := domain.Availability{AvailableNow: free >= gpus, FreeNow: max(free, 0), Fits: true}
		if !a.AvailableNow {
			a.Message = domain.ErrorMessage(noCapacity(model, gpus))
		}
		return a, err
	}
	var free int
	if err := c.DB.GetContext(ctx, &free, `SELECT count(*) FROM (`+freeHostSQL+`) f`, model, gpus, ""); err != nil {
		return domain.Availability{}, fmt.Errorf("availability: %w", err)
	}
	sizes, err := c.hostSizes(ctx, c.DB, model)
	if err != nil {
		return domain.Availability{}, err
	}
	a := domain.Availability{AvailableNow: free > 0, FreeNow: free, HostSizes: sizes, Fits: slices.Contains(sizes, gpus)}
	switch {
	case !a.Fits:
		a.Message = noFitMessage(model, gpus, gpusPerLot, sizes)
	case !a.AvailableNow:
		a.Message = domain.ErrorMessage(noCapacity(model, gpus))
	}
	return a, nil
}

// hostSizes lists the GPU counts of model's hosts in service: an order must
// be exactly one of them.
func (c Capacity) hostSizes(ctx context.Context, q sqlx.QueryerContext, model string) ([]int, error) {
	sizes := []int{}
	if err := sqlx.SelectContext(ctx, q, &sizes, `SELECT DISTINCT gpu_count FROM gpu_hosts
		WHERE gpu_model = $1 AND state <> 'broken' ORDER BY gpu_count`, model); err != nil {
		return nil, fmt.Errorf("host sizes of %s: %w", model, err)
	}
	return sizes, nil
}

// CheckFits refuses an order of gpus GPUs of model when the model's hosts
// all have another GPU count (SSH driver: an order is one whole host),
// saying which sizes exist. With no host of the model in service at all the
// order may be created: its payment request is refused (HoldCapacity) until
// a host is added.
func (c Capacity) CheckFits(ctx context.Context, model string, gpus, gpusPerLot int) error {
	if c.Provisioner != ProvisionerSSH {
		return nil
	}
	sizes, err := c.hostSizes(ctx, c.DB, model)
	if err != nil {
		return err
	}
	if len(sizes) == 0 || slices.Contains(sizes, gpus) {
		return nil
	}
	return &domain.Error{Code: domain.ECodeInvalid, Field: "lots", Message: noFitMessage(model, gpus, gpusPerLot, sizes)}
}

func noFitMessage(model string, gpus, gpusPerLot int, sizes []int) string {
	if len(sizes) == 0 {
		return fmt.Sprintf("Aucune machine %s n'est en service pour le moment : réessayez plus tard ou choisissez un autre modèle.", model)
	}
	var opts []string
	for _, s := range sizes {
		if gpusPerLot > 0 && s%gpusPerLot == 0 {
			opts = append(opts, fmt.Sprintf("%d lot(s) (%d GPU)", s/gpusPerLot, s))
		}
	}
	if len(opts) == 0 {
		return fmt.Sprintf("Aucune machine %s ne compte %d GPU.", model, gpus)
	}
	return fmt.Sprintf("Une commande occupe une seule machine et aucune machine %s ne compte %d GPU : choisissez %s.",
		model, gpus, strings.Join(opts, " ou "))
}

// HoldCapacity holds capacity for an order awaiting payment until until
// (extended, never shortened, when called again), or refuses with
// no_capacity and a French message when none is free: then no payment must
// be asked. An order already paid (or further) is left alone, so a retried
// activity never takes a second host. taken says the call took a new hold
// (rather than extending the order's own): a caller whose payment is then
// refused gives it back (ReleaseHold).
func (c Capacity) HoldCapacity(ctx context.Context, orderRef string, until time.Time) (taken bool, err error) {
	return c.hold(ctx, orderRef, until, false)
}

// HoldForRequest is HoldCapacity for a payment request: a new hold is
// also refused (ECodeHoldLimit, a *domain.QuotaError) when the order's
// account, or the client network that asked for the request, already
// holds MaxUnpaidPerAccount (MaxUnpaidPerNetwork) for other orders
// awaiting payment. Extending the order's own hold is never refused.
func (c Capacity) HoldForRequest(ctx context.Context, orderRef string, until time.Time) (taken bool, err error) {
	return c.hold(ctx, orderRef, until, true)
}

func (c Capacity) hold(ctx context.Context, orderRef string, until time.Time, limited bool) (taken bool, err error) {
	err = c.DB.inTx(ctx, func(tx *sqlx.Tx) error {
		var o struct {
			Model       string `db:"gpu_model"`
			GPUs        int    `db:"total_gpus"`
			GPUsPerLot  int    `db:"gpus_per_lot"`
			Status      string `db:"status"`
			AccountID   int64  `db:"account_id"`
			HoldNetwork []byte `db:"hold_network"`
		}
		err := tx.GetContext(ctx, &o, `SELECT gpu_model, total_gpus, gpus_per_lot, status, account_id, hold_network
			FROM orders WHERE ref = $1`, orderRef)
		if errors.Is(err, sql.ErrNoRows) {
			return domain.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("order %s: %w", orderRef, err)
		}
		if o.Status != domain.StatusAwaitingPayment && o.Status != domain.StatusPaymentDetected {
			return nil
		}
		limited = limited && o.Status == domain.StatusAwaitingPayment
		if limited {
			// Account, then network, then model: one lock order for every
			// caller (no deadlock).
			if err := c.lockHolder(ctx, tx, o.AccountID, o.HoldNetwork); err != nil {
				return err
			}
		}
		if err := LockCapacity(ctx, tx, o.Model); err != nil {
			return err
		}
		// The order's own hold, if it still counts: extended.
		res, err := tx.ExecContext(ctx, `UPDATE capacity_holds SET held_until = GREATEST(held_until, $2), updated_at = now()
			WHERE order_ref = $1 AND state = 'held' AND id IN (SELECT id FROM live_capacity_holds)`, orderRef, until)
		if err != nil {
			return fmt.Errorf("extend hold of %s: %w", orderRef, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		// Its lapsed hold, if any, was given back by LockCapacity.
		if limited {
			if err := c.checkUnpaidHolds(ctx, tx, orderRef, o.AccountID, o.HoldNetwork); err != nil {
				return err
			}
		}
		var hostID sql.NullInt64
		if c.Provisioner == ProvisionerSSH {
			var h struct {
				ID   int64  `db:"id"`
				Name string `db:"name"`
			}
			err := tx.GetContext(ctx, &h, freeHostSQL+` ORDER BY h.id LIMIT 1`, o.Model, o.GPUs, orderRef)
			if errors.Is(err, sql.ErrNoRows) {
				sizes, serr := c.hostSizes(ctx, tx, o.Model)
				if serr != nil {
					return serr
				}
				if !slices.Contains(sizes, o.GPUs) {
					return domain.Errorf(domain.ECodeNoCapacity, "%s Aucun paiement n'est demandé.",
						noFitMessage(o.Model, o.GPUs, o.GPUsPerLot, sizes))
				}
				return noCapacity(o.Model, o.GPUs)
			}
			if err != nil {
				return fmt.Errorf("free host for %s: %w", orderRef, err)
			}
			hostID = sql.NullInt64{Int64: h.ID, Valid: true}
		} else {
			free, err := FreeGPUs(ctx, tx, o.Model, orderRef)
			if err != nil {
				return err
			}
			if free < o.GPUs {
				return noCapacity(o.Model, o.GPUs)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO capacity_holds (order_ref, gpu_model, gpus, host_id, held_until)
			VALUES ($1, $2, $3, $4, $5)`, orderRef, o.Model, o.GPUs, hostID, until); err != nil {
			return fmt.Errorf("hold capacity for %s: %w", orderRef, err)
		}
		taken = true
		return nil
	})
	return taken && err == nil, err
}

// lockHolder serialises the unpaid-hold decisions of an account and of a
// client network until the end of tx.
func (c Capacity) lockHolder(ctx context.Context, tx *sqlx.Tx, accountID int64, network []byte) error {
	if c.MaxUnpaidPerAccount > 0 {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('kd-holds:account:' || $1))`, accountID); err != nil {
			return fmt.Errorf("lock holds of account %d: %w", accountID, err)
		}
	}
	if c.MaxUnpaidPerNetwork > 0 && network != nil {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('kd-holds:network:' || encode($1, 'hex')))`, network); err != nil {
			return fmt.Errorf("lock holds of a network: %w", err)
		}
	}
	return nil
}

// unpaidHoldsSQL lists the live holds of orders awaiting payment other
// than $1: add the holder's condition.
const unpaidHoldsSQL = `SELECT l.held_until FROM live_capacity_holds l JOIN orders o ON o.ref = l.order_ref
	WHERE o.status = 'awaiting_payment' AND l.order_ref <> $1`

// checkUnpaidHolds refuses a new hold when the account, or the network,
// already holds its maximum for unpaid orders.
func (c Capacity) checkUnpaidHolds(ctx context.Context, tx *sqlx.Tx, orderRef string, accountID int64, network []byte) error {
	count := func(cond string, arg any) (int, time.Duration, error) {
		var r struct {
			N    int             `db:"n"`
			Wait sql.NullFloat64 `db:"wait"`
		}
		err := tx.GetContext(ctx, &r, `SELECT count(*) AS n, extract(epoch FROM min(h.held_until) - now())::float8 AS wait
			FROM (`+unpaidHoldsSQL+` AND `+cond+`) h`, orderRef, arg)
		return r.N, time.Duration(r.Wait.Float64 * float64(time.Second)), err
	}
	if c.MaxUnpaidPerAccount > 0 {
		n, wait, err := count(`o.account_id = $2`, accountID)
		if err != nil {
			return fmt.Errorf("unpaid holds of account %d: %w", accountID, err)
		}
		if n >= c.MaxUnpaidPerAccount {
			return holdLimit(domain.QuotaUnpaidHolds, wait, fmt.Sprintf(
				"Votre compte réserve déjà %d machine(s) pour des demandes de paiement non réglées : payez l'une d'elles, ou attendez que sa réservation expire, avant d'en demander une autre. Aucun paiement n'est demandé.",
				n))
		}
	}
	if c.MaxUnpaidPerNetwork > 0 && network != nil {
		n, wait, err := count(`o.hold_network = $2`, network)
		if err != nil {
			return fmt.Errorf("unpaid holds of a network: %w", err)
		}
		if n >= c.MaxUnpaidPerNetwork {
			return holdLimit(domain.QuotaUnpaidHolds, wait,
				"Trop de machines sont déjà réservées depuis votre réseau pour des demandes de paiement non réglées : payez l'une d'elles, ou attendez que sa réservation expire, avant d'en demander une autre. Aucun paiement n'est demandé.")
		}
	}
	return nil
}

func holdLimit(quota string, wait time.Duration, message string) error {
	e := domain.QuotaExceeded(quota, wait, message)
	e.Err.Code = domain.ECodeHoldLimit
	return e
}

// UnpaidHoldsRetry says when the first of the unpaid holds of an account
// or of a client network lapses (0: none live): the Retry-After of a
// payment request refused with ECodeHoldLimit, which reaches the API
// through the workflow without it.
func (db *DB) UnpaidHoldsRetry(ctx context.Context, accountID int64, network string) (time.Duration, error) {
	var wait sql.NullFloat64
	if err := db.GetContext(ctx, &wait, `SELECT extract(epoch FROM min(h.held_until) - now())::float8
		FROM (`+unpaidHoldsSQL+` AND (o.account_id = $2 OR o.hold_network = $3)) h`,
		"", accountID, networkKey(network)); err != nil {
		return 0, fmt.Errorf("unpaid holds retry: %w", err)
	}
	return max(time.Duration(wait.Float64*float64(time.Second)), 0), nil
}

// ExtendHeldForPayment keeps the hold of an order awaiting payment until
// until once a payment to its request is seen (the chain watcher's
// transaction that records it): the short first hold becomes the
// request's deadline plus HoldGrace. A hold that already lapsed is not
// taken back (its host may be another order's by now).
func ExtendHeldForPayment(ctx context.Context, tx sqlx.ExecerContext, orderRef string, until time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE capacity_holds SET held_until = $2, updated_at = now()
		WHERE order_ref = $1 AND state = 'held' AND held_until > now() AND held_until < $2`, orderRef, until); err != nil {
		return fmt.Errorf("extend hold of %s: %w", orderRef, err)
	}
	return nil
}

// ReleaseHold gives back the hold of an order still awaiting payment, when
// the payment it was taken for is refused (no request made, balance short):
// other customers need not wait for its window. A paid order keeps its hold.
func (c Capacity) ReleaseHold(ctx context.Context, orderRef string) error {
	if _, err := c.DB.ExecContext(ctx, `UPDATE capacity_holds SET state = 'released', updated_at = now()
		WHERE order_ref = $1 AND state = 'held'
		AND EXISTS (SELECT 1 FROM orders WHERE ref = $1 AND status = 'awaiting_payment')`, orderRef); err != nil {
		return fmt.Errorf("release hold of %s: %w", orderRef, err)
	}
	return nil
}

func noCapacity(model string, gpus int) error {
	return domain.Errorf(domain.ECodeNoCapacity,
		"Aucune machine %s à %d GPU n'est libre en ce moment : aucun paiement n'est demandé. Réessayez plus tard ou choisissez une autre configuration.",
		model, gpus)
}

// ConsumeHold marks the order's hold as taken by its reservation, in the
// reservation's transaction.
func ConsumeHold(ctx context.Context, tx sqlx.ExecerContext, orderRef string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE capacity_holds SET state = 'consumed', updated_at = now()
		WHERE order_ref = $1 AND state = 'held'`, orderRef); err != nil {
		return fmt.Errorf("consume hold of %s: %w", orderRef, err)
	}
	return nil
}

// HeldHost returns the host the order holds, if any.
func HeldHost(ctx context.Context, q sqlx.QueryerContext, orderRef string) (int64, bool, error) {
	var id sql.NullInt64
	err := sqlx.GetContext(ctx, q, &id, `SELECT host_id FROM live_capacity_holds WHERE order_ref = $1`, orderRef)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("hold of %s: %w", orderRef, err)
	}
	return id.Int64, id.Valid, nil
}
