package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// waitFor puts order ref in the line for a machine, paid (its total) at paidAt.
func waitFor(t *testing.T, db *postgres.DB, ref string, paidAt time.Time) {
	t.Helper()
	_, err := db.Exec(`UPDATE orders SET status = $2, paid_at = $3, paid_cents = total_cents WHERE ref = $1`,
		ref, domain.StatusWaitingForMachine, paidAt)
	require.NoError(t, err)
}

// The line of paid orders without a machine: one line per model and size,
// in payment order (paid_at, then reference), positions as
// kd_waiting_ahead counts them; an order served or refunded leaves its
// line and those behind it move up. The metrics' view counts every model of
// the catalog (0 when none waits) and the waits past the alert threshold.
func TestMachineQueueLinesInPaymentOrder(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	grace := mkAccount(t, db, "grace@example.com")
	ada := mkAccount(t, db, "ada@example.com")
	now := time.Now().UTC().Truncate(time.Second)
	early := now.Add(-50 * time.Minute)

	first := mkOrder(t, db, grace.ID, "rtx-a5000", 1)
	tied := mkOrder(t, db, ada.ID, "rtx-a5000", 1)
	late := mkOrder(t, db, ada.ID, "rtx-a5000", 1)
	pair := mkOrder(t, db, grace.ID, "rtx-a5000", 2)
	other := mkOrder(t, db, ada.ID, "b200", 1)
	mkOrder(t, db, grace.ID, "rtx-a5000", 1) // unpaid: in no line
	waitFor(t, db, late.Ref, now.Add(-10*time.Minute))
	waitFor(t, db, first.Ref, early)
	waitFor(t, db, tied.Ref, early) // same instant: the reference decides
	waitFor(t, db, pair.Ref, now.Add(-40*time.Minute))
	waitFor(t, db, other.Ref, now.Add(-5*time.Minute))
	if tied.Ref < first.Ref {
		first, tied = tied, first
	}

	type row struct {
		ref      string
		model    string
		gpus     int
		position int
		email    string
	}
	check := func(want []row) {
		t.Helper()
		line, err := db.MachineQueue(ctx)
		require.NoError(t, err)
		require.Len(t, line, len(want))
		for i, w := range want {
			got := line[i]
			require.Equal(t, w, row{got.Ref, got.Model, got.TotalGPUs, got.Position, got.Email}, "row %d", i)
			var ahead int
			require.NoError(t, db.GetContext(ctx, &ahead, `SELECT kd_waiting_ahead($1, $2, $3)`, got.Model, got.TotalGPUs, got.Ref))
			require.Equal(t, ahead+1, got.Position, "%s: position and kd_waiting_ahead", got.Ref)
			require.NotZero(t, got.PaidCents)
		}
	}
	emailOf := map[string]string{}
	for _, o := range []domain.Order{first, tied} {
		emailOf[o.Ref] = map[int64]string{grace.ID: grace.Email, ada.ID: ada.Email}[o.AccountID]
	}
	check([]row{
		{other.Ref, "b200", other.TotalGPUs, 1, ada.Email},
		{first.Ref, "rtx-a5000", 1, 1, emailOf[first.Ref]},
		{tied.Ref, "rtx-a5000", 1, 2, emailOf[tied.Ref]},
		{late.Ref, "rtx-a5000", 1, 3, ada.Email},
		{pair.Ref, "rtx-a5000", 2, 1, grace.Email},
	})
	line, err := db.MachineQueue(ctx)
	require.NoError(t, err)
	require.Equal(t, early, line[1].PaidAt.UTC())
	require.InDelta(t, 50*60, line[1].WaitedSeconds, 60)
	require.InDelta(t, 10*60, line[3].WaitedSeconds, 60)

	stats := func() map[string]postgres.MachineQueueStat {
		t.Helper()
		s, err := db.MachineQueueStats(ctx, 30*time.Minute)
		require.NoError(t, err)
		out := map[string]postgres.MachineQueueStat{}
		for _, st := range s {
			out[st.Model] = st
		}
		return out
	}
	s := stats()
	require.EqualValues(t, 4, s["rtx-a5000"].Waiting)
	require.EqualValues(t, 3, s["rtx-a5000"].Overdue, "50, 50 and 40 minutes past 30")
	require.InDelta(t, 50*60, s["rtx-a5000"].OldestSeconds, 60)
	require.EqualValues(t, 1, s["b200"].Waiting)
	require.EqualValues(t, 0, s["b200"].Overdue)
	require.InDelta(t, 5*60, s["b200"].OldestSeconds, 60)
	require.Contains(t, s, "rtx-4090", "a model nobody waits for is counted at 0")
	require.Equal(t, postgres.MachineQueueStat{Model: "rtx-4090"}, s["rtx-4090"])

	// The first is served, the pair refunded to the balance: both leave
	// their line, the others move up.
	_, err = db.Exec(`UPDATE orders SET status = $2 WHERE ref = $1`, first.Ref, domain.StatusProvisioning)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE orders SET status = $2, refunded_cents = paid_cents WHERE ref = $1`, pair.Ref, domain.StatusRefunded)
	require.NoError(t, err)
	check([]row{
		{other.Ref, "b200", other.TotalGPUs, 1, ada.Email},
		{tied.Ref, "rtx-a5000", 1, 1, emailOf[tied.Ref]},
		{late.Ref, "rtx-a5000", 1, 2, ada.Email},
	})
	s = stats()
	require.EqualValues(t, 2, s["rtx-a5000"].Waiting)
	require.EqualValues(t, 1, s["rtx-a5000"].Overdue)
}
