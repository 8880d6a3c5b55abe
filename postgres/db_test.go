package postgres_test

import (
	"context"
	"testing"

	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

func TestMigrateIsIdempotentAndSeedsCatalog(t *testing.T) {
	db := pgtest.NewDB(t)
	if err := postgres.Migrate(context.Background(), db.DB.DB); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	var perLot int
	if err := db.Get(&perLot, "SELECT gpus_per_lot FROM gpu_models WHERE model = 'b200'"); err != nil {
		t.Fatal(err)
	}
	if perLot != 2 {
		t.Fatalf("b200 gpus per lot = %d, want 2", perLot)
	}
	var p3, p7 int64
	if err := db.Get(&p3, "SELECT lot_cents FROM gpu_prices WHERE model = 'rtx-a5000' AND duration_days = 3"); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&p7, "SELECT lot_cents FROM gpu_prices WHERE model = 'rtx-a5000' AND duration_days = 7"); err != nil {
		t.Fatal(err)
	}
	if p3 != 2357 || p7 != 5500 {
		t.Fatalf("rtx-a5000 prices = %d/%d cents, want 2357/5500", p3, p7)
	}
}
