package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/payments"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/rates"
)

// observed is the asset_rates rows, "ASSET=rate/source" by asset.
func observed(t *testing.T, db interface {
	Select(dest any, query string, args ...any) error
}) map[string][]string {
	t.Helper()
	var rows []struct {
		Asset string `db:"asset"`
		Rate  string `db:"rate"`
	}
	if err := db.Select(&rows, `SELECT asset, usd_per_unit::text || '/' || source AS rate FROM asset_rates ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, r := range rows {
		out[r.Asset] = append(out[r.Asset], r.Rate)
	}
	return out
}

// The application keeps every rate its payments fetch (a quote), once
// per fetch, and the worker's sampler records every asset the shop can
// receive that the source prices, so that a payment in an asset nobody
// quoted still has a rate near its reception.
func TestRatesObservedByQuotesAndTheSampler(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	src, err := rates.ParseStatic("BTC=65000,ETH=3000,USDT=1,USDC=1,TRX=0.25,SOL=150,LTC=90", nil)
	if err != nil {
		t.Fatal(err)
	}
	pay := &payments.Service{Store: db, Rates: rates.Fresh{Source: src, MaxAge: time.Hour}}
	a := app.New(app.Config{DB: db, Payments: pay, RateSampleInterval: time.Minute})
	app.New(app.Config{DB: db, Payments: pay}) // wrapped once, however assembled
	if _, err := pay.Rates.Rate(ctx, "BTC"); err != nil {
		t.Fatal(err)
	}
	if got := observed(t, db); len(got) != 1 || len(got["BTC"]) != 1 || got["BTC"][0] != "65000/static" {
		t.Fatalf("after a BTC quote: %v", got)
	}

	s := a.RateSampler()
	if s == nil || s.Interval != time.Minute {
		t.Fatalf("sampler %+v", s)
	}
	if n, err := s.Tick(ctx); err != nil || n != 7 {
		t.Fatalf("tick: %d %v", n, err)
	}
	got := observed(t, db)
	for asset, want := range map[string]string{"BTC": "65000/static", "ETH": "3000/static", "USDT": "1/static", "USDC": "1/static",
		"TRX": "0.25/static", "SOL": "150/static", "LTC": "90/static"} {
		if rows := got[asset]; len(rows) == 0 || rows[len(rows)-1] != want {
			t.Errorf("%s: %v, want %s sampled", asset, rows, want)
		}
	}
	if len(got["BTC"]) != 2 || len(got) != 7 {
		t.Fatalf("observed %v: one quote and one sample each", got)
	}
	if app.New(app.Config{DB: db}).RateSampler() != nil {
		t.Fatal("a sampler without payments")
	}
}
