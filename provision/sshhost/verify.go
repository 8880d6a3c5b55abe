package sshhost

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// Verify reads the GPUs with nvidia-smi. Another model or count than the
// order's sets the host aside and fails without retry.
func (d *Driver) Verify(ctx context.Context, in activities.VerifyInput) (activities.Verification, error) {
	r, ok, err := d.activeReservation(ctx, d.DB, in.OrderRef)
	if err != nil {
		return activities.Verification{}, err
	}
	if !ok {
		// A retry after this very step set the host aside: say it again.
		var failure sql.NullString
		_ = d.DB.GetContext(ctx, &failure, `SELECT failure FROM host_reservations WHERE order_ref = $1
			ORDER BY id DESC LIMIT 1`, in.OrderRef)
		if failure.Valid {
			return activities.Verification{}, domain.Errorf(activities.ErrTypeVerifyMismatch,
				"La machine ne correspond pas à la commande (%s) : elle est écartée, une autre sera réservée.", failure.String)
		}
		return activities.Verification{}, fmt.Errorf("verify %s: no active host reservation", in.OrderRef)
	}
	var m struct {
		Pattern sql.NullString `db:"smi_name_pattern"`
		Vendor  string         `db:"vendor"`
	}
	if err := d.DB.GetContext(ctx, &m, `SELECT smi_name_pattern, vendor FROM gpu_models WHERE model = $1`, in.GPUModel); err != nil {
		return activities.Verification{}, fmt.Errorf("model %s: %w", in.GPUModel, err)
	}
	pattern := m.Pattern
	if !pattern.Valid {
		return activities.Verification{}, domain.Errorf(activities.ErrTypeVerifyMismatch,
			"Le modèle %s ne peut pas être vérifié (aucun nom attendu de nvidia-smi, amd-smi ou rocm-smi).", in.GPUModel)
	}
	// NVIDIA GPUs are read with nvidia-smi, AMD ones with amd-smi, or
	// rocm-smi where an older ROCm has no amd-smi.
	script, parse := verifyScript, parseVerify
	if m.Vendor == "amd" {
		script, parse = amdVerifyScript, parseAMDVerify
	}
	re, err := regexp.Compile("(?i)" + pattern.String)
	if err != nil {
		return activities.Verification{}, fmt.Errorf("smi_name_pattern of %s: %w", in.GPUModel, err)
	}
	client, closeFn, err := d.connect(ctx, r)
	if err != nil {
		return activities.Verification{}, err
	}
	defer closeFn()
	out, err := d.run(ctx, client, script)
	if err != nil {
		return activities.Verification{}, fmt.Errorf("verify %s on %s: %w", in.OrderRef, r.Name, err)
	}
	seen, err := parse(out)
	if err != nil {
		return activities.Verification{}, fmt.Errorf("verify %s on %s: %w", in.OrderRef, r.Name, err)
	}
	if why := seen.mismatch(re, in.GPUModel, in.GPUs); why != "" {
		closeFn() // the cleanup below opens its own connection
		if err := d.setAside(ctx, r, "vérification : "+why, &seen, true); err != nil {
			return activities.Verification{}, err
		}
		return activities.Verification{}, domain.Errorf(activities.ErrTypeVerifyMismatch,
			"La machine ne correspond pas à la commande (%s) : elle est écartée, une autre sera réservée.", why)
	}
	if _, err := d.DB.ExecContext(ctx, `UPDATE host_reservations SET gpu_model_seen = $2, gpu_count_seen = $3,
		driver_version = $4, cuda_version = $5 WHERE id = $1`, r.ID, seen.model(), len(seen.Names), seen.Driver, seen.CUDA); err != nil {
		return activities.Verification{}, fmt.Errorf("record verification of %s: %w", in.OrderRef, err)
	}
	return activities.Verification{
		GPUModel:      seen.model(),
		GPUCount:      len(seen.Names),
		DriverVersion: seen.Driver,
		CUDAVersion:   seen.CUDA,
		Notes:         seen.notes(r.Name),
	}, nil
}
