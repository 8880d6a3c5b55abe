package domain

import (
	"fmt"
	"slices"
)

// FormatUSD renders integer cents as a USD amount with two decimals ("23.57").
func FormatUSD(cents int64) string {
	sign := ""
	if cents < 0 {
		sign = "-"
		cents = -cents
	}
	return fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
}

// ValidateConfiguration checks a configuration's shape (not the model's existence).
func ValidateConfiguration(c Configuration) error {
	if c.Model == "" {
		return FieldError("gpu_model", "Choisissez un modèle de GPU.")
	}
	if c.Lots < MinLots || c.Lots > MaxLots {
		return FieldError("lots", "Le nombre de lots doit être compris entre 1 et 10.")
	}
	if !slices.Contains(Durations, c.DurationDays) {
		return FieldError("duration_days", "La durée doit être de 3, 7 ou 30 jours.")
	}
	if !slices.Contains(Presets, c.Preset) {
		return FieldError("preset", "La préparation doit être python, pytorch, notebook ou inference.")
	}
	return nil
}

// PriceQuote prices a configuration against a catalog item. Total = lot price x
// lots; the GPUs inside a lot are not billed again.
func PriceQuote(item CatalogItem, c Configuration) (Quote, error) {
	if err := ValidateConfiguration(c); err != nil {
		return Quote{}, err
	}
	if !item.Enabled || item.Model != c.Model {
		return Quote{}, FieldError("gpu_model", "Ce modèle de GPU n'est pas proposé.")
	}
	lot, ok := item.Prices[c.DurationDays]
	if !ok {
		return Quote{}, FieldError("duration_days", "Cette durée n'est pas proposée pour ce modèle.")
	}
	total := lot * int64(c.Lots)
	return Quote{
		Configuration: c,
		GPUsPerLot:    item.GPUsPerLot,
		TotalGPUs:     item.GPUsPerLot * c.Lots,
		LotCents:      lot,
		LotUSD:        FormatUSD(lot),
		TotalCents:    total,
		TotalUSD:      FormatUSD(total),
		MemoryGB:      item.MemoryGB,
	}, nil
}
