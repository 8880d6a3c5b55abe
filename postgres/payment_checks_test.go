package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// CheckPayments admits a claim only as a watcher recorded it: every field
// a forger could bend (output, asset, request, address, amount, value) is
// compared; garbage amounts are refused without a failing query; a dust
// summary is admitted at its version or an older one, never above what is
// stored.
func TestCheckPaymentsComparesEveryClaimedField(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx := context.Background()
	acc := mkAccount(t, db, "check-payments@example.com").ID
	o := mkOrder(t, db, acc, "rtx-a5000", 1)
	var intent string
	require.NoError(t, db.Get(&intent, `INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network,
		decimals, amount_base, usd_cents, rate, rate_source, rate_at, address, derivation_index, payment_uri, deadline,
		watch_until, request_key)
		VALUES ('PI-CHECK', 'order', $1, $2, 'BTC', 'bitcoin', 8, 36000, 2357, '65000', 'test', now(), 'bcrt1qcheck', 7,
			'bitcoin:x', now() + interval '1 hour', now() + interval '1 day', 'intent:1') RETURNING id`, o.Ref, acc))
	real := domain.PaymentClaim{Network: "bitcoin", TxID: "aa", Index: 1, Asset: "BTC", IntentID: intent,
		Address: "bcrt1qcheck", AmountBase: "36000", AmountCents: 2357}
	pgtest.Recorded(t, db, real)
	dust := domain.PaymentClaim{Network: "bitcoin", Asset: "BTC", IntentID: intent, Address: "bcrt1qcheck",
		AmountBase: "900", AmountCents: 1, Dust: true, Version: 3}
	pgtest.Recorded(t, db, dust)

	bent := func(f func(*domain.PaymentClaim)) domain.PaymentClaim { c := real; f(&c); return c }
	claims := []domain.PaymentClaim{
		real,
		bent(func(c *domain.PaymentClaim) { c.Index = 2 }),
		bent(func(c *domain.PaymentClaim) { c.TxID = "bb" }),
		bent(func(c *domain.PaymentClaim) { c.Asset = "USDT" }),
		bent(func(c *domain.PaymentClaim) { c.Address = "bcrt1qother" }),
		bent(func(c *domain.PaymentClaim) { c.AmountBase = "36001" }),
		bent(func(c *domain.PaymentClaim) { c.AmountCents = 100000000 }),
		bent(func(c *domain.PaymentClaim) { c.AmountBase = "1e9" }),
		bent(func(c *domain.PaymentClaim) { c.IntentID = "PI-NONE" }),
		dust,
		func() domain.PaymentClaim { d := dust; d.Version = 2; d.AmountBase = "600"; return d }(),
		func() domain.PaymentClaim { d := dust; d.Version = 4; return d }(),
		func() domain.PaymentClaim { d := dust; d.AmountBase = "901"; return d }(),
	}
	want := []bool{true, false, false, false, false, false, false, false, false, true, true, false, false}
	got, err := db.CheckPayments(ctx, claims)
	require.NoError(t, err)
	require.Len(t, got, len(claims))
	for i := range claims {
		require.Equal(t, want[i], got[i].Recorded, "claim %d: %+v", i, claims[i])
	}
	require.NotNil(t, got[0].Request)
	require.Equal(t, o.Ref, got[0].Request.TargetRef)
	require.Nil(t, got[8].Request, "no such request")
}
