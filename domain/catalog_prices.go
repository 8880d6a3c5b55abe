package domain

// PerGPUDayCents is a lot price for days as a price per GPU and per day,
// rounded to the nearest cent: models compare at a glance (0 when the lot
// has no GPU or no day).
func PerGPUDayCents(lotCents int64, gpusPerLot, days int) int64 {
	d := int64(gpusPerLot) * int64(days)
	if d <= 0 {
		return 0
	}
	return (lotCents + d/2) / d
}

// PriceFor is item's lot price for days, and whether it has one.
func (item CatalogItem) PriceFor(days int) (int64, bool) {
	for _, p := range item.PriceList {
		if p.DurationDays == days {
			return p.LotCents, true
		}
	}
	c, ok := item.Prices[days]
	return c, ok
}
