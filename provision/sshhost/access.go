package sshhost

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/postgres"
)

// CreateAccess writes the order's access information once: the host, the
// account, the generated private key (sealed, shown once to the owner) and
// the Jupyter URL and token for the notebook preset.
func (d *Driver) CreateAccess(ctx context.Context, in activities.CreateAccessInput) (activities.AccessSummary, error) {
	r, ok, err := d.activeReservation(ctx, d.DB, in.OrderRef)
	if err != nil {
		return activities.AccessSummary{}, err
	}
	if !ok {
		return activities.AccessSummary{}, fmt.Errorf("create access %s: no active host reservation", in.OrderRef)
	}
	var privKey, fingerprint, jupyterURL, jupyterTok any
	if r.PrivateKey.Valid {
		pem, err := postgres.ReservationPrivateKey.Open(d.Keyring, in.OrderRef, r.PrivateKey.String)
		if err != nil {
			return activities.AccessSummary{}, err
		}
		privKey = postgres.AccessPrivateKey.Seal(d.Keyring, in.OrderRef, pem)
	}
	var customerKey sql.NullString
	if err := d.DB.GetContext(ctx, &customerKey, `SELECT ssh_public_key FROM orders WHERE ref = $1`, in.OrderRef); err != nil {
		return activities.AccessSummary{}, fmt.Errorf("order %s: %w", in.OrderRef, err)
	}
	pubLine := customerKey.String
	if pubLine == "" {
		pubLine = r.PublicKey.String
	}
	if pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(pubLine)); err == nil {
		fingerprint = ssh.FingerprintSHA256(pk)
	}
	if r.JupyterTok.Valid {
		tok, err := postgres.ReservationJupyterToken.Open(d.Keyring, in.OrderRef, r.JupyterTok.String)
		if err != nil {
			return activities.AccessSummary{}, err
		}
		jupyterTok = postgres.AccessJupyterToken.Seal(d.Keyring, in.OrderRef, tok)
		jupyterURL = fmt.Sprintf("http://127.0.0.1:%d/lab", d.jupyterPort())
	}
	v := in.Verification
	if r.PresetCheck.Valid {
		v.Notes = strings.TrimSpace(v.Notes + " " + r.PresetCheck.String)
	}
	if jupyterURL != nil {
		v.Notes = strings.TrimSpace(v.Notes + " " + jupyterTunnelNote(r, d.jupyterPort()))
	}
	err = postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO order_access (order_ref, host, port, username, password, private_key, key_fingerprint,
				jupyter_url, jupyter_token, gpu_model_seen, gpu_count_seen, driver_version, cuda_version, notes)
			VALUES ($1, $2, $3, $4, NULL, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT (order_ref) DO NOTHING`,
			in.OrderRef, r.Address, r.Port, r.UnixUser, privKey, fingerprint, jupyterURL, jupyterTok,
			v.GPUModel, v.GPUCount, v.DriverVersion, v.CUDAVersion, v.Notes); err != nil {
			return fmt.Errorf("create access %s: %w", in.OrderRef, err)
		}
		_, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'in_use', updated_at = now()
			WHERE id = $1 AND state = 'reserved'`, r.host.ID)
		return err
	})
	if err != nil {
		return activities.AccessSummary{}, err
	}
	// The generated private key now lives (sealed) on the access only.
	if _, err := d.DB.ExecContext(ctx, `UPDATE host_reservations SET private_key = NULL WHERE id = $1`, r.ID); err != nil {
		return activities.AccessSummary{}, fmt.Errorf("create access %s: %w", in.OrderRef, err)
	}
	var s activities.AccessSummary
	if err := d.DB.QueryRowxContext(ctx, `SELECT host, port, username FROM order_access WHERE order_ref = $1`, in.OrderRef).
		Scan(&s.Host, &s.Port, &s.Username); err != nil {
		return activities.AccessSummary{}, fmt.Errorf("read access %s: %w", in.OrderRef, err)
	}
	return s, nil
}

// jupyterTunnelNote tells the customer how to reach Jupyter, which listens
// on the host's loopback only.
func jupyterTunnelNote(r reservation, port int) string {
	return fmt.Sprintf("Jupyter écoute sur 127.0.0.1 de la machine seulement : ouvrez le tunnel "+
		"« ssh -N -L %d:127.0.0.1:%d -p %d %s@%s » puis ouvrez http://127.0.0.1:%d/lab avec le jeton.",
		port, port, r.Port, r.UnixUser, r.Address, port)
}

// RevokeAccess stops the customer's processes and removes the account and
// its files, then marks the access revoked.
func (d *Driver) RevokeAccess(ctx context.Context, orderRef string) error {
	r, ok, err := d.activeReservation(ctx, d.DB, orderRef)
	if err != nil {
		return err
	}
	if ok {
		// What could not be cleaned is checked again, and acted on, by
		// Release; what the customer did is kept for it.
		t, err := d.teardown(ctx, r, "revoke")
		if err != nil {
			return err
		}
		if err := d.flagCustomer(ctx, r.ID, t.Customer); err != nil {
			return fmt.Errorf("revoke %s: %w", orderRef, err)
		}
	}
	if _, err := d.DB.ExecContext(ctx, `UPDATE order_access SET revoked_at = now(), private_key = NULL, jupyter_token = NULL
		WHERE order_ref = $1 AND revoked_at IS NULL`, orderRef); err != nil {
		return fmt.Errorf("revoke %s: %w", orderRef, err)
	}
	return nil
}
