package web

import (
	"testing"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// Each model is priced for the chosen duration: the lot, and per GPU and
// per day (a B200 lot holds 2 GPUs); a model with nothing free says so,
// one the server could not tell about says nothing.
func TestModelChoicesPricedForTheDuration(t *testing.T) {
	cat := api.CatalogResponse{
		Models: []domain.CatalogItem{
			{Model: "rtx-a5000", GPUsPerLot: 1, PriceList: []domain.CatalogPrice{{DurationDays: 3, LotCents: 2357}, {DurationDays: 7, LotCents: 5500}}},
			{Model: "b200", GPUsPerLot: 2, PriceList: []domain.CatalogPrice{{DurationDays: 7, LotCents: 155900}}},
			{Model: "mi210", GPUsPerLot: 1, PriceList: []domain.CatalogPrice{{DurationDays: 7, LotCents: 16990}}},
		},
		AvailableNow: map[string]bool{"rtx-a5000": true, "b200": false},
	}
	got := modelChoices(cat, 7)
	want := []struct {
		lot, perDay  int64
		known, free  bool
		priced       bool
		usdLot, usdD string
	}{
		{5500, 786, true, true, true, "55,00 USD", "7,86 USD"},
		{155900, 11136, true, false, true, "1\u202f559,00 USD", "111,36 USD"},
		{16990, 2427, false, false, true, "169,90 USD", "24,27 USD"},
	}
	for i, w := range want {
		g := got[i]
		if g.LotCents != w.lot || g.PerGPUDayCents != w.perDay || g.Known != w.known || g.FreeNow != w.free || g.Priced != w.priced {
			t.Errorf("%s: %+v", g.Model, g)
		}
		if usd(g.LotCents) != w.usdLot || usd(g.PerGPUDayCents) != w.usdD {
			t.Errorf("%s: %s, %s", g.Model, usd(g.LotCents), usd(g.PerGPUDayCents))
		}
	}
	if c := modelChoices(cat, 3); c[1].Priced || !c[0].Priced || c[0].PerGPUDayCents != 786 {
		t.Errorf("3 days: %+v", c)
	}
}
