package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// SSHHost is an inventory row as the SSH driver reaches the host.
type SSHHost struct {
	ID          int64  `db:"id"`
	Name        string `db:"name"`
	Address     string `db:"address"`
	Port        int    `db:"ssh_port"`
	Fingerprint string `db:"host_key_fingerprint"`
	KeyType     string `db:"host_key_type"`
	GPUModel    string `db:"gpu_model"`
	GPUCount    int    `db:"gpu_count"`
	State       string `db:"state"`
}

// HostReservation is an order's hold on a host (host_reservations), with
// the host.
type HostReservation struct {
	ID         int64
	OrderRef   string
	UnixUser   string
	PrivateKey sql.NullString // sealed (ReservationPrivateKey)
	PublicKey  sql.NullString
	JupyterTok sql.NullString // sealed (ReservationJupyterToken)
	// PresetCheck is what the preset's check found (French, for the order).
	PresetCheck sql.NullString
	// UID and SubIDs are the account's uid on the host and its subordinate
	// ranges ("first:count ..."), as prepare reported them.
	UID    sql.NullInt64
	SubIDs string
	SSHHost
}

// HostReservation returns the order's active reservation, with its host
// (ok false: none).
func (h Hosts) HostReservation(ctx context.Context, orderRef string) (HostReservation, bool, error) {
	return activeHostReservation(ctx, h.DB, orderRef)
}

func activeHostReservation(ctx context.Context, q sqlx.QueryerContext, orderRef string) (HostReservation, bool, error) {
	var r HostReservation
	err := q.QueryRowxContext(ctx, `
		SELECT r.id, r.order_ref, r.unix_user, r.private_key, r.public_key, r.jupyter_token, r.preset_check,
			r.unix_uid, r.sub_ids, h.id, h.name, h.address, h.ssh_port, h.host_key_fingerprint, h.host_key_type,
			h.gpu_model, h.gpu_count, h.state
		FROM host_reservations r JOIN gpu_hosts h ON h.id = r.host_id
		WHERE r.order_ref = $1 AND r.state = 'active'`, orderRef).Scan(&r.ID, &r.OrderRef, &r.UnixUser,
		&r.PrivateKey, &r.PublicKey, &r.JupyterTok, &r.PresetCheck, &r.UID, &r.SubIDs, &r.SSHHost.ID, &r.Name,
		&r.Address, &r.Port, &r.Fingerprint, &r.KeyType, &r.GPUModel, &r.GPUCount, &r.State)
	if errors.Is(err, sql.ErrNoRows) {
		return HostReservation{}, false, nil
	}
	if err != nil {
		return HostReservation{}, false, fmt.Errorf("reservation of %s: %w", orderRef, err)
	}
	return r, true, nil
}

// HostReserved is what ReserveHost did.
type HostReserved struct {
	// Already: the order had its host; nothing was done.
	Already bool
	// Name is the host reserved ("" with Already false: none is free).
	Name string
	// Held: the host is the one the order's hold kept.
	Held bool
}

