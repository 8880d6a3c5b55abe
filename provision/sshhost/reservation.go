package sshhost

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
)

// reservation is an order's active hold on a host, with the host.
type reservation struct {
	ID         int64          `db:"id"`
	OrderRef   string         `db:"order_ref"`
	UnixUser   string         `db:"unix_user"`
	PrivateKey sql.NullString `db:"private_key"`
	PublicKey  sql.NullString `db:"public_key"`
	JupyterTok sql.NullString `db:"jupyter_token"`
	// PresetCheck is what the preset's check found (French, for the order).
	PresetCheck sql.NullString `db:"preset_check"`
	// UID and SubIDs are the account's uid on the host and its subordinate
	// ranges ("first:count ..."), as prepare reported them.
	UID    sql.NullInt64 `db:"unix_uid"`
	SubIDs string        `db:"sub_ids"`
	host
}

const reservationQuery = `
	SELECT r.id, r.order_ref, r.unix_user, r.private_key, r.public_key, r.jupyter_token, r.preset_check,
		r.unix_uid, r.sub_ids, h.id, h.name, h.address, h.ssh_port, h.host_key_fingerprint, h.host_key_type,
		h.gpu_model, h.gpu_count, h.state
	FROM host_reservations r JOIN gpu_hosts h ON h.id = r.host_id
	WHERE r.order_ref = $1 AND r.state = 'active'`

func (d *Driver) activeReservation(ctx context.Context, q sqlx.QueryerContext, orderRef string) (reservation, bool, error) {
	var r reservation
	err := q.QueryRowxContext(ctx, reservationQuery, orderRef).Scan(&r.ID, &r.OrderRef, &r.UnixUser,
		&r.PrivateKey, &r.PublicKey, &r.JupyterTok, &r.PresetCheck, &r.UID, &r.SubIDs, &r.host.ID, &r.Name, &r.Address, &r.Port,
		&r.Fingerprint, &r.KeyType, &r.GPUModel, &r.GPUCount, &r.State)
	if errors.Is(err, sql.ErrNoRows) {
		return reservation{}, false, nil
	}
	if err != nil {
		return reservation{}, false, fmt.Errorf("reservation of %s: %w", orderRef, err)
	}
	return r, true, nil
}

// Reserve takes a free host with exactly the order's GPUs: the host the
// order holds since its payment request if it has one (postgres.Capacity),
// without waiting for the capacity lock, else a free host no other order
// holds, left over by the paid orders waiting ahead (lineLeavesOne). A
// closed order takes none. Other decisions on a model's capacity are serialised
// (postgres.LockCapacity), and unique indexes allow one active
// reservation per order and per host, so two orders never share a machine.
// A second call for the same order keeps its host. No free host: a
// non-retryable no_capacity error (the order waits in line).
func (d *Driver) Reserve(ctx context.Context, in activities.ReserveInput) error {
	user, err := d.UnixUser(in.OrderRef)
	if err != nil {
		return err
	}
	err = postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		if _, ok, err := d.activeReservation(ctx, tx, in.OrderRef); err != nil || ok {
			return err
		}
		if err := postgres.LockOpenOrder(ctx, tx, in.OrderRef); err != nil {
			return err
		}
		held, _, err := postgres.HeldHost(ctx, tx, in.OrderRef)
		if err != nil {
			return err
		}
		var h struct {
			ID   int64
			Name string
		}
		var found bool
		if held != 0 {
			// The host its hold keeps: no other order may take it
			// (FreeHost passes over hosts others hold), so no capacity
			// lock (migration 00056 says why).
			h.ID = held
			h.Name, found, err = postgres.HeldHostFree(ctx, tx, in.GPUModel, in.GPUs, in.OrderRef, held)
			if err != nil {
				return fmt.Errorf("pick held host: %w", err)
			}
		}
		if !found {
			if err := postgres.LockCapacity(ctx, tx, in.GPUModel); err != nil {
				return err
			}
			if found, err = d.lineLeavesOne(ctx, tx, in); err != nil {
				return err
			}
			if found {
				h.ID, h.Name, found, err = postgres.FreeHost(ctx, tx, in.GPUModel, in.GPUs, in.OrderRef, held)
				if err != nil {
					return fmt.Errorf("pick host: %w", err)
				}
			}
		}
		if !found {
			return domain.Errorf(domain.ECodeNoCapacity,
				"Aucune machine libre avec %d GPU %s pour le moment.", in.GPUs, in.GPUModel)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO host_reservations (order_ref, host_id, host_name, unix_user, state)
			VALUES ($1, $2, $3, $4, 'active')`, in.OrderRef, h.ID, h.Name, user); err != nil {
			return fmt.Errorf("reserve %s for %s: %w", h.Name, in.OrderRef, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'reserved', updated_at = now() WHERE id = $1`, h.ID); err != nil {
			return fmt.Errorf("mark %s reserved: %w", h.Name, err)
		}
		if err := postgres.ConsumeHold(ctx, tx, in.OrderRef); err != nil {
			return err
		}
		d.logger().Info("host reserved", "order", in.OrderRef, "host", h.Name, "held", held == h.ID)
		return nil
	})
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && pqErr.Code == "23505" {
		// A concurrent attempt for the same order won the race: retrying
		// finds its reservation.
		return fmt.Errorf("reserve %s: concurrent reservation, retry: %w", in.OrderRef, err)
	}
	return err
}

// lineLeavesOne says whether the free hosts of the order's size outnumber
// the paid orders waiting ahead of it (postgres.WaitingAhead): the first
// host freed goes to the oldest paid order waiting. The caller holds the
// model's capacity lock.
func (d *Driver) lineLeavesOne(ctx context.Context, tx *sqlx.Tx, in activities.ReserveInput) (bool, error) {
	ahead, err := postgres.WaitingAhead(ctx, tx, in.GPUModel, in.GPUs, in.OrderRef)
	if err != nil || ahead == 0 {
		return err == nil, err
	}
	free, err := postgres.FreeHosts(ctx, tx, in.GPUModel, in.GPUs, in.OrderRef)
	return free > ahead, err
}

// setAside marks the host broken and fails the order's reservation, so the
// next Reserve picks another host. The customer's account and scratch space,
// if any, are removed first (best effort: the host is out of service anyway).
func (d *Driver) setAside(ctx context.Context, r reservation, reason string, seen *gpuSeen, cleanup bool) error {
	if cleanup {
		if _, err := d.teardown(ctx, r, "release"); err != nil {
			d.logger().Warn("cleanup on a host set aside failed", "host", r.Name, "order", r.OrderRef, "err", err)
		}
	}
	var model, drv, cuda any
	var count any
	if seen != nil {
		model, count, drv, cuda = seen.model(), len(seen.Names), seen.Driver, seen.CUDA
	}
	err := postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE host_reservations SET state = 'failed', failure = $2,
			gpu_model_seen = $3, gpu_count_seen = $4, driver_version = $5, cuda_version = $6, released_at = now()
			WHERE id = $1 AND state = 'active'`, r.ID, reason, model, count, drv, cuda); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'broken', note = $2, updated_at = now() WHERE id = $1`,
			r.host.ID, fmt.Sprintf("%s (commande %s, %s)", reason, r.OrderRef, time.Now().UTC().Format(time.RFC3339)))
		return err
	})
	if err != nil {
		return fmt.Errorf("set host %s aside: %w", r.Name, err)
	}
	d.logger().Error("host set aside as broken", "host", r.Name, "order", r.OrderRef, "reason", reason)
	return nil
}
