package payments_test

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/payments"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/rates"
)

// BIP84's published account key for the "abandon ... about" mnemonic.
const bip84Zpub = "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs"

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func setup(t *testing.T) (*postgres.DB, *payments.Service, *clock, int64, string) {
	t.Helper()
	db := pgtest.NewDB(t)
	acc, err := hdwallet.ParseAccountKey(hdwallet.Bitcoin, bip84Zpub)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now().UTC()}
	static, err := rates.ParseStatic("BTC=65000.12,SOL=151.3,ETH=3000", clk.now)
	if err != nil {
		t.Fatal(err)
	}
	svc := &payments.Service{
		Store: db,
		Rates: rates.Fresh{Source: static, MaxAge: 5 * time.Minute, Now: clk.now},
		Networks: map[string]payments.Network{
			"bitcoin": {Deriver: acc},
			"solana":  {ShopAddress: "7xKXtg2CW87d97TXJSDpbD5jBkheTqA83TZRuJosgAsU"},
		},
		Deadline: time.Hour, WatchAfter: 24 * time.Hour, Now: clk.now,
	}
	a, err := db.CreateAccount(context.Background(), domain.Account{FirstName: "A", LastName: "B", Email: "p@example.com"}, "h")
	if err != nil {
		t.Fatal(err)
	}
	item, _ := db.CatalogItem(context.Background(), "rtx-a5000")
	q, _ := domain.PriceQuote(item, domain.Configuration{Model: "rtx-a5000", Lots: 1, DurationDays: 3, Preset: "python"})
	o, err := db.CreateOrder(context.Background(), a.ID, q)
	if err != nil {
		t.Fatal(err)
	}
	return db, svc, clk, a.ID, o.Ref
}

func TestIntentAmountAddressAndURI(t *testing.T) {
	ctx := context.Background()
	_, svc, _, acc, ref := setup(t)
	in, err := svc.Create(ctx, payments.Request{TargetKind: "order", TargetRef: ref, AccountID: acc,
		Asset: "BTC", Network: "bitcoin", USDCents: 2357, RequestKey: "intent:1"})
	if err != nil {
		t.Fatal(err)
	}
	// 23.57 / 65000.12 BTC = 0.000362614... BTC: rounded up to 36262 sat.
	if in.AmountBase.String() != "36262" || in.Amount != "0.00036262" {
		t.Fatalf("amount = %s (%s)", in.AmountBase.String(), in.Amount)
	}
	short := new(big.Int).Sub(&in.AmountBase.Int, big.NewInt(1))
	if v := decimal.NewFromBigInt(short, -8).Mul(decimal.RequireFromString("65000.12")); !v.LessThan(decimal.New(2357, -2)) {
		t.Fatalf("one satoshi less still covers the total: %s", v)
	}
	// First receive address of BIP84's test vector (m/84'/0'/0'/0/0).
	if in.Address != "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu" {
		t.Fatalf("address = %s", in.Address)
	}
	if in.PaymentURI != "bitcoin:bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu?amount=0.00036262" {
		t.Fatalf("uri = %s", in.PaymentURI)
	}
	if in.Rate != "65000.12" || in.RateSource != "static" {
		t.Fatalf("rate = %s from %s", in.Rate, in.RateSource)
	}
	// A retried activity (same request key) gets the same request back.
	again, err := svc.Create(ctx, payments.Request{TargetKind: "order", TargetRef: ref, AccountID: acc,
		Asset: "BTC", Network: "bitcoin", USDCents: 2357, RequestKey: "intent:1"})
	if err != nil || again.ID != in.ID {
		t.Fatalf("retry gave %v / %v", again.ID, err)
	}
}

