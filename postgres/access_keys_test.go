package postgres_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
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
	running(t, db, o.Ref)

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

// The order's page reads its support requests and latest key change in the
// session's statement: the same as the reads apart, and the account's
// requests only.
func TestSessionOrderPageParts(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	store := postgres.NewStore(db, nil, "")
	a := mkAccount(t, db, "page-parts@example.com")
	o := mkOrder(t, db, a.ID, "rtx-a5000", 1)
	tok := sha256.Sum256([]byte("page-parts-token"))
	require.NoError(t, db.CreateSession(ctx, tok[:], a.ID, "csrf", time.Now().Add(time.Hour), time.Hour, domain.SessionClient{}))

	so, err := store.SessionOrderPage(ctx, tok[:], o.Ref)
	require.NoError(t, err)
	require.NotNil(t, so.Page)
	require.Empty(t, so.Page.SupportRequests)
	require.Nil(t, so.Page.KeyRequest)
	plain, err := store.SessionOrder(ctx, tok[:], o.Ref)
	require.NoError(t, err)
	require.Nil(t, plain.Page, "the JSON read reads no page parts")

	running(t, db, o.Ref)
	first, err := db.RequestKeyChange(ctx, o.Ref, domain.KeyRequestReissue, "")
	require.NoError(t, err)
	require.NoError(t, db.FinishKeyRequest(ctx, first.ID, "La machine ne répond pas."))
	_, err = db.RequestKeyChange(ctx, o.Ref, domain.KeyRequestReplace, "ssh-ed25519 AAAA test")
	require.NoError(t, err)
	for _, msg := range []string{"Le GPU n'apparaît pas.", "CUDA ne démarre pas."} {
		_, err = db.CreateSupportRequest(ctx, domain.SupportRequest{OrderRef: o.Ref, AccountID: a.ID, Message: msg,
			LaunchCommand: "python train.py", Versions: "torch 2.5", FirstError: "CUDA error"})
		require.NoError(t, err)
	}

	so, err = store.SessionOrderPage(ctx, tok[:], o.Ref)
	require.NoError(t, err)
	reqs, err := db.ListSupportRequests(ctx, o.Ref, a.ID)
	require.NoError(t, err)
	require.Len(t, reqs, 2)
	latest, err := db.LatestKeyRequest(ctx, o.Ref)
	require.NoError(t, err)
	require.Equal(t, domain.KeyRequestReplace, latest.Kind)
	// Times through JSON keep their instant, not their location.
	for i := range reqs {
		require.True(t, reqs[i].CreatedAt.Equal(so.Page.SupportRequests[i].CreatedAt))
		so.Page.SupportRequests[i].CreatedAt = reqs[i].CreatedAt
	}
	require.Equal(t, reqs, so.Page.SupportRequests)
	require.NotNil(t, so.Page.KeyRequest)
	require.True(t, latest.CreatedAt.Equal(so.Page.KeyRequest.CreatedAt))
	so.Page.KeyRequest.CreatedAt = latest.CreatedAt
	require.Equal(t, latest, *so.Page.KeyRequest)
}

// running gives the order its access and makes it active.
func running(t *testing.T, db *postgres.DB, ref string) {
	t.Helper()
	_, err := db.Exec(`INSERT INTO order_access (order_ref, host, port, username, gpu_model_seen, gpu_count_seen,
		driver_version, cuda_version) VALUES ($1, 'gpu1.example', 22, 'kd', 'RTX A5000', 1, '550', '12.4')`, ref)
	require.NoError(t, err)
	setStatus(t, db, ref, domain.StatusActive)
}
