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
	// payment request, recorded on the hold when it is taken), keep for
	// unpaid orders at once (HoldForRequest): a payment request costs
	// nothing, and may hold a whole host. 0: no limit.
	MaxUnpaidPerAccount int
	MaxUnpaidPerNetwork int
	// UnpaidShare is the percentage (0 to 100) of a model's capacity that
	// holds of unpaid orders may take (HoldForRequest): the rest goes to
	// whoever pays first; 0 holds nothing for unpaid orders. nil: no limit.
	UnpaidShare *int
	// UnpaidHoldBudget is the unpaid hold time one account, and one client
	// network, may spend in 24 hours (HoldForRequest). 0: no limit.
	UnpaidHoldBudget time.Duration
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
			opts = append(opts, fmt.Sprintf("%s (%d GPU)", domain.Plural(s/gpusPerLot, "lot", "lots"), s))
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
// no_capacity and a French message when none is free, or when the paid
// orders waiting for a machine of that model and size need every free one
// (kd_waiting_ahead): then no payment must be asked. An order already paid
// (or further) is left alone, so a retried activity never takes a second
// host. taken says the call took a new hold (rather than extending the
// order's own): a caller whose payment is then refused gives it back
// (ReleaseHold).
func (c Capacity) HoldCapacity(ctx context.Context, orderRef string, until time.Time) (taken bool, err error) {
	d, err := c.hold(ctx, orderRef, until, false)
	return d.Taken, err
}

// HoldForRequest holds capacity for a payment request of an order until
// until, when every rule allows it; otherwise the request is still made,
// without a hold, and the decision says why in French. It never extends a
// hold: an order that already holds keeps its hold as it is (only a
// payment seen extends it, ExtendHeldForPayment). A new hold is taken only
// when the account's address is confirmed, the account and the client
// network that asked (recorded on the hold as its owners) hold fewer than
// MaxUnpaidPerAccount (MaxUnpaidPerNetwork) for unpaid orders, the model's
// holds of unpaid orders stay within UnpaidShare, the owners' unpaid hold
// time of the last 24 hours leaves room in UnpaidHoldBudget, and the paid
// orders waiting for a machine leave one free. It fails with no_capacity
// only when no host of the order's configuration exists, or every one is
// rented or held by paid orders: then no payment must be asked.
func (c Capacity) HoldForRequest(ctx context.Context, orderRef string, until time.Time) (domain.HoldDecision, error) {
	return c.hold(ctx, orderRef, until, true)
}

// holdOrder is what a hold decision reads of its order.
type holdOrder struct {
	Model       string `db:"gpu_model"`
	GPUs        int    `db:"total_gpus"`
	GPUsPerLot  int    `db:"gpus_per_lot"`
	Status      string `db:"status"`
	AccountID   int64  `db:"account_id"`
	HoldNetwork []byte `db:"hold_network"`
	Verified    bool   `db:"verified"`
}