// ReserveHost takes for the order, under the account name user, a free
// host with exactly gpus GPUs of model: the host the order holds since its
// payment request if it has one (Capacity), without waiting for the
// capacity lock, else a free host no other order holds, left over by the
// paid orders waiting ahead. A closed order takes none (ErrOrderClosed).
// Other decisions on a model's capacity are serialised (LockCapacity), and
// unique indexes allow one active reservation per order and per host, so
// two orders never share a machine. A second call for the same order keeps
// its host (Already).
func (h Hosts) ReserveHost(ctx context.Context, orderRef, model string, gpus int, user string) (HostReserved, error) {
	var out HostReserved
	err := InTx(ctx, h.DB.DB, func(tx *sqlx.Tx) error {
		out = HostReserved{}
		if _, ok, err := activeHostReservation(ctx, tx, orderRef); err != nil || ok {
			out.Already = ok
			return err
		}
		if err := LockOpenOrder(ctx, tx, orderRef); err != nil {
			return err
		}
		held, _, err := HeldHost(ctx, tx, orderRef)
		if err != nil {
			return err
		}
		var id int64
		var name string
		var found bool
		if held != 0 {
			// The host its hold keeps: no other order may take it
			// (FreeHost passes over hosts others hold), so no capacity
			// lock (migration 00056 says why).
			id = held
			name, found, err = HeldHostFree(ctx, tx, model, gpus, orderRef, held)
			if err != nil {
				return fmt.Errorf("pick held host: %w", err)
			}
		}
		if !found {
			if err := LockCapacity(ctx, tx, model); err != nil {
				return err
			}
			if found, err = lineLeavesOne(ctx, tx, model, gpus, orderRef); err != nil {
				return err
			}
			if found {
				id, name, found, err = FreeHost(ctx, tx, model, gpus, orderRef, held)
				if err != nil {
					return fmt.Errorf("pick host: %w", err)
				}
			}
		}
		if !found {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO host_reservations (order_ref, host_id, host_name, unix_user, state)
			VALUES ($1, $2, $3, $4, 'active')`, orderRef, id, name, user); err != nil {
			return fmt.Errorf("reserve %s for %s: %w", name, orderRef, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'reserved', updated_at = now() WHERE id = $1`, id); err != nil {
			return fmt.Errorf("mark %s reserved: %w", name, err)
		}
		if err := ConsumeHold(ctx, tx, orderRef); err != nil {
			return err
		}
		out.Name, out.Held = name, held == id
		return nil
	})
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && pqErr.Code == "23505" {
		// A concurrent attempt for the same order won the race: retrying
		// finds its reservation.
		return HostReserved{}, fmt.Errorf("reserve %s: concurrent reservation, retry: %w", orderRef, err)
	}
	if err != nil {
		return HostReserved{}, err
	}
	return out, nil
}

// lineLeavesOne says whether the free hosts of the order's size outnumber
// the paid orders waiting ahead of it (WaitingAhead): the first host freed
// goes to the oldest paid order waiting. The caller holds the model's
// capacity lock.
func lineLeavesOne(ctx context.Context, tx *sqlx.Tx, model string, gpus int, orderRef string) (bool, error) {
	ahead, err := WaitingAhead(ctx, tx, model, gpus, orderRef)
	if err != nil || ahead == 0 {
		return err == nil, err
	}
	free, err := FreeHosts(ctx, tx, model, gpus, orderRef)
	return free > ahead, err
}

// GPUsSeen is what a host's GPUs reported.
type GPUsSeen struct {
	Model  string
	Count  int
	Driver string
	CUDA   string
}

// SetHostAside fails the reservation (failure, with the GPUs seen if
// any) and marks its host broken with note, so that the order's next
// reservation picks another host.
func (h Hosts) SetHostAside(ctx context.Context, r HostReservation, failure string, seen *GPUsSeen, note string) error {
	var model, count, drv, cuda any
	if seen != nil {
		model, count, drv, cuda = seen.Model, seen.Count, seen.Driver, seen.CUDA
	}
	return InTx(ctx, h.DB.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE host_reservations SET state = 'failed', failure = $2,
			gpu_model_seen = $3, gpu_count_seen = $4, driver_version = $5, cuda_version = $6, released_at = now()
			WHERE id = $1 AND state = 'active'`, r.ID, failure, model, count, drv, cuda); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'broken', note = $2, updated_at = now() WHERE id = $1`,
			r.SSHHost.ID, note)
		return err
	})
}

// LastHostFailure is the failure of the order's latest reservation (ok
// false: none failed, or none).
func (h Hosts) LastHostFailure(ctx context.Context, orderRef string) (failure string, ok bool, err error) {
	var f sql.NullString
	err = h.DB.GetContext(ctx, &f, `SELECT failure FROM host_reservations WHERE order_ref = $1
		ORDER BY id DESC LIMIT 1`, orderRef)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return f.String, f.Valid, err
}

