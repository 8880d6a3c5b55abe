package sshhost

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/lib/pq"
)

// ErrHostDirty refuses to put a host back in rotation while something of a
// past customer's account is left on it.
var ErrHostDirty = errors.New("something of a past customer is left on the host")

// ErrRebootRequired is ErrHostDirty when only a reboot can clean the host
// (processes stuck in the kernel).
var ErrRebootRequired = fmt.Errorf("%w; reboot it first", ErrHostDirty)

// repairChecks bounds how many past reservations a repair checks again.
const repairChecks = 20

// RepairHost puts a drained or broken host back in rotation, after running
// the release's wipe and check again, on the host, for every past account
// no release or repair has found clean yet. While anything of one of them
// remains, it refuses (ErrHostDirty, or ErrRebootRequired), keeps the host
// out of rotation (broken) and writes what is left in its note. Refused
// while an order holds the host (ErrHostBusy).
func (d *Driver) RepairHost(ctx context.Context, name, note string) error {
	var h host
	err := d.DB.GetContext(ctx, &h, `SELECT id, name, address, ssh_port, host_key_fingerprint, host_key_type,
		gpu_model, gpu_count, state FROM gpu_hosts WHERE name = $1`, name)
	if errors.Is(err, sql.ErrNoRows) {
		return noHost(name)
	}
	if err != nil {
		return fmt.Errorf("host %s: %w", name, err)
	}
	if held, err := d.held(ctx, d.DB, h.ID); err != nil || held {
		if err != nil {
			return err
		}
		return fmt.Errorf("%s: %w (drain it and wait for the end of the rental)", name, ErrHostBusy)
	}
	var past []reservation
	rows, err := d.DB.QueryxContext(ctx, `SELECT id, order_ref, unix_user, unix_uid, sub_ids FROM host_reservations
		WHERE host_id = $1 AND state <> 'active' AND cleaned_at IS NULL ORDER BY id DESC LIMIT $2`, h.ID, repairChecks)
	if err != nil {
		return fmt.Errorf("past reservations of %s: %w", name, err)
	}
	for rows.Next() {
		r := reservation{host: h}
		if err := rows.Scan(&r.ID, &r.OrderRef, &r.UnixUser, &r.UID, &r.SubIDs); err != nil {
			_ = rows.Close()
			return err
		}
		past = append(past, r)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	var reasons, customer []string
	reboot := ""
	var cleaned []int64
	reset := ""
	for _, r := range past {
		t, err := d.teardown(ctx, r, "release")
		if err != nil {
			return fmt.Errorf("repair %s: %w", name, err)
		}
		if t.GPUReset != "" {
			reset = t.GPUReset
		}
		if len(t.Dirty) == 0 {
			cleaned = append(cleaned, r.ID)
			continue
		}
		for _, why := range t.Dirty {
			reasons = append(reasons, r.UnixUser+" ("+r.OrderRef+") : "+why)
		}
		customer = append(customer, t.Customer...)
		if t.Reboot != "" {
			reboot = t.Reboot
		}
	}
	err = postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT 1 FROM gpu_hosts WHERE id = $1 FOR UPDATE`, h.ID); err != nil {
			return err
		}
		if held, err := d.held(ctx, tx, h.ID); err != nil || held {
			if err != nil {
				return err
			}
			return fmt.Errorf("%s: %w", name, ErrHostBusy)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE host_reservations SET cleaned_at = now() WHERE id = ANY($1)`,
			pq.Array(cleaned)); err != nil {
			return err
		}
		if err := recordGPUReset(ctx, tx, h.ID, reset); err != nil {
			return err
		}
		if len(reasons) > 0 {
			msg := "réparation refusée, nettoyage incomplet : " + strings.Join(reasons, " ; ")
			if reboot != "" {
				msg += " ; " + reboot
			}
			if len(customer) > 0 {
				msg += " ; du fait du client : " + strings.Join(customer, " ; ")
			}
			_, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'broken', note = $2, updated_at = now() WHERE id = $1`,
				h.ID, fmt.Sprintf("%s (%s)", msg, time.Now().UTC().Format(time.RFC3339)))
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'available', note = $2, updated_at = now() WHERE id = $1`,
			h.ID, note)
		return err
	})
	if err != nil {
		return fmt.Errorf("repair %s: %w", name, err)
	}
	if len(reasons) > 0 {
		sentinel := ErrHostDirty
		if reboot != "" {
			sentinel = ErrRebootRequired
		}
		d.logger().Error("repair refused: host not clean", "host", name, "left", reasons, "reboot", reboot)
		return fmt.Errorf("%s: %w: %s", name, sentinel, strings.Join(reasons, " ; "))
	}
	d.logger().Info("host repaired", "host", name, "checked", len(past))
	return nil
}

func (d *Driver) held(ctx context.Context, q sqlx.QueryerContext, hostID int64) (bool, error) {
	var held bool
	err := sqlx.GetContext(ctx, q, &held, `SELECT EXISTS (SELECT 1 FROM host_reservations
		WHERE host_id = $1 AND state = 'active')`, hostID)
	return held, err
}

// Operations are what operators do to the inventory, from `kernodeck hosts`
// and from the support console alike: one implementation for both.
type Operations struct {
	Inventory *Inventory
	// Driver runs repair's checks on the host over SSH.
	Driver *Driver
}

// NewOperations is the operators' inventory of d's hosts.
func NewOperations(d *Driver) *Operations {
	return &Operations{Inventory: &Inventory{DB: d.DB}, Driver: d}
}

// List is Inventory.List.
func (o *Operations) List(ctx context.Context) ([]Host, error) { return o.Inventory.List(ctx) }

// Repair is Driver.RepairHost: back in rotation once the host is clean.
func (o *Operations) Repair(ctx context.Context, name, note string) error {
	return o.Driver.RepairHost(ctx, name, note)
}

// Retire is Inventory.Retire: out of rotation.
func (o *Operations) Retire(ctx context.Context, name, note string) error {
	return o.Inventory.Retire(ctx, name, note)
}