func TestOneActiveIntentThenNeverReused(t *testing.T) {
	ctx := context.Background()
	db, svc, clk, acc, ref := setup(t)
	req := payments.Request{TargetKind: "order", TargetRef: ref, AccountID: acc, Asset: "BTC", Network: "bitcoin", USDCents: 2357}
	req.RequestKey = "intent:1"
	first, err := svc.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	req.RequestKey = "intent:2"
	if _, err := svc.Create(ctx, req); domain.ErrorCode(err) != domain.ECodeIntentActive {
		t.Fatalf("second while active: %v", err)
	}
	clk.t = clk.t.Add(61 * time.Minute) // the first expired
	second, err := svc.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// A new address; the amount may be the same: the address alone tells
	// the requests apart.
	if second.Address == first.Address {
		t.Fatalf("new request reuses the old address %s", first.Address)
	}
	intents, err := db.IntentsFor(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(intents) != 2 || intents[0].Status != "open" || intents[1].Status != "superseded" {
		t.Fatalf("history: %+v", intents)
	}
	var requested int
	_ = db.Get(&requested, `SELECT count(*) FROM timeline_events WHERE ref = $1 AND kind = 'payment_requested'`, ref)
	if requested != 2 {
		t.Fatalf("payment_requested events = %d", requested)
	}
}

func TestRefusalsWriteNothing(t *testing.T) {
	ctx := context.Background()
	db, svc, clk, acc, ref := setup(t)
	count := func() int {
		var n int
		_ = db.Get(&n, `SELECT count(*) FROM payment_intents`)
		return n
	}
	cases := []struct {
		asset, network, code string
	}{
		{"USDT", "tron", domain.ECodeMethodUnavailable}, // not configured
		{"DOGE", "dogecoin", domain.ECodeInvalid},       // not offered
		{"ETH", "bitcoin", domain.ECodeInvalid},         // wrong network for the asset
	}
	for _, c := range cases {
		_, err := svc.Create(ctx, payments.Request{TargetKind: "order", TargetRef: ref, AccountID: acc,
			Asset: c.asset, Network: c.network, USDCents: 2357, RequestKey: "k"})
		if domain.ErrorCode(err) != c.code {
			t.Errorf("%s/%s: %v, want %s", c.asset, c.network, err, c.code)
		}
	}
	// A feed that stopped 10 minutes ago: older than the 5 minutes allowed.
	stopped, _ := rates.ParseStatic("BTC=65000.12", func() time.Time { return clk.t.Add(-10 * time.Minute) })
	svc.Rates = rates.Fresh{Source: stopped, MaxAge: 5 * time.Minute, Now: clk.now}
	_, err := svc.Create(ctx, payments.Request{TargetKind: "order", TargetRef: ref, AccountID: acc,
		Asset: "BTC", Network: "bitcoin", USDCents: 2357, RequestKey: "k"})
	if domain.ErrorCode(err) != domain.ECodeRateUnavailable || !strings.Contains(domain.ErrorMessage(err), "cours") {
		t.Fatalf("stale rate: %v", err)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d intents written by refused requests", n)
	}
	var idx int64
	_ = db.Get(&idx, `SELECT next_index FROM hd_indexes WHERE network = 'bitcoin'`)
	if idx != 0 {
		t.Fatalf("a refused request consumed derivation index %d", idx)
	}
}

// Many requests: no address or derivation index is ever given twice on
// Bitcoin (derived addresses), and no amount or reference twice among the
// watched requests on Solana (one shared address), even for identical USD
// totals at the same rate.
func TestNoAddressOrAmountReused(t *testing.T) {
	ctx := context.Background()
	db, svc, clk, acc, _ := setup(t)
	item, _ := db.CatalogItem(ctx, "rtx-a5000")
	q, _ := domain.PriceQuote(item, domain.Configuration{Model: "rtx-a5000", Lots: 1, DurationDays: 3, Preset: "python"})
	seenAddr := map[string]bool{}
	watchedUntil := map[string]time.Time{}
	seenRef := map[string]bool{}
	for i := 0; i < 60; i++ {
		o, err := db.CreateOrder(ctx, acc, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []struct{ asset, network string }{{"BTC", "bitcoin"}, {"SOL", "solana"}} {
			in, err := svc.Create(ctx, payments.Request{TargetKind: "order", TargetRef: o.Ref, AccountID: acc,
				Asset: m.asset, Network: m.network, USDCents: 2357, RequestKey: "k-" + m.network})
			if domain.ErrorCode(err) == domain.ECodeIntentActive {
				clk.t = clk.t.Add(61 * time.Minute) // one open request per order: let it expire
				in, err = svc.Create(ctx, payments.Request{TargetKind: "order", TargetRef: o.Ref, AccountID: acc,
					Asset: m.asset, Network: m.network, USDCents: 2357, RequestKey: "k2-" + m.network})
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.network == "solana" {
				// An amount comes back only once its request is no longer
				// watched (the clock moves 61 minutes per order).
				if until, ok := watchedUntil[in.AmountBase.String()]; ok && !clk.t.After(until) {
					t.Fatalf("amount %s reused while watched", in.AmountBase.String())
				}
				watchedUntil[in.AmountBase.String()] = in.WatchUntil
				if seenRef[*in.ReferenceKey] {
					t.Fatalf("reference reused")
				}
				seenRef[*in.ReferenceKey] = true
				continue
			}
			if seenAddr[in.Address] {
				t.Fatalf("address %s reused", in.Address)
			}
			seenAddr[in.Address] = true
		}
	}
	if len(seenAddr) != 60 {
		t.Fatalf("%d distinct addresses for 60 requests", len(seenAddr))
	}
}

// Operators see how far each watch-only account was used, and the gap after
// the last paid address (what the wallet's gap limit must cover).
func TestDerivationUsesForOperators(t *testing.T) {
	ctx := context.Background()
	db, svc, _, acc, _ := setup(t)
	item, _ := db.CatalogItem(ctx, "rtx-a5000")
	q, _ := domain.PriceQuote(item, domain.Configuration{Model: "rtx-a5000", Lots: 1, DurationDays: 3, Preset: "python"})
	var intents []domain.Intent
	for i := 0; i < 5; i++ {
		o, err := db.CreateOrder(ctx, acc, q)
		if err != nil {
			t.Fatal(err)
		}
		in, err := svc.Create(ctx, payments.Request{TargetKind: "order", TargetRef: o.Ref, AccountID: acc,
			Asset: "BTC", Network: "bitcoin", USDCents: 2357, RequestKey: "k"})
		if err != nil {
			t.Fatal(err)
		}
		intents = append(intents, in)
	}
	// Index 1 (the second request) was paid.
	watched, err := db.WatchedIntents(ctx, "bitcoin", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var paid *chainwatch.Intent
	for i := range watched {
		if watched[i].ID == intents[1].ID {
			paid = &watched[i]
		}
	}
	if err := db.RecordBlock(ctx, "bitcoin", "", 100, "h100", []chainwatch.Seen{{TxID: "tx", Index: 0, Asset: "BTC",
		Address: paid.Address, Amount: paid.AmountBase, BlockHeight: 100, BlockHash: "h100", BlockTime: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	uses, err := db.DerivationUses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range uses {
		switch u.Network {
		case "bitcoin":
			if u.NextIndex != 5 || u.LastPaidIndex != 1 || u.Gap != 3 {
				t.Fatalf("bitcoin use: %+v", u)
			}
		default:
			if u.NextIndex != 0 || u.LastPaidIndex != -1 || u.Gap != 0 {
				t.Fatalf("%s use: %+v", u.Network, u)
			}
		}
	}
}

// fakeTron derives distinct Tron-shaped addresses (only uniqueness matters
// here).
type fakeTron struct{}

func (fakeTron) Address(i uint32) (string, error) { return fmt.Sprintf("TKernodeckTest%020d", i), nil }

// TestAmountsReservedOnlyOnASharedAddressWhileWatched: on Tron every request
// has its own address, so 2000 requests of 100 USD in USDT (expired) leave
// the next one its exact amount; on Solana (one shared address) an amount
// is held by its request while watched, then released.
func TestAmountsReservedOnlyOnASharedAddressWhileWatched(t *testing.T) {
	ctx := context.Background()
	db, svc, clk, acc, _ := setup(t)
	svc.Networks["tron"] = payments.Network{Deriver: fakeTron{}, Tokens: map[string]string{"USDT": "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"}}
	static, err := rates.ParseStatic("USDT=1,SOL=151.3", clk.now)
	if err != nil {
		t.Fatal(err)
	}
	svc.Rates = rates.Fresh{Source: static, MaxAge: 5 * time.Minute, Now: clk.now}
	request := func(asset, network string) domain.Intent {
		t.Helper()
		tu, err := db.CreateTopUp(ctx, acc, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		in, err := svc.Create(ctx, payments.Request{TargetKind: "topup", TargetRef: tu.Ref, AccountID: acc,
			Asset: asset, Network: network, USDCents: 10_000, RequestKey: "k"})
		if err != nil {
			t.Fatalf("%s/%s request: %v", asset, network, err)
		}
		return in
	}
	for i := range 2000 {
		if in := request("USDT", "tron"); in.AmountBase.String() != "100000000" {
			t.Fatalf("request %d: %s base units, want 100000000", i, in.AmountBase.String())
		}
	}
	clk.t = clk.t.Add(26 * time.Hour) // all 2000 expired and no longer watched
	if in := request("USDT", "tron"); in.AmountBase.String() != "100000000" {
		t.Fatalf("after 2000 expired requests: %s", in.AmountBase.String())
	}

	// Solana: while watched, each request holds its own amount.
	base := request("SOL", "solana")
	held := map[string]bool{base.AmountBase.String(): true}
	for range 20 {
		in := request("SOL", "solana")
		if held[in.AmountBase.String()] {
			t.Fatalf("amount %s given twice while watched", in.AmountBase.String())
		}
		held[in.AmountBase.String()] = true
	}
	clk.t = clk.t.Add(time.Hour) // expired but still watched (late payments)
	if in := request("SOL", "solana"); held[in.AmountBase.String()] {
		t.Fatalf("amount %s of a watched request given again", in.AmountBase.String())
	}
	clk.t = clk.t.Add(25 * time.Hour) // no longer watched: released
	if in := request("SOL", "solana"); in.AmountBase.Cmp(&base.AmountBase.Int) != 0 {
		t.Fatalf("after the watch window: %s, want the released %s", in.AmountBase.String(), base.AmountBase.String())
	}
}
