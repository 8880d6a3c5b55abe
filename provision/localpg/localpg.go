// Package localpg is the local provisioning driver. It keeps real state in
// PostgreSQL (capacity per GPU model from gpu_inventory, reservations,
// generated credentials) but drives no machine: it stands in for the SSH host
// driver on a developer machine and in tests of the order flow. Its
// verification says so plainly instead of inventing driver versions.
package localpg

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/provision/accesskey"
	"github.com/kernodeck/kernodeck/secrets"
)

// Provisioner implements activities.Provisioner on PostgreSQL only.
type Provisioner struct {
	DB *sqlx.DB
	// Host and Port are given to customers as the access address.
	Host string
	Port int
	// Keyring seals the generated password at rest (required).
	Keyring *secrets.Keyring
}

var _ activities.Provisioner = (*Provisioner)(nil)

// Reserve takes GPUs of the model for the order; a second call for the
// same order is a no-op. An order whose hold still counts turns it into its
// reservation without the model's capacity lock (kd_take_held_gpus,
// migration 00056, says why). Otherwise the check and the insert are one
// server-side call (kd_reserve_gpus, migrations 00055 and 00061: the paid
// orders waiting ahead are served first, a closed order gets nothing)
// under that lock, the
// one holds take too (postgres.LockCapacity): concurrent reservations of a
// model wait for each other only for that call's statements, not for
// round trips (issue 23).
func (p *Provisioner) Reserve(ctx context.Context, in activities.ReserveInput) error {
	var held bool
	if err := p.DB.GetContext(ctx, &held, `SELECT kd_take_held_gpus($1, $2, $3)`,
		in.OrderRef, in.GPUModel, in.GPUs); err != nil {
		return fmt.Errorf("reserve %d GPU %s for %s from its hold: %w", in.GPUs, in.GPUModel, in.OrderRef, err)
	}
	if held {
		return nil
	}
	var r struct {
		Outcome string `db:"outcome"`
		Free    int    `db:"free"`
	}
	if err := p.DB.GetContext(ctx, &r, `SELECT outcome, free FROM kd_reserve_gpus($1, $2, $3)`,
		in.OrderRef, in.GPUModel, in.GPUs); err != nil {
		return fmt.Errorf("reserve %d GPU %s for %s: %w", in.GPUs, in.GPUModel, in.OrderRef, err)
	}
	switch r.Outcome {
	case "reserved", "already":
		return nil
	case "no_inventory":
		return domain.Errorf(domain.ECodeNoCapacity, "Aucune capacité n'est enregistrée pour le modèle %s.", in.GPUModel)
	case "no_capacity":
		return domain.Errorf(domain.ECodeNoCapacity,
			"Capacité insuffisante pour %d GPU %s (%d libres).", in.GPUs, in.GPUModel, max(r.Free, 0))
	case "closed":
		return postgres.ErrOrderClosed(in.OrderRef)
	}
	return fmt.Errorf("reserve %s: unknown outcome %q", in.OrderRef, r.Outcome)
}

// Prepare records the preset on the reservation.
func (p *Provisioner) Prepare(ctx context.Context, in activities.PrepareInput) error {
	res, err := p.DB.ExecContext(ctx, `
		UPDATE gpu_reservations SET preset = $2,
			state = CASE WHEN state = 'reserved' THEN 'prepared' ELSE state END
		WHERE order_ref = $1 AND state <> 'released'`, in.OrderRef, in.Preset)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", in.OrderRef, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("prepare %s: no active reservation", in.OrderRef)
	}
	return nil
}

