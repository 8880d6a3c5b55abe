package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// A workflow's batch of events (activities.RecordOrderEvents) that moves
// no money is written in one transaction. A batch that moves money writes
// each event in its own, so a refused payment keeps the events before it.
func TestRecordOrderEventsOneTransactionUnlessMoneyMoves(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := mkAccount(t, db, "events@example.com")
	o := mkOrder(t, db, acc.ID, "b200", 1)
	acts := &activities.Activities{Store: db}
	ev := func(key, status string) domain.OrderEvent {
		return domain.OrderEvent{OrderRef: o.Ref, Key: key, Kind: domain.EventProvisioningStep,
			Message: "étape " + key, Status: status, At: time.Now().UTC()}
	}
	require.NoError(t, acts.RecordOrderEvents(ctx, []domain.OrderEvent{ev("paid", domain.StatusPaid), ev("start", domain.StatusProvisioning)}))

	pay := ev("debit", "")
	pay.Posting = &domain.Posting{Kind: domain.PostingOrderPayment, AccountID: acc.ID, Cents: 100}
	err := acts.RecordOrderEvents(ctx, []domain.OrderEvent{ev("before", ""), pay})
	require.Error(t, err, "a debit of an empty balance")

	var rows []struct {
		Key string `db:"idem_key"`
		Tx  string `db:"tx"`
	}
	require.NoError(t, db.Select(&rows, `SELECT idem_key, xmin::text AS tx FROM timeline_events
		WHERE ref = $1 AND kind = $2 ORDER BY id`, o.Ref, domain.EventProvisioningStep))
	require.Len(t, rows, 3)
	require.Equal(t, []string{"paid", "start", "before"}, []string{rows[0].Key, rows[1].Key, rows[2].Key})
	require.Equal(t, rows[0].Tx, rows[1].Tx, "events moving no money: one transaction")
	var status string
	require.NoError(t, db.Get(&status, `SELECT status FROM orders WHERE ref = $1`, o.Ref))
	require.Equal(t, domain.StatusProvisioning, status)
}

// A provisioning step's start or end changes nothing on its order: it is
// written to the timeline, once, and leaves the order's row as it is (no
// new row version, updated_at unchanged). It needs the order to exist, as
// every order event does; an event that changes the order still updates it.
func TestStepEventLeavesTheOrderRow(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := mkAccount(t, db, "steps@example.com")
	o := mkOrder(t, db, acc.ID, "b200", 1)
	type row struct {
		Tx      string    `db:"tx"`
		Updated time.Time `db:"updated_at"`
	}
	read := func() (r row) {
		t.Helper()
		require.NoError(t, db.Get(&r, `SELECT xmin::text AS tx, updated_at FROM orders WHERE ref = $1`, o.Ref))
		return r
	}
	before := read()
	in := activities.ProvisionInput{OrderRef: o.Ref, GPUModel: "b200", GPUs: 1, Preset: "python", Attempt: 1}
	step := in.StepStarted(activities.StepPrepare)
	step.At = time.Now().UTC()
	require.False(t, step.ChangesOrder())
	for range 2 {
		require.NoError(t, db.RecordOrderEvent(ctx, step))
	}
	var n int
	require.NoError(t, db.Get(&n, `SELECT count(*) FROM timeline_events WHERE ref = $1 AND idem_key = $2`, o.Ref, step.Key))
	require.Equal(t, 1, n, "written once")
	require.Equal(t, before, read(), "the order's row is left as it was")

	lost := step
	lost.OrderRef = "KD-NOPE"
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(db.RecordOrderEvent(ctx, lost)))
	require.NoError(t, db.Get(&n, `SELECT count(*) FROM timeline_events WHERE ref = 'KD-NOPE'`))
	require.Zero(t, n, "no event for an order that does not exist")

	moved := in.StepStarted(activities.StepReserve)
	moved.Status = domain.StatusProvisioning
	require.NoError(t, db.RecordOrderEvent(ctx, moved))
	after := read()
	require.NotEqual(t, before.Tx, after.Tx, "an event that changes the order updates its row")
	var status string
	require.NoError(t, db.Get(&status, `SELECT status FROM orders WHERE ref = $1`, o.Ref))
	require.Equal(t, domain.StatusProvisioning, status)
}