// ReservationSecrets stores, on the reservation that has none yet, the key
// pair (privateKey sealed with ReservationPrivateKey; "" stores none) and
// the Jupyter token (sealed with ReservationJupyterToken; "" stores none),
// and returns those that won: a concurrent or earlier attempt may have
// written first ("": none).
func (h Hosts) ReservationSecrets(ctx context.Context, reservationID int64, privateKey, publicKey, jupyterToken string) (
	storedPublicKey, storedJupyterToken string, err error) {
	if privateKey != "" {
		if _, err := h.DB.ExecContext(ctx, `UPDATE host_reservations SET private_key = $2, public_key = $3
			WHERE id = $1 AND public_key IS NULL`, reservationID, privateKey, publicKey); err != nil {
			return "", "", fmt.Errorf("store key pair: %w", err)
		}
	}
	if jupyterToken != "" {
		if _, err := h.DB.ExecContext(ctx, `UPDATE host_reservations SET jupyter_token = $2
			WHERE id = $1 AND jupyter_token IS NULL`, reservationID, jupyterToken); err != nil {
			return "", "", fmt.Errorf("store jupyter token: %w", err)
		}
	}
	var pub, tok sql.NullString
	if err := h.DB.QueryRowxContext(ctx, `SELECT public_key, jupyter_token FROM host_reservations WHERE id = $1`,
		reservationID).Scan(&pub, &tok); err != nil {
		return "", "", fmt.Errorf("read secrets: %w", err)
	}
	return pub.String, tok.String, nil
}

// UIDFloor is the lowest uid no reservation of the host recorded: customer
// uids are never given twice on a host.
func (h Hosts) UIDFloor(ctx context.Context, hostID int64) (int64, error) {
	var floor int64
	err := h.DB.GetContext(ctx, &floor, `SELECT COALESCE(max(unix_uid) + 1, 0) FROM host_reservations
		WHERE host_id = $1`, hostID)
	return floor, err
}

// GPUModelCheck is how a catalog model's GPUs are checked on a host: its
// vendor (nvidia or amd) and the pattern of the names its tool reports
// (nil: the model cannot be checked).
func (h Hosts) GPUModelCheck(ctx context.Context, model string) (vendor string, smiPattern *string, err error) {
	var m struct {
		Pattern sql.NullString `db:"smi_name_pattern"`
		Vendor  string         `db:"vendor"`
	}
	if err := h.DB.GetContext(ctx, &m, `SELECT smi_name_pattern, vendor FROM gpu_models WHERE model = $1`, model); err != nil {
		return "", nil, fmt.Errorf("model %s: %w", model, err)
	}
	if m.Pattern.Valid {
		smiPattern = &m.Pattern.String
	}
	return m.Vendor, smiPattern, nil
}

// RecordPrepared records prepare's outcome on the reservation: the
// preset's check ("": none), the account's uid and subordinate ranges
// (every range recorded stays: a release searches each one).
func (h Hosts) RecordPrepared(ctx context.Context, reservationID int64, presetCheck string, uid int64, subIDs string) error {
	_, err := h.DB.ExecContext(ctx, `UPDATE host_reservations SET prepared_at = COALESCE(prepared_at, now()),
		preset_check = $2, unix_uid = $3, sub_ids = $4 WHERE id = $1`, reservationID, nullString(presetCheck), uid, subIDs)
	return err
}

// RecordGPUsSeen records what the verification read on the host.
func (h Hosts) RecordGPUsSeen(ctx context.Context, reservationID int64, seen GPUsSeen) error {
	_, err := h.DB.ExecContext(ctx, `UPDATE host_reservations SET gpu_model_seen = $2, gpu_count_seen = $3,
		driver_version = $4, cuda_version = $5 WHERE id = $1`, reservationID, seen.Model, seen.Count, seen.Driver, seen.CUDA)
	return err
}