// Verify reports what the reservation holds. No GPU is probed by this
// driver, so driver and CUDA versions are reported as not checked.
func (p *Provisioner) Verify(ctx context.Context, in activities.VerifyInput) (activities.Verification, error) {
	var r struct {
		Model string `db:"gpu_model"`
		GPUs  int    `db:"gpus"`
	}
	if err := p.DB.GetContext(ctx, &r, `SELECT gpu_model, gpus FROM gpu_reservations
		WHERE order_ref = $1 AND state <> 'released'`, in.OrderRef); err != nil {
		return activities.Verification{}, fmt.Errorf("verify %s: %w", in.OrderRef, err)
	}
	if r.Model != in.GPUModel || r.GPUs != in.GPUs {
		return activities.Verification{}, domain.Errorf(activities.ErrTypeVerifyMismatch,
			"La machine ne correspond pas à la commande : %d x %s au lieu de %d x %s.", r.GPUs, r.Model, in.GPUs, in.GPUModel)
	}
	if _, err := p.DB.ExecContext(ctx, `UPDATE gpu_reservations SET state = 'verified'
		WHERE order_ref = $1 AND state IN ('reserved', 'prepared')`, in.OrderRef); err != nil {
		return activities.Verification{}, fmt.Errorf("verify %s: %w", in.OrderRef, err)
	}
	return activities.Verification{
		GPUModel:      r.Model,
		GPUCount:      r.GPUs,
		DriverVersion: "non vérifié (pilote local)",
		CUDAVersion:   "non vérifié (pilote local)",
		Notes:         "Pilote de provisionnement local : aucune machine physique n'a été contrôlée.",
	}, nil
}

// CreateAccess generates credentials once per order. The password is stored
// sealed; only the order's owner sees it, opened by the API.
func (p *Provisioner) CreateAccess(ctx context.Context, in activities.CreateAccessInput) (activities.AccessSummary, error) {
	if p.Keyring == nil {
		return activities.AccessSummary{}, fmt.Errorf("create access %s: no keyring to seal the password", in.OrderRef)
	}
	user := "kd" + strings.ToLower(strings.ReplaceAll(in.OrderRef, "-", ""))
	password := postgres.AccessPassword.Seal(p.Keyring, in.OrderRef, rand.Text())
	// As the SSH driver does: the customer's own key, or a generated pair
	// whose private key the owner downloads once.
	var customerKey sql.NullString
	if err := p.DB.GetContext(ctx, &customerKey, `SELECT ssh_public_key FROM orders WHERE ref = $1`, in.OrderRef); err != nil {
		return activities.AccessSummary{}, fmt.Errorf("order %s: %w", in.OrderRef, err)
	}
	pubLine := customerKey.String
	var privKey any
	if pubLine == "" {
		priv, pub, err := accesskey.New(accesskey.Comment(in.OrderRef))
		if err != nil {
			return activities.AccessSummary{}, err
		}
		pubLine, privKey = pub, postgres.AccessPrivateKey.Seal(p.Keyring, in.OrderRef, priv)
	}
	var fingerprint any
	if pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(pubLine)); err == nil {
		fingerprint = ssh.FingerprintSHA256(pk)
	}
	v := in.Verification
	if _, err := p.DB.ExecContext(ctx, `
		INSERT INTO order_access (order_ref, host, port, username, password, private_key, key_fingerprint,
			gpu_model_seen, gpu_count_seen, driver_version, cuda_version, notes)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (order_ref) DO NOTHING`,
		in.OrderRef, p.Host, p.Port, user, password, privKey, fingerprint,
		v.GPUModel, v.GPUCount, v.DriverVersion, v.CUDAVersion, v.Notes); err != nil {
		return activities.AccessSummary{}, fmt.Errorf("create access %s: %w", in.OrderRef, err)
	}
	var s activities.AccessSummary
	if err := p.DB.QueryRowxContext(ctx, `SELECT host, port, username FROM order_access WHERE order_ref = $1`, in.OrderRef).
		Scan(&s.Host, &s.Port, &s.Username); err != nil {
		return activities.AccessSummary{}, fmt.Errorf("read access %s: %w", in.OrderRef, err)
	}
	return s, nil
}

// RevokeAccess marks the credentials revoked (once).
func (p *Provisioner) RevokeAccess(ctx context.Context, orderRef string) error {
	_, err := p.DB.ExecContext(ctx, `UPDATE order_access SET revoked_at = now() WHERE order_ref = $1 AND revoked_at IS NULL`, orderRef)
	if err != nil {
		return fmt.Errorf("revoke %s: %w", orderRef, err)
	}
	return nil
}

// Release frees the GPUs (once); releasing an order never reserved is a no-op.
func (p *Provisioner) Release(ctx context.Context, orderRef string) error {
	_, err := p.DB.ExecContext(ctx, `UPDATE gpu_reservations SET state = 'released', released_at = now()
		WHERE order_ref = $1 AND state <> 'released'`, orderRef)
	if err != nil {
		return fmt.Errorf("release %s: %w", orderRef, err)
	}
	return nil
}
