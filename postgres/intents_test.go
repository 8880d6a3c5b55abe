package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// TestIntentRequestKeyIsIdempotentPerMethod: a creation retried under the
// key of one that gave up after writing its request (the workflow gives
// the key back, vDrain) returns that request for the same method; for
// another method it is the open request, refused as such while valid.
func TestIntentRequestKeyIsIdempotentPerMethod(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx := context.Background()
	acc := mkAccount(t, db, "intent-key@example.com").ID
	o := mkOrder(t, db, acc, "rtx-a5000", 1)
	now := time.Now().UTC()
	request := func(asset, network string) domain.Intent {
		return domain.Intent{ID: domain.NewRef("PI"), TargetKind: "order", TargetRef: o.Ref, AccountID: acc,
			Asset: asset, Network: network, Decimals: 8, AmountBase: domain.NewBigInt(big.NewInt(36000)), USDCents: o.TotalCents,
			Rate: "65000", RateSource: "test", RateAt: now,
			Deadline: now.Add(time.Hour), WatchUntil: now.Add(25 * time.Hour), Status: domain.IntentOpen}
	}
	uri := func(domain.Intent) string { return "bitcoin:x" }
	derive := func(i int64) (string, error) { return fmt.Sprintf("bcrt1qkey%d", i), nil }

	first, err := db.InsertIntent(ctx, request("BTC", "bitcoin"), "intent:1", now, derive, uri)
	require.NoError(t, err)
	again, err := db.InsertIntent(ctx, request("BTC", "bitcoin"), "intent:1", now, derive, uri)
	require.NoError(t, err, "the same key and method: the request written before")
	require.Equal(t, first.ID, again.ID)

	_, err = db.InsertIntent(ctx, request("LTC", "litecoin"), "intent:1", now, derive, uri)
	var de *domain.Error
	require.True(t, errors.As(err, &de), "another method under the key: %v", err)
	require.Equal(t, domain.ECodeIntentActive, de.Code, "the key's request is the open one")

	_, err = db.InsertIntent(ctx, request("LTC", "litecoin"), "intent:1", now.Add(2*time.Hour), derive, uri)
	require.True(t, errors.As(err, &de), "another method under an expired key: %v", err)
	require.Equal(t, domain.ECodeConflict, de.Code)

	var rows int
	require.NoError(t, db.Get(&rows, `SELECT count(*) FROM payment_intents WHERE target_ref = $1`, o.Ref))
	require.Equal(t, 1, rows, "one request written")
}