// RecordAccountIDs records the account's uid (kept if one was) and its
// subordinate ranges, so a later repair searches them even if the host
// lost its own record.
func (h Hosts) RecordAccountIDs(ctx context.Context, reservationID, uid int64, subIDs string) error {
	_, err := h.DB.ExecContext(ctx, `UPDATE host_reservations SET unix_uid = COALESCE(unix_uid, $2), sub_ids = $3
		WHERE id = $1`, reservationID, uid, subIDs)
	return err
}

// FlagCustomer adds what the customer did to make their host dirty to the
// reservation's record (support reads it there, in the host's note and in
// its queue until an agent closes it: new text opens it again).
func (h Hosts) FlagCustomer(ctx context.Context, reservationID int64, what string) error {
	_, err := h.DB.ExecContext(ctx, `UPDATE host_reservations SET customer_flag =
		CASE WHEN customer_flag IS NULL OR customer_flag = '' THEN $2 ELSE customer_flag || ' ; ' || $2 END,
		customer_flag_at = COALESCE(customer_flag_at, now()), customer_flag_closed_at = NULL, customer_flag_closed_by = NULL
		WHERE id = $1 AND (customer_flag IS NULL OR strpos(customer_flag, $2) = 0)`, reservationID, what)
	return err
}

// HostRelease is what a release found on the order's host.
type HostRelease struct {
	Reservation HostReservation
	// Failure is what was left on the host ("": clean).
	Failure string
	// GPUReset is the outcome of the GPU reset ("": none tried).
	GPUReset string
}

// HostReleased is what ReleaseHost did.
type HostReleased struct {
	// Done is false when the reservation was released meanwhile.
	Done bool
	// Broken: the host was not clean and is out of rotation.
	Broken bool
	// CustomerFlag is what the customer did to the host, if anything.
	CustomerFlag *string
}

// ReleaseHost ends the reservation and gives its host back: available
// again, unless an operator drained it or it broke. A host that could not
// be cleaned is marked broken with the reasons (and what the customer did);
// a clean host the customer had made dirty says so in its note.
func (h Hosts) ReleaseHost(ctx context.Context, in HostRelease) (HostReleased, error) {
	r := in.Reservation
	var out HostReleased
	err := InTx(ctx, h.DB.DB, func(tx *sqlx.Tx) error {
		out = HostReleased{}
		var failure any
		if in.Failure != "" {
			failure = in.Failure
		}
		var flag sql.NullString
		if err := tx.QueryRowxContext(ctx, `UPDATE host_reservations SET state = 'released', released_at = now(),
			private_key = NULL, jupyter_token = NULL, failure = COALESCE($2::text, failure),
			cleaned_at = CASE WHEN $2::text IS NULL THEN now() END WHERE id = $1 AND state = 'active'
			RETURNING customer_flag`, r.ID, failure).Scan(&flag); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil // released meanwhile
			}
			return err
		}
		out.Done = true
		if flag.Valid {
			out.CustomerFlag = &flag.String
		}
		if failure != nil && flag.Valid && !strings.Contains(in.Failure, "du fait du client") {
			failure = in.Failure + " ; du fait du client : " + flag.String
		}
		if err := recordGPUReset(ctx, tx, r.SSHHost.ID, in.GPUReset); err != nil {
			return err
		}
		if failure != nil {
			out.Broken = true
			_, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'broken', note = $2, updated_at = now() WHERE id = $1`,
				r.SSHHost.ID, fmt.Sprintf("%s (commande %s, %s)", failure, r.OrderRef, time.Now().UTC().Format(time.RFC3339)))
			return err
		}
		// Clean, but the customer had made it dirty (and the teardown undid
		// it): support is told on the host's record and the reservation.
		note := ""
		if flag.Valid {
			note = fmt.Sprintf("remise en service automatique ; le client de la commande %s avait sali la machine : %s (%s)",
				r.OrderRef, flag.String, time.Now().UTC().Format(time.RFC3339))
		}
		_, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET updated_at = now(),
			note = CASE WHEN $2 <> '' THEN $2 ELSE note END,
			state = CASE WHEN state IN ('reserved', 'in_use') THEN 'available' ELSE state END
			WHERE id = $1`, r.SSHHost.ID, note)
		return err
	})
	if err != nil {
		return HostReleased{}, err
	}
	return out, nil
}

