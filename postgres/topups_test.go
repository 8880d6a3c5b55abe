package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/workflows"
)

func TestTopUpsCreateOwnListStart(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	a := mkAccount(t, db, "t@example.com")
	b := mkAccount(t, db, "u@example.com")

	tu, err := db.CreateTopUp(ctx, a.ID, 50000)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(tu.Ref, "TU-"))
	require.Equal(t, workflows.TopUpWorkflowID(tu.Ref), tu.WorkflowID)
	require.Equal(t, domain.TopUpAwaitingPayment, tu.Status)

	tl, err := db.Timeline(ctx, tu.Ref, 0)
	require.NoError(t, err)
	require.Len(t, tl, 1)
	require.Equal(t, domain.EventCreated, tl[0].Kind)

	_, err = db.CreateTopUp(ctx, a.ID, 12345)
	require.Error(t, err, "the schema refuses amounts not offered")

	_, err = db.TopUpForAccount(ctx, tu.Ref, b.ID)
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))
	got, err := db.TopUpForAccount(ctx, tu.Ref, a.ID)
	require.NoError(t, err)
	require.Equal(t, int64(50000), got.AmountCents)
	got, err = db.GetTopUp(ctx, tu.Ref)
	require.NoError(t, err)
	require.Equal(t, a.ID, got.AccountID)

	list, err := db.ListTopUps(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, list, 1)

	un, err := db.UnstartedTopUps(ctx, 0)
	require.NoError(t, err)
	require.Len(t, un, 1)
	require.NoError(t, db.MarkTopUpWorkflowStarted(ctx, tu.Ref))
	un, err = db.UnstartedTopUps(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, un)

	bal, err := db.Balance(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, int64(0), bal.AvailableCents)
	require.Equal(t, int64(50000), bal.PendingTopUpsCents)
}
