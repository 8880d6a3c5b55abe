package postgres

import (
	"context"
	"fmt"

	"github.com/kernodeck/kernodeck/domain"
)

// ModelsAvailableNow says, for each model of items, whether anything of it
// could be sold now: a free host of any size (SSH driver), or one lot's GPUs
// free (local driver). Other orders' holds count as taken, as in
// Availability. The configurator says it beside each model.
func (c Capacity) ModelsAvailableNow(ctx context.Context, items []domain.CatalogItem) (map[string]bool, error) {
	out := make(map[string]bool, len(items))
	for _, it := range items {
		if c.Provisioner != ProvisionerSSH {
			free, err := FreeGPUs(ctx, c.DB, it.Model, "")
			if err != nil {
				return nil, err
			}
			out[it.Model] = free >= it.GPUsPerLot
			continue
		}
		var free bool
		if err := c.DB.GetContext(ctx, &free, `SELECT EXISTS (SELECT 1 FROM gpu_hosts h
			WHERE h.gpu_model = $1 AND h.gpu_count >= $2 AND `+hostFreeSQL+`)`, it.Model, it.GPUsPerLot, ""); err != nil {
			return nil, fmt.Errorf("free hosts of %s: %w", it.Model, err)
		}
		out[it.Model] = free
	}
	return out, nil
}

// ModelsAvailableNow is Capacity.ModelsAvailableNow.
func (s *Store) ModelsAvailableNow(ctx context.Context, items []domain.CatalogItem) (map[string]bool, error) {
	return Capacity{DB: s.DB, Provisioner: s.Provisioner}.ModelsAvailableNow(ctx, items)
}