// recordGPUReset writes the outcome of a release's GPU reset on the host.
func recordGPUReset(ctx context.Context, tx *sqlx.Tx, hostID int64, outcome string) error {
	if outcome == "" {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET gpu_reset = $2, gpu_reset_at = now() WHERE id = $1`, hostID, outcome)
	return err
}

// HostToRepair returns the named host and its past reservations (at most
// limit, the latest first) that no release or repair found clean yet.
// ErrNoHost when no host has that name, ErrHostBusy while an order holds
// it.
func (h Hosts) HostToRepair(ctx context.Context, name string, limit int) (SSHHost, []HostReservation, error) {
	var host SSHHost
	err := h.DB.GetContext(ctx, &host, `SELECT id, name, address, ssh_port, host_key_fingerprint, host_key_type,
		gpu_model, gpu_count, state FROM gpu_hosts WHERE name = $1`, name)
	if errors.Is(err, sql.ErrNoRows) {
		return SSHHost{}, nil, noHost(name)
	}
	if err != nil {
		return SSHHost{}, nil, fmt.Errorf("host %s: %w", name, err)
	}
	if held, err := hostHeld(ctx, h.DB, host.ID); err != nil || held {
		if err != nil {
			return SSHHost{}, nil, err
		}
		return SSHHost{}, nil, fmt.Errorf("%s: %w (drain it and wait for the end of the rental)", name, ErrHostBusy)
	}
	var past []HostReservation
	rows, err := h.DB.QueryxContext(ctx, `SELECT id, order_ref, unix_user, unix_uid, sub_ids FROM host_reservations
		WHERE host_id = $1 AND state <> 'active' AND cleaned_at IS NULL ORDER BY id DESC LIMIT $2`, host.ID, limit)
	if err != nil {
		return SSHHost{}, nil, fmt.Errorf("past reservations of %s: %w", name, err)
	}
	for rows.Next() {
		r := HostReservation{SSHHost: host}
		if err := rows.Scan(&r.ID, &r.OrderRef, &r.UnixUser, &r.UID, &r.SubIDs); err != nil {
			_ = rows.Close()
			return SSHHost{}, nil, err
		}
		past = append(past, r)
	}
	if err := rows.Close(); err != nil {
		return SSHHost{}, nil, err
	}
	return host, past, nil
}

// HostRepair is what a repair found on a host.
type HostRepair struct {
	Host SSHHost
	// Cleaned are the past reservations found clean.
	Cleaned []int64
	// GPUReset is the outcome of the last GPU reset tried ("": none).
	GPUReset string
	// Dirty, when set, keeps the host broken with this note; else it is
	// available again with Note.
	Dirty string
	Note  string
}

// FinishRepair records a repair: the reservations found clean, the GPU
// reset, and the host back in rotation (or broken with what is left).
// ErrHostBusy if an order took the host meanwhile.
func (h Hosts) FinishRepair(ctx context.Context, in HostRepair) error {
	return InTx(ctx, h.DB.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT 1 FROM gpu_hosts WHERE id = $1 FOR UPDATE`, in.Host.ID); err != nil {
			return err
		}
		if held, err := hostHeld(ctx, tx, in.Host.ID); err != nil || held {
			if err != nil {
				return err
			}
			return fmt.Errorf("%s: %w", in.Host.Name, ErrHostBusy)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE host_reservations SET cleaned_at = now() WHERE id = ANY($1)`,
			pq.Array(in.Cleaned)); err != nil {
			return err
		}
		if err := recordGPUReset(ctx, tx, in.Host.ID, in.GPUReset); err != nil {
			return err
		}
		if in.Dirty != "" {
			_, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'broken', note = $2, updated_at = now() WHERE id = $1`,
				in.Host.ID, in.Dirty)
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'available', note = $2, updated_at = now() WHERE id = $1`,
			in.Host.ID, in.Note)
		return err
	})
}
