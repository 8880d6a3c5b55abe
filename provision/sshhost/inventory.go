package sshhost

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jmoiron/sqlx"
	"golang.org/x/crypto/ssh"
)

// Host states.
const (
	StateAvailable = "available"
	StateReserved  = "reserved"
	StateInUse     = "in_use"
	StateDraining  = "draining"
	StateBroken    = "broken"
)

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

// Inventory is the operator's view of gpu_hosts (kernodeck hosts ...).
type Inventory struct {
	DB *sqlx.DB
}

var fingerprintRE = regexp.MustCompile(`^SHA256:[A-Za-z0-9+/]{43}$`)

// ErrHostBusy refuses an operation on a host an order holds.
var ErrHostBusy = errors.New("host is held by an order")

// ErrNoHost: no host has that name.
var ErrNoHost = errors.New("no such host")

func noHost(name string) error { return fmt.Errorf("no host named %q: %w", name, ErrNoHost) }

// Add registers a host, available at once.
func (inv *Inventory) Add(ctx context.Context, h Host) (Host, error) {
	if !fingerprintRE.MatchString(h.Fingerprint) {
		return Host{}, fmt.Errorf("host key fingerprint %q: want SHA256:<43 base64 characters> (ssh-keygen -lf)", h.Fingerprint)
	}
	if h.KeyType == "" {
		h.KeyType = ssh.KeyAlgoED25519
	}
	if h.Port == 0 {
		h.Port = 22
	}
	var out Host
	err := inv.DB.GetContext(ctx, &out, `
		INSERT INTO gpu_hosts (name, address, ssh_port, host_key_fingerprint, host_key_type, gpu_model, gpu_count, note)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		RETURNING id, name, address, ssh_port, host_key_fingerprint, host_key_type, gpu_model, gpu_count,
			state, note, NULL::text AS order_ref, updated_at, gpu_reset, gpu_reset_at`,
		h.Name, h.Address, h.Port, h.Fingerprint, h.KeyType, h.GPUModel, h.GPUCount, h.Note)
	if err != nil {
		return Host{}, fmt.Errorf("add host %s: %w", h.Name, err)
	}
	return out, nil
}

// List returns every host with the order holding it, if any, and the
// release check of the last reservation that ended on it.
func (inv *Inventory) List(ctx context.Context) ([]Host, error) {
	var rows []struct {
		Host
		CheckOrder   *string    `db:"check_order"`
		CheckState   string     `db:"check_state"`
		ReleasedAt   *time.Time `db:"check_released_at"`
		Failure      *string    `db:"check_failure"`
		CustomerFlag *string    `db:"check_customer_flag"`
		CleanedAt    *time.Time `db:"check_cleaned_at"`
	}
	err := inv.DB.SelectContext(ctx, &rows, `
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
		h := r.Host
		if r.CheckOrder != nil {
			h.LastCheck = &ReleaseCheck{OrderRef: *r.CheckOrder, State: r.CheckState, ReleasedAt: r.ReleasedAt,
				Failure: r.Failure, CustomerFlag: r.CustomerFlag, CleanedAt: r.CleanedAt}
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// Drain takes a host out of rotation: no new order gets it; an order
// holding it keeps it until its end, then the host stays drained.
func (inv *Inventory) Drain(ctx context.Context, name, note string) error {
	return inv.setState(ctx, name, StateDraining, note, false)
}

// Retire is Drain under the console's and the CLI's operator word: the
// host leaves rotation (a running rental keeps it to its end) until a
// repair puts it back.
func (inv *Inventory) Retire(ctx context.Context, name, note string) error {
	return inv.Drain(ctx, name, note)
}

// Putting a host back in rotation is Driver.RepairHost: it checks the host
// first, over SSH.

func (inv *Inventory) setState(ctx context.Context, name, state, note string, mustBeFree bool) error {
	tx, err := inv.DB.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var id int64
	if err := tx.GetContext(ctx, &id, `SELECT id FROM gpu_hosts WHERE name = $1 FOR UPDATE`, name); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return noHost(name)
		}
		return err
	}
	var held bool
	if err := tx.GetContext(ctx, &held, `SELECT EXISTS (SELECT 1 FROM host_reservations WHERE host_id = $1 AND state = 'active')`, id); err != nil {
		return err
	}
	if held && mustBeFree {
		return fmt.Errorf("%s: %w (drain it and wait for the end of the rental)", name, ErrHostBusy)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = $2, note = $3, updated_at = now() WHERE id = $1`,
		id, state, note); err != nil {
		return fmt.Errorf("host %s: %w", name, err)
	}
	return tx.Commit()
}

// Remove deletes a host no order holds (past reservations keep its name).
func (inv *Inventory) Remove(ctx context.Context, name string) error {
	res, err := inv.DB.ExecContext(ctx, `DELETE FROM gpu_hosts h WHERE name = $1
		AND NOT EXISTS (SELECT 1 FROM host_reservations r WHERE r.host_id = h.id AND r.state = 'active')`, name)
	if err != nil {
		return fmt.Errorf("remove host %s: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var exists bool
		_ = inv.DB.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM gpu_hosts WHERE name = $1)`, name)
		if exists {
			return fmt.Errorf("%s: %w", name, ErrHostBusy)
		}
		return noHost(name)
	}
	return nil
}

// FreeHosts counts the hosts free right now for an order of gpus GPUs of
// model (the quote's "available now").
func FreeHosts(ctx context.Context, q sqlx.QueryerContext, model string, gpus int) (int, error) {
	var n int
	if err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM gpu_hosts
		WHERE state = 'available' AND gpu_model = $1 AND gpu_count = $2`, model, gpus); err != nil {
		return 0, fmt.Errorf("free hosts: %w", err)
	}
	return n, nil
}