func (c Capacity) hold(ctx context.Context, orderRef string, until time.Time, request bool) (d domain.HoldDecision, err error) {
	err = c.DB.inTx(ctx, func(tx *sqlx.Tx) error {
		d = domain.HoldDecision{}
		var o holdOrder
		err := tx.GetContext(ctx, &o, `SELECT o.gpu_model, o.total_gpus, o.gpus_per_lot, o.status, o.account_id, o.hold_network,
				a.email_verified_at IS NOT NULL AS verified
			FROM orders o JOIN accounts a ON a.id = o.account_id WHERE o.ref = $1`, orderRef)
		if errors.Is(err, sql.ErrNoRows) {
			return domain.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("order %s: %w", orderRef, err)
		}
		if o.Status != domain.StatusAwaitingPayment && o.Status != domain.StatusPaymentDetected {
			return nil
		}
		if request {
			// Account, then network, then model: one lock order for every
			// caller (no deadlock).
			if err := c.lockHolder(ctx, tx, o.AccountID, o.HoldNetwork); err != nil {
				return err
			}
		}
		if err := LockCapacity(ctx, tx, o.Model); err != nil {
			return err
		}
		// The order's own hold, if it still counts: a payment request keeps
		// it as it is; a balance payment extends it.
		own := `SELECT held_until FROM live_capacity_holds WHERE order_ref = $1`
		args := []any{orderRef}
		if !request {
			own = `UPDATE capacity_holds SET held_until = GREATEST(held_until, $2), updated_at = now()
				WHERE order_ref = $1 AND state = 'held' AND id IN (SELECT id FROM live_capacity_holds) RETURNING held_until`
			args = append(args, until)
		}
		var held time.Time
		err = tx.GetContext(ctx, &held, own, args...)
		if err == nil {
			d = domain.HoldDecision{Held: true, Until: held}
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("hold of %s: %w", orderRef, err)
		}
		// Its lapsed hold, if any, was given back by LockCapacity.
		hostID, reason, err := c.freeForHold(ctx, tx, orderRef, o)
		if err != nil {
			return err
		}
		if reason != "" {
			if !request {
				return c.nothingFree(ctx, tx, o)
			}
			if err := c.checkSellable(ctx, tx, orderRef, o); err != nil {
				return err
			}
			d.Reason = reason
			return nil
		}
		if request {
			if d.Reason, err = c.unpaidRefusal(ctx, tx, orderRef, o, until); err != nil || d.Reason != "" {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO capacity_holds (order_ref, gpu_model, gpus, host_id, held_until, account_id, network)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, orderRef, o.Model, o.GPUs, hostID, until, o.AccountID, o.HoldNetwork); err != nil {
			return fmt.Errorf("hold capacity for %s: %w", orderRef, err)
		}
		d = domain.HoldDecision{Held: true, Until: until, Taken: true}
		return nil
	})
	if err != nil {
		return domain.HoldDecision{}, err
	}
	return d, nil
}

// freeForHold finds what a new hold of the order would take: the lowest
// free host of its configuration (SSH driver) or its GPUs (local driver),
// once the paid orders waiting for a machine of that model and size
// (kd_waiting_ahead, migration 00059) have theirs: the first machine freed
// is theirs. reason says in French why there is none.
func (c Capacity) freeForHold(ctx context.Context, tx *sqlx.Tx, orderRef string, o holdOrder) (hostID sql.NullInt64, reason string, err error) {
	var r struct {
		Free    int           `db:"free"`
		Waiting int           `db:"waiting"`
		Host    sql.NullInt64 `db:"host"`
	}
	if c.Provisioner == ProvisionerSSH {
		err = tx.GetContext(ctx, &r, `SELECT (SELECT count(*) FROM (`+freeHostSQL+`) f) AS free,
			kd_waiting_ahead($1, $2, '') AS waiting,
			(SELECT f.id FROM (`+freeHostSQL+`) f ORDER BY f.id LIMIT 1) AS host`, o.Model, o.GPUs, orderRef)
		if err != nil {
			return hostID, "", fmt.Errorf("free host for %s: %w", orderRef, err)
		}
		if r.Free > r.Waiting {
			return r.Host, "", nil
		}
		if r.Free > 0 {
			return hostID, paidLineReason(o.Model), nil
		}
		return hostID, allHeldReason(o.Model), nil
	}
	err = tx.GetContext(ctx, &r, `SELECT kd_free_gpus($1, $2) AS free, kd_waiting_ahead($1, 0, '') AS waiting`, o.Model, orderRef)
	if err != nil {
		return hostID, "", fmt.Errorf("free GPUs for %s: %w", orderRef, err)
	}
	switch {
	case r.Free-r.Waiting >= o.GPUs:
		return hostID, "", nil
	case r.Free >= o.GPUs:
		return hostID, paidLineReason(o.Model), nil
	}
	return hostID, allHeldReason(o.Model), nil
}

func paidLineReason(model string) string {
	return fmt.Sprintf("Des commandes déjà payées attendent une machine %s : elles passent d'abord.", model)
}

func allHeldReason(model string) string {
	return fmt.Sprintf("Les machines %s libres sont déjà réservées pour d'autres commandes.", model)
}

// nothingFree is the refusal of a balance payment when nothing is free: the
// sizes that exist when none is the order's, else no_capacity.
func (c Capacity) nothingFree(ctx context.Context, tx *sqlx.Tx, o holdOrder) error {
	if c.Provisioner == ProvisionerSSH {
		sizes, err := c.hostSizes(ctx, tx, o.Model)
		if err != nil {
			return err
		}
		if !slices.Contains(sizes, o.GPUs) {
			return domain.Errorf(domain.ECodeNoCapacity, "%s Aucun paiement n'est demandé.",
				noFitMessage(o.Model, o.GPUs, o.GPUsPerLot, sizes))
		}
	}
	return noCapacity(o.Model, o.GPUs)
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
