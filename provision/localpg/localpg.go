// Package localpg is the local provisioning driver. It keeps real state in
// PostgreSQL (capacity per GPU model from gpu_inventory, reservations,
// generated credentials) but drives no machine: it stands in for the SSH host
// driver on a developer machine and in tests of the order flow. Its
// verification says so plainly instead of inventing driver versions.
package localpg

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/provision/accesskey"
	"github.com/kernodeck/kernodeck/secrets"
)

// Store is what the driver reads and writes (postgres.LocalGPUs): only
// package postgres writes the order's tables.
type Store interface {
	ReserveGPUs(ctx context.Context, orderRef, model string, gpus int) (outcome string, free int, err error)
	PrepareGPUs(ctx context.Context, orderRef, preset string) (ok bool, err error)
	ReservedGPUs(ctx context.Context, orderRef string) (model string, gpus int, err error)
	MarkGPUsVerified(ctx context.Context, orderRef string) error
	ReleaseGPUs(ctx context.Context, orderRef string) error
	OrderPublicKey(ctx context.Context, orderRef string) (string, error)
	CreateAccess(ctx context.Context, a postgres.NewAccess) (postgres.AccessAddress, error)
	RevokeAccess(ctx context.Context, orderRef string) error
}

// Provisioner implements activities.Provisioner on PostgreSQL only.
type Provisioner struct {
	Store Store
	// Host and Port are given to customers as the access address.
	Host string
	Port int
	// Keyring seals the generated password at rest (required).
	Keyring *secrets.Keyring
}

var (
	_ activities.Provisioner = (*Provisioner)(nil)
	_ Store                  = postgres.LocalGPUs{}
)

// Reserve takes GPUs of the model for the order; a second call for the
// same order is a no-op. An order whose hold still counts turns it into its
// reservation without the model's capacity lock (kd_take_held_gpus,
// migration 00056, says why). Otherwise the check and the insert are one
// server-side call (kd_reserve_gpus, migrations 00055 and 00061: the paid
// rentals waiting ahead are served first, a closed order gets nothing)
// under that lock, the
// one holds take too (postgres.LockCapacity): concurrent reservations of a
// model wait for each other only for that call's statements, not for
// round trips (issue 23).
func (p *Provisioner) Reserve(ctx context.Context, in activities.ReserveInput) error {
	outcome, free, err := p.Store.ReserveGPUs(ctx, in.OrderRef, in.GPUModel, in.GPUs)
	if err != nil {
		return err
	}
	switch outcome {
	case "held", "reserved", "already":
		return nil
	case "no_inventory":
		return domain.Errorf(domain.ECodeNoCapacity, "Aucune capacité n'est enregistrée pour le modèle %s.", in.GPUModel)
	case "no_capacity":
		return domain.Errorf(domain.ECodeNoCapacity,
			"Capacité insuffisante pour %d GPU %s (%d libres).", in.GPUs, in.GPUModel, max(free, 0))
	case "closed":
		return postgres.ErrOrderClosed(in.OrderRef)
	}
	return fmt.Errorf("reserve %s: unknown outcome %q", in.OrderRef, outcome)
}

// Prepare records the preset on the reservation.
func (p *Provisioner) Prepare(ctx context.Context, in activities.PrepareInput) error {
	ok, err := p.Store.PrepareGPUs(ctx, in.OrderRef, in.Preset)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("prepare %s: no active reservation", in.OrderRef)
	}
	return nil
}

// Verify reports what the reservation holds. No GPU is probed by this
// driver, so driver and CUDA versions are reported as not checked.
func (p *Provisioner) Verify(ctx context.Context, in activities.VerifyInput) (activities.Verification, error) {
	model, gpus, err := p.Store.ReservedGPUs(ctx, in.OrderRef)
	if err != nil {
		return activities.Verification{}, err
	}
	if model != in.GPUModel || gpus != in.GPUs {
		return activities.Verification{}, domain.Errorf(activities.ErrTypeVerifyMismatch,
			"La machine ne correspond pas à la commande : %d x %s au lieu de %d x %s.", gpus, model, in.GPUs, in.GPUModel)
	}
	if err := p.Store.MarkGPUsVerified(ctx, in.OrderRef); err != nil {
		return activities.Verification{}, err
	}
	return activities.Verification{
		GPUModel:      model,
		GPUCount:      gpus,
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
	pubLine, err := p.Store.OrderPublicKey(ctx, in.OrderRef)
	if err != nil {
		return activities.AccessSummary{}, err
	}
	var privKey string
	if pubLine == "" {
		priv, pub, err := accesskey.New(accesskey.Comment(in.OrderRef))
		if err != nil {
			return activities.AccessSummary{}, err
		}
		pubLine, privKey = pub, postgres.AccessPrivateKey.Seal(p.Keyring, in.OrderRef, priv)
	}
	var fingerprint string
	if pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(pubLine)); err == nil {
		fingerprint = ssh.FingerprintSHA256(pk)
	}
	v := in.Verification
	a, err := p.Store.CreateAccess(ctx, postgres.NewAccess{OrderRef: in.OrderRef, Host: p.Host, Port: p.Port,
		Username: user, Password: password, PrivateKey: privKey, KeyFingerprint: fingerprint,
		GPUModel: v.GPUModel, GPUCount: v.GPUCount, DriverVersion: v.DriverVersion, CUDAVersion: v.CUDAVersion, Notes: v.Notes})
	if err != nil {
		return activities.AccessSummary{}, err
	}
	return activities.AccessSummary{Host: a.Host, Port: a.Port, Username: a.Username}, nil
}

// RevokeAccess marks the credentials revoked (once).
func (p *Provisioner) RevokeAccess(ctx context.Context, orderRef string) error {
	return p.Store.RevokeAccess(ctx, orderRef)
}

// Release frees the GPUs (once); releasing an order never reserved is a no-op.
func (p *Provisioner) Release(ctx context.Context, orderRef string) error {
	return p.Store.ReleaseGPUs(ctx, orderRef)
}
