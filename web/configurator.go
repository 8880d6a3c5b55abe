package web

import (
	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// modelChoice is a model of the configurator with its price for the chosen
// duration beside it: the lot's, and per GPU and per day (models compare
// at a glance), and whether anything of it is free now.
type modelChoice struct {
	domain.CatalogItem
	Days           int
	LotCents       int64
	PerGPUDayCents int64
	Priced         bool
	// Known says the server told whether the model is free now (FreeNow).
	Known   bool
	FreeNow bool
}

// modelChoices prices the catalog's models for days.
func modelChoices(cat api.CatalogResponse, days int) []modelChoice {
	out := make([]modelChoice, 0, len(cat.Models))
	for _, it := range cat.Models {
		m := modelChoice{CatalogItem: it, Days: days}
		m.LotCents, m.Priced = it.PriceFor(days)
		if m.Priced {
			m.PerGPUDayCents = domain.PerGPUDayCents(m.LotCents, it.GPUsPerLot, days)
		}
		m.FreeNow, m.Known = cat.AvailableNow[it.Model]
		out = append(out, m)
	}
	return out
}
