package postgres

import (
	"context"
	"fmt"

	"github.com/lib/pq"

	"github.com/kernodeck/kernodeck/domain"
)

type catalogPriceRow struct {
	Model        string `db:"model"`
	DurationDays int    `db:"duration_days"`
	LotCents     int64  `db:"lot_cents"`
}

// Catalog lists the enabled GPU models, in the operator's order, each with
// its lot prices per duration.
func (db *DB) Catalog(ctx context.Context) ([]domain.CatalogItem, error) {
	var items []domain.CatalogItem
	if err := db.SelectContext(ctx, &items, `
		SELECT model, display_name, vendor, memory_gb, gpus_per_lot, enabled
		FROM gpu_models WHERE enabled ORDER BY sort_order, model`); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	var prices []catalogPriceRow
	if err := db.SelectContext(ctx, &prices, `
		SELECT p.model, p.duration_days, p.lot_cents
		FROM gpu_prices p JOIN gpu_models m ON m.model = p.model
		WHERE m.enabled ORDER BY p.model, p.duration_days`); err != nil {
		return nil, fmt.Errorf("catalog prices: %w", err)
	}
	byModel := make(map[string][]catalogPriceRow, len(items))
	for _, p := range prices {
		byModel[p.Model] = append(byModel[p.Model], p)
	}
	for i := range items {
		setPrices(&items[i], byModel[items[i].Model])
	}
	if items == nil {
		items = []domain.CatalogItem{}
	}
	return items, nil
}

// CatalogItem returns one GPU model with its prices, enabled or not (check
// Enabled), or ErrNotFound.
func (db *DB) CatalogItem(ctx context.Context, model string) (domain.CatalogItem, error) {
	// One prepared statement: every order creation prices its configuration.
	var row struct {
		domain.CatalogItem
		Days  pq.Int64Array `db:"days"`
		Cents pq.Int64Array `db:"cents"`
	}
	if err := db.getPrepared(ctx, &row, `
		SELECT m.model, m.display_name, m.vendor, m.memory_gb, m.gpus_per_lot, m.enabled,
			COALESCE(array_agg(p.duration_days ORDER BY p.duration_days) FILTER (WHERE p.model IS NOT NULL), '{}') AS days,
			COALESCE(array_agg(p.lot_cents ORDER BY p.duration_days) FILTER (WHERE p.model IS NOT NULL), '{}') AS cents
		FROM gpu_models m LEFT JOIN gpu_prices p ON p.model = m.model
		WHERE m.model = $1 GROUP BY m.model`, model); err != nil {
		return domain.CatalogItem{}, fmt.Errorf("catalog item %q: %w", model, notFound(err))
	}
	prices := make([]catalogPriceRow, len(row.Days))
	for i := range row.Days {
		prices[i] = catalogPriceRow{Model: model, DurationDays: int(row.Days[i]), LotCents: row.Cents[i]}
	}
	item := row.CatalogItem
	setPrices(&item, prices)
	return item, nil
}

func setPrices(item *domain.CatalogItem, rows []catalogPriceRow) {
	item.Prices = make(map[int]int64, len(rows))
	item.PriceList = make([]domain.CatalogPrice, 0, len(rows))
	for _, p := range rows {
		item.Prices[p.DurationDays] = p.LotCents
		item.PriceList = append(item.PriceList, domain.CatalogPrice{
			DurationDays: p.DurationDays,
			LotCents:     p.LotCents,
			LotUSD:       domain.FormatUSD(p.LotCents),
		})
	}
}
