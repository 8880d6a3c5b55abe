package recovery_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/payments"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// A database restored to an earlier point may hold a next address index
// below addresses it already lists: AdvanceHDIndexes moves it past them,
// so the next request gets an address never handed out; a gap moves it
// further, past what was handed out after the restore point.
func TestAdvanceHDIndexesAfterARewind(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	svc := &payments.Service{Store: db, Rates: fixedRates{},
		Networks: map[string]payments.Network{domain.NetworkBitcoin: {Deriver: deriver{}}}}
	request := func(i int) (domain.Intent, error) {
		t.Helper()
		acc, ref := pgtest.AccountWithOrder(t, db, fmt.Sprintf("index%d@example.com", i))
		return svc.Create(ctx, payments.Request{TargetKind: "order", TargetRef: ref, AccountID: acc,
			Asset: "BTC", Network: domain.NetworkBitcoin, USDCents: 2357, RequestKey: "intent:1"})
	}
	handed := map[string]bool{}
	for i := range 3 {
		it, err := request(i)
		if err != nil {
			t.Fatal(err)
		}
		handed[it.Address] = true
	}
	// A point-in-time restore rewinds the counter below the addresses listed.
	if _, err := db.ExecContext(ctx, `UPDATE hd_indexes SET next_index = 1 WHERE network = 'bitcoin'`); err != nil {
		t.Fatal(err)
	}
	moved, err := db.AdvanceHDIndexes(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	it, err := request(3)
	if err != nil {
		t.Fatalf("the next request after the rewind: %v", err)
	}
	if handed[it.Address] || it.DerivationIndex == nil || *it.DerivationIndex != 3 {
		t.Fatalf("next request got %s (index %v), want index 3, an address never handed out", it.Address, it.DerivationIndex)
	}
	if len(moved) != 1 || moved[0] != (postgres.IndexAdvance{Network: domain.NetworkBitcoin, From: 1, To: 3}) {
		t.Fatalf("moved %+v, want bitcoin from 1 to 3", moved)
	}
	// Checked again (every start): nothing moves.
	if moved, err := db.AdvanceHDIndexes(ctx, 0); err != nil || len(moved) != 0 {
		t.Fatalf("second check moved %+v (%v), want nothing", moved, err)
	}
	// After a point-in-time restore, a gap skips what the restored
	// database cannot know.
	moved, err = db.AdvanceHDIndexes(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]postgres.IndexAdvance{}
	for _, m := range moved {
		got[m.Network] = m
	}
	if len(got) != 4 || got[domain.NetworkBitcoin].From != 4 || got[domain.NetworkBitcoin].To != 1004 ||
		got[domain.NetworkEthereum].To != 1000 {
		t.Fatalf("gap moved %+v, want every network 1000 further (bitcoin from 4 to 1004)", moved)
	}
}
