package postgres_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

func TestSupportActionOutcomeWrittenOnce(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	id, err := db.InsertSupportAction(ctx, domain.SupportAction{
		Agent: "alice", Action: domain.ActionExtend, TargetRef: "KD-0000000000",
		Reason: "panne réseau", Params: json.RawMessage(`{"days":2}`),
	})
	require.NoError(t, err)
	require.NotZero(t, id)

	a, err := db.CompleteSupportAction(ctx, id, postgres.OutcomeDone, "ok")
	require.NoError(t, err)
	require.Equal(t, "alice", a.Agent)
	require.Equal(t, "done", *a.Outcome)
	require.NotNil(t, a.DoneAt)
	require.JSONEq(t, `{"days":2}`, string(a.Params))

	_, err = db.CompleteSupportAction(ctx, id, postgres.OutcomeFailed, "again")
	require.Equal(t, domain.ECodeConflict, domain.ErrorCode(err))
	_, err = db.Exec(`UPDATE support_actions SET reason = 'rewritten' WHERE id = $1`, id)
	require.Error(t, err)
	_, err = db.Exec(`DELETE FROM support_actions WHERE id = $1`, id)
	require.Error(t, err)

	id2, err := db.InsertSupportAction(ctx, domain.SupportAction{
		Agent: "bob", Action: domain.ActionCancel, TargetRef: "KD-0000000000", Reason: "demande client"})
	require.NoError(t, err)
	list, err := db.ListSupportActions(ctx, "KD-0000000000")
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, id2, list[1].ID)
	require.Nil(t, list[1].Outcome)
	require.JSONEq(t, `{}`, string(list[1].Params))

	_, err = db.InsertSupportAction(ctx, domain.SupportAction{
		Agent: "bob", Action: domain.ActionCancel, TargetRef: "KD-0000000000", Reason: "x"})
	require.Error(t, err, "reason too short")
	_, err = db.CompleteSupportAction(ctx, 99999, postgres.OutcomeDone, "")
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))
}

func TestSupportRequestsPerOrderAndAccount(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	a := mkAccount(t, db, "sr@example.com")
	o := mkOrder(t, db, a.ID, "rtx-a5000", 1)
	r, err := db.CreateSupportRequest(ctx, domain.SupportRequest{
		OrderRef: o.Ref, AccountID: a.ID, Message: "CUDA introuvable",
		LaunchCommand: "python train.py", Versions: "torch 2.5", FirstError: "RuntimeError: no CUDA",
	})
	require.NoError(t, err)
	require.Equal(t, "open", r.Status)
	require.Equal(t, "python train.py", r.LaunchCommand)

	mine, err := db.ListSupportRequests(ctx, o.Ref, a.ID)
	require.NoError(t, err)
	require.Len(t, mine, 1)
	all, err := db.ListSupportRequests(ctx, o.Ref, 0)
	require.NoError(t, err)
	require.Len(t, all, 1)
	none, err := db.ListSupportRequests(ctx, o.Ref, a.ID+1)
	require.NoError(t, err)
	require.Empty(t, none)
}
