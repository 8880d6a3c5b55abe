package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

func moneyAction(agent string, cents int64, needsApproval bool) domain.SupportAction {
	return domain.SupportAction{Agent: agent, Action: domain.ActionRefund, TargetRef: "KD-0000000000",
		Reason: "geste commercial", Params: json.RawMessage(`{"amount_cents":1}`), MoneyCents: cents, NeedsApproval: needsApproval}
}

// The cap is checked under a lock of the agent: an action sent while
// another of the same agent is being recorded waits for it, then counts
// it. Without the lock, both would read the sum before either wrote.
func TestAgentCapWaitsForTheAgentsActionBeingRecorded(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	tx, err := db.BeginTxx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.Exec(`SELECT pg_advisory_xact_lock(hashtextextended('support-agent:' || 'alice', 0))`)
	require.NoError(t, err)
	_, err = tx.Exec(`INSERT INTO support_actions (agent, action, target_ref, reason, money_cents)
		VALUES ('alice', 'refund', 'KD-0000000000', 'geste commercial', 40000)`)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, _, err := db.InsertKeyedSupportAction(ctx, moneyAction("alice", 200_00, false), "cap-key-0001", 500_00)
		done <- err
	}()
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, db.Get(&waiting, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`))
		return waiting == 1
	}, 10*time.Second, 10*time.Millisecond, "the second action waits for the agent's lock")
	require.NoError(t, tx.Commit())
	err = <-done
	require.Equal(t, domain.ECodeAgentDailyCap, domain.ErrorCode(err), "%v", err)
	var n int
	require.NoError(t, db.Get(&n, `SELECT count(*) FROM support_actions WHERE agent = 'alice'`))
	require.Equal(t, 1, n, "the refused action is not recorded")

	// Another agent is not held by alice's cap.
	_, inserted, err := db.InsertKeyedSupportAction(ctx, moneyAction("bob", 200_00, false), "cap-key-0002", 500_00)
	require.NoError(t, err)
	require.True(t, inserted)
}

// The review is a second agent's, written once: the agent who asked is
// refused by the store and by the table itself; a declined action closes
// and cannot be approved; an approved one gets no second reviewer.
func TestReviewIsASecondAgentsOnce(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	first, _, err := db.InsertKeyedSupportAction(ctx, moneyAction("alice", 900_00, true), "review-key-0001", 5_000_00)
	require.NoError(t, err)
	id := first.ID

	_, err = db.ReviewSupportAction(ctx, id, "alice", true, "je valide", 5_000_00)
	require.Equal(t, domain.ECodeOwnAction, domain.ErrorCode(err))
	_, err = db.Exec(`UPDATE support_actions SET reviewed_by = agent, approved = true, review_reason = 'moi', reviewed_at = now() WHERE id = $1`, id)
	require.Error(t, err, "the table refuses an agent reviewing their own action")
	_, err = db.Exec(`UPDATE support_actions SET outcome = 'done', detail = 'OK', done_at = now() WHERE id = $1`, id)
	require.Error(t, err, "no outcome before a review")

	a, err := db.ReviewSupportAction(ctx, id, "bob", true, "panne vérifiée", 5_000_00)
	require.NoError(t, err)
	require.Equal(t, "bob", *a.ReviewedBy)
	require.True(t, *a.Approved)
	require.NoError(t, a.Check(domain.SupportActionClaim{ID: id, TargetRef: "KD-0000000000", Action: domain.ActionRefund, Agent: "alice"}))
	_, err = db.ReviewSupportAction(ctx, id, "carol", false, "trop tard", 5_000_00)
	require.Equal(t, domain.ECodeConflict, domain.ErrorCode(err))
	_, err = db.Exec(`UPDATE support_actions SET reviewed_by = 'carol' WHERE id = $1`, id)
	require.Error(t, err, "the review is written once")

	second, _, err := db.InsertKeyedSupportAction(ctx, moneyAction("alice", 900_00, true), "review-key-0002", 5_000_00)
	require.NoError(t, err)
	require.Error(t, second.Check(domain.SupportActionClaim{ID: second.ID, TargetRef: "KD-0000000000", Action: domain.ActionRefund, Agent: "alice"}),
		"a workflow refuses an action awaiting approval")
	d, err := db.ReviewSupportAction(ctx, second.ID, "bob", false, "aucune trace", 5_000_00)
	require.NoError(t, err)
	require.Equal(t, domain.OutcomeDeclined, *d.Outcome)
	_, err = db.ReviewSupportAction(ctx, second.ID, "carol", true, "si", 5_000_00)
	require.Equal(t, domain.ECodeConflict, domain.ErrorCode(err))
	open, err := db.AwaitingApproval(ctx)
	require.NoError(t, err)
	require.Len(t, open, 1, "the approved one, not run yet")
	require.Equal(t, id, open[0].ID)
}
