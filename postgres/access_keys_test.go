package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// A key change is for a running rental only, one at a time; how it ends is
// told once on the order's timeline (what updates the customer's page),
// failures with their reason.
func TestKeyChangeOutcomeOnTheTimeline(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	a := mkAccount(t, db, "keys@example.com")
	o := mkOrder(t, db, a.ID, "rtx-a5000", 1)
	_, err := db.RequestKeyChange(ctx, o.Ref, domain.KeyRequestReissue, "")
	require.Equal(t, domain.ECodeConflict, domain.ErrorCode(err), "no running rental, no key change")
	_, err = db.Exec(`INSERT INTO order_access (order_ref, host, port, username, gpu_model_seen, gpu_count_seen,
		driver_version, cuda_version) VALUES ($1, 'gpu1.example', 22, 'kd', 'RTX A5000', 1, '550', '12.4')`, o.Ref)
	require.NoError(t, err)
	setStatus(t, db, o.Ref, domain.StatusActive)

	first, err := db.RequestKeyChange(ctx, o.Ref, domain.KeyRequestReissue, "")
	require.NoError(t, err)
	_, err = db.RequestKeyChange(ctx, o.Ref, domain.KeyRequestReissue, "")
	require.Equal(t, domain.ECodeConflict, domain.ErrorCode(err), "one change at a time")
	require.NoError(t, db.FinishKeyRequest(ctx, first.ID, ""))
	require.NoError(t, db.FinishKeyRequest(ctx, first.ID, ""), "finished twice")

	second, err := db.RequestKeyChange(ctx, o.Ref, domain.KeyRequestReplace, "ssh-ed25519 AAAA test")
	require.NoError(t, err)
	require.NoError(t, db.FinishKeyRequest(ctx, second.ID, "La machine ne répond pas."))
	last, err := db.LatestKeyRequest(ctx, o.Ref)
	require.NoError(t, err)
	require.Equal(t, domain.KeyRequestFailed, last.State)

	tl, err := db.Timeline(ctx, o.Ref, 0)
	require.NoError(t, err)
	var told []string
	for _, ev := range tl {
		if ev.Kind == domain.EventAccessKeyChanged {
			told = append(told, ev.Message)
			require.WithinDuration(t, time.Now(), ev.At, time.Minute)
		}
	}
	require.Len(t, told, 2, "each outcome told once")
	require.Contains(t, told[0], "Nouvelle paire de clés générée")
	require.Contains(t, told[1], "n'a pas abouti. La machine ne répond pas.")
}
