package sshhost

import (
	"context"
	"fmt"
	"regexp"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
)

// Verify reads the GPUs with nvidia-smi. Another model or count than the
// order's sets the host aside and fails without retry.
func (d *Driver) Verify(ctx context.Context, in activities.VerifyInput) (activities.Verification, error) {
	r, ok, err := d.Store.HostReservation(ctx, in.OrderRef)
	if err != nil {
		return activities.Verification{}, err
	}
	if !ok {
		// A retry after this very step set the host aside: say it again.
		if failure, failed, _ := d.Store.LastHostFailure(ctx, in.OrderRef); failed {
			return activities.Verification{}, domain.Errorf(activities.ErrTypeVerifyMismatch,
				"La machine ne correspond pas à la commande (%s) : elle est écartée, une autre sera réservée.", failure)
		}
		return activities.Verification{}, fmt.Errorf("verify %s: no active host reservation", in.OrderRef)
	}
	vendor, pattern, err := d.Store.GPUModelCheck(ctx, in.GPUModel)
	if err != nil {
		return activities.Verification{}, err
	}
	if pattern == nil {
		return activities.Verification{}, domain.Errorf(activities.ErrTypeVerifyMismatch,
			"Le modèle %s ne peut pas être vérifié (aucun nom attendu de nvidia-smi, amd-smi ou rocm-smi).", in.GPUModel)
	}
	// NVIDIA GPUs are read with nvidia-smi, AMD ones with amd-smi, or
	// rocm-smi where an older ROCm has no amd-smi.
	script, parse := verifyScript, parseVerify
	if vendor == "amd" {
		script, parse = amdVerifyScript, parseAMDVerify
	}
	re, err := regexp.Compile("(?i)" + *pattern)
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
	if err := d.Store.RecordGPUsSeen(ctx, r.ID, postgres.GPUsSeen{Model: seen.model(), Count: len(seen.Names),
		Driver: seen.Driver, CUDA: seen.CUDA}); err != nil {
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
