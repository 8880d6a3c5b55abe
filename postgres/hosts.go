package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Hosts is the SSH driver's store: the host inventory (gpu_hosts), the
// orders' reservations of hosts (host_reservations) and what the driver
// writes on the order (its key, its access). Only this package writes
// those tables; the driver (provision/sshhost) calls these methods.
type Hosts struct {
	DB *DB
}

// Host is an inventory row, for operators.
type Host struct {
	ID          int64     `db:"id" json:"id"`
	Name        string    `db:"name" json:"name"`
	Address     string    `db:"address" json:"address"`
	Port        int       `db:"ssh_port" json:"ssh_port"`
	Fingerprint string    `db:"host_key_fingerprint" json:"host_key_fingerprint"`
	KeyType     string    `db:"host_key_type" json:"host_key_type"`
	GPUModel    string    `db:"gpu_model" json:"gpu_model"`
	GPUCount    int       `db:"gpu_count" json:"gpu_count"`
	State       string    `db:"state" json:"state"`
	Note        string    `db:"note" json:"note"`
	OrderRef    *string   `db:"order_ref" json:"order_ref"`
	UpdatedAt   time.Time `db:"updated_at" json:"updated_at"`
	// GPUReset is the outcome of the last release's GPU reset, at GPUResetAt.
	GPUReset   *string    `db:"gpu_reset" json:"gpu_reset"`
	GPUResetAt *time.Time `db:"gpu_reset_at" json:"gpu_reset_at"`
	// ReservedSince is when the order holding the host (OrderRef) took it.
	ReservedSince *time.Time `db:"reserved_since" json:"reserved_since"`
	// LastCheck is the release check of the last reservation that ended on
	// the host (nil if none did).
	LastCheck *ReleaseCheck `db:"-" json:"last_check"`
}

// ReleaseCheck is what the release (or a repair) found on a host after an
// order: the outcome of its wipe and check.
type ReleaseCheck struct {
	OrderRef string `db:"order_ref" json:"order_ref"`
	// State is the reservation's: released or failed.
	State      string     `db:"state" json:"state"`
	ReleasedAt *time.Time `db:"released_at" json:"released_at"`
	// Failure is what was left on the host (nil: the check found it clean).
	Failure *string `db:"failure" json:"failure"`
	// CustomerFlag is what the customer did to make the host dirty.
	CustomerFlag *string `db:"customer_flag" json:"customer_flag"`
	// CleanedAt is when a release or a repair found nothing of the account
	// left (nil: not yet).
	CleanedAt *time.Time `db:"cleaned_at" json:"cleaned_at"`
}

// ErrHostBusy refuses an operation on a host an order holds.
var ErrHostBusy = errors.New("host is held by an order")

// ErrNoHost: no host has that name.
var ErrNoHost = errors.New("no such host")

func noHost(name string) error { return fmt.Errorf("no host named %q: %w", name, ErrNoHost) }

// AddHost registers a host (fields checked by the caller), available at
// once.
func (h Hosts) AddHost(ctx context.Context, in Host) (Host, error) {
	var out Host
	err := h.DB.GetContext(ctx, &out, `
		INSERT INTO gpu_hosts (name, address, ssh_port, host_key_fingerprint, host_key_type, gpu_model, gpu_count, note)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		RETURNING id, name, address, ssh_port, host_key_fingerprint, host_key_type, gpu_model, gpu_count,
			state, note, NULL::text AS order_ref, updated_at, gpu_reset, gpu_reset_at`,
		in.Name, in.Address, in.Port, in.Fingerprint, in.KeyType, in.GPUModel, in.GPUCount, in.Note)
	if err != nil {
		return Host{}, fmt.Errorf("add host %s: %w", in.Name, err)
	}
	return out, nil
}

