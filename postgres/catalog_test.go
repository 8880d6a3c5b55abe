package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

func TestCatalogListsEnabledModelsWithPrices(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	_, err := db.Exec(`UPDATE gpu_models SET enabled = false WHERE model = 'mi210'`)
	require.NoError(t, err)

	items, err := db.Catalog(ctx)
	require.NoError(t, err)
	require.Len(t, items, 7)
	require.Equal(t, "rtx-a5000", items[0].Model)
	require.Equal(t, int64(2357), items[0].Prices[3])
	require.Equal(t, "23.57", items[0].PriceList[0].LotUSD)
	require.Equal(t, 24, items[0].MemoryGB)
	for _, it := range items {
		require.NotEqual(t, "mi210", it.Model)
		require.Len(t, it.PriceList, 3)
	}

	b200, err := db.CatalogItem(ctx, "b200")
	require.NoError(t, err)
	require.Equal(t, 2, b200.GPUsPerLot)
	require.True(t, b200.Enabled)

	mi, err := db.CatalogItem(ctx, "mi210")
	require.NoError(t, err)
	require.False(t, mi.Enabled)

	_, err = db.CatalogItem(ctx, "nope")
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))
}