// ListHosts returns every host with the order holding it, if any, and the
// release check of the last reservation that ended on it.
func (h Hosts) ListHosts(ctx context.Context) ([]Host, error) {
	var rows []struct {
		Host
		CheckOrder   *string    `db:"check_order"`
		CheckState   string     `db:"check_state"`
		ReleasedAt   *time.Time `db:"check_released_at"`
		Failure      *string    `db:"check_failure"`
		CustomerFlag *string    `db:"check_customer_flag"`
		CleanedAt    *time.Time `db:"check_cleaned_at"`
	}
	err := h.DB.SelectContext(ctx, &rows, `
		SELECT h.id, h.name, h.address, h.ssh_port, h.host_key_fingerprint, h.host_key_type, h.gpu_model,
			h.gpu_count, h.state, h.note, r.order_ref, h.updated_at, h.gpu_reset, h.gpu_reset_at,
			r.created_at AS reserved_since,
			l.order_ref AS check_order, COALESCE(l.state, '') AS check_state, l.released_at AS check_released_at,
			l.failure AS check_failure, l.customer_flag AS check_customer_flag, l.cleaned_at AS check_cleaned_at
		FROM gpu_hosts h
		LEFT JOIN host_reservations r ON r.host_id = h.id AND r.state = 'active'
		LEFT JOIN LATERAL (SELECT p.order_ref, p.state, p.released_at, p.failure, p.customer_flag, p.cleaned_at
			FROM host_reservations p WHERE p.host_id = h.id AND p.state <> 'active'
			ORDER BY p.released_at DESC NULLS LAST, p.id DESC LIMIT 1) l ON true
		ORDER BY h.gpu_model, h.name`)
	if err != nil {
		return nil, fmt.Errorf("list hosts: %w", err)
	}
	hosts := make([]Host, 0, len(rows))
	for _, r := range rows {
		host := r.Host
		if r.CheckOrder != nil {
			host.LastCheck = &ReleaseCheck{OrderRef: *r.CheckOrder, State: r.CheckState, ReleasedAt: r.ReleasedAt,
				Failure: r.Failure, CustomerFlag: r.CustomerFlag, CleanedAt: r.CleanedAt}
		}
		hosts = append(hosts, host)
	}
	return hosts, nil
}

// SetHostState sets the named host's state and note (an order holding it
// keeps it to its end). ErrNoHost when no host has that name.
func (h Hosts) SetHostState(ctx context.Context, name, state, note string) error {
	return InTx(ctx, h.DB.DB, func(tx *sqlx.Tx) error {
		var id int64
		if err := tx.GetContext(ctx, &id, `SELECT id FROM gpu_hosts WHERE name = $1 FOR UPDATE`, name); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return noHost(name)
			}
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = $2, note = $3, updated_at = now() WHERE id = $1`,
			id, state, note); err != nil {
			return fmt.Errorf("host %s: %w", name, err)
		}
		return nil
	})
}

// RemoveHost deletes a host no order holds (past reservations keep its
// name): ErrHostBusy while one does, ErrNoHost when none has that name.
func (h Hosts) RemoveHost(ctx context.Context, name string) error {
	res, err := h.DB.ExecContext(ctx, `DELETE FROM gpu_hosts h WHERE name = $1
		AND NOT EXISTS (SELECT 1 FROM host_reservations r WHERE r.host_id = h.id AND r.state = 'active')`, name)
	if err != nil {
		return fmt.Errorf("remove host %s: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var exists bool
		_ = h.DB.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM gpu_hosts WHERE name = $1)`, name)
		if exists {
			return fmt.Errorf("%s: %w", name, ErrHostBusy)
		}
		return noHost(name)
	}
	return nil
}

// hostHeld says whether an order holds the host (an active reservation).
func hostHeld(ctx context.Context, q sqlx.QueryerContext, hostID int64) (bool, error) {
	var held bool
	err := sqlx.GetContext(ctx, q, &held, `SELECT EXISTS (SELECT 1 FROM host_reservations
		WHERE host_id = $1 AND state = 'active')`, hostID)
	return held, err
}
