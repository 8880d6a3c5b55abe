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

// endingOrder makes an order of account a ending (its teardown running).
func endingOrder(t *testing.T, db *postgres.DB, accountID int64) domain.Order {
	t.Helper()
	o := mkOrder(t, db, accountID, "rtx-a5000", 1)
	_, err := db.Exec(`UPDATE orders SET status = $2, paid_cents = total_cents WHERE ref = $1`, o.Ref, domain.StatusEnding)
	require.NoError(t, err)
	return o
}

// recordTeardownStuck writes the "teardown_stuck" event as the rental
// workflow does (teardownStep), at at.
func recordTeardownStuck(t *testing.T, db *postgres.DB, ref string, data map[string]any, at time.Time) {
	t.Helper()
	require.NoError(t, db.RecordOrderEvent(context.Background(), domain.OrderEvent{OrderRef: ref,
		Key: domain.KeyTeardownStuck, Kind: domain.EventTeardownStuck, Message: "La fin de location prend du retard.",
		Data: data, At: at}))
}

// The rentals whose teardown is stuck are in support's queue: ending with
// a "teardown_stuck" event, the longest stuck first (since: the event's
// time), with what failed as the event recorded it and the host still
// held. An ending order without the event (a teardown running normally)
// and an ended one are not; an order leaves the list once its teardown
// completes.
func TestTeardownsStuckListsEndingOrdersWithTheEvent(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	grace := mkAccount(t, db, "grace@example.com")
	ada := mkAccount(t, db, "ada@example.com")
	now := time.Now().UTC().Truncate(time.Second)

	stuck := endingOrder(t, db, grace.ID)
	recordTeardownStuck(t, db, stuck.Ref, map[string]any{"step": "RevokeAccess", "error": "ssh: dial tcp 10.0.0.7:22: i/o timeout"},
		now.Add(-2*time.Hour))
	_, err := db.Exec(`INSERT INTO host_reservations (order_ref, host_name, unix_user, state) VALUES ($1, 'gpu-host-7', 'kd_c7', 'active')`, stuck.Ref)
	require.NoError(t, err)
	later := endingOrder(t, db, ada.ID) // stuck later, no data: nothing said of what failed
	recordTeardownStuck(t, db, later.Ref, nil, now.Add(-time.Hour))
	endingOrder(t, db, ada.ID) // teardown running, not stuck
	ended := endingOrder(t, db, grace.ID)
	recordTeardownStuck(t, db, ended.Ref, map[string]any{"step": "ReleaseCapacity", "error": "boom"}, now.Add(-3*time.Hour))
	_, err = db.Exec(`UPDATE orders SET status = $2 WHERE ref = $1`, ended.Ref, domain.StatusEnded)
	require.NoError(t, err)

	list, err := db.TeardownsStuck(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2, "%+v", list)
	require.Equal(t, domain.StuckTeardown{
		StuckOrder: domain.StuckOrder{Ref: stuck.Ref, Email: "grace@example.com", Model: "rtx-a5000", TotalGPUs: stuck.TotalGPUs,
			TotalCents: stuck.TotalCents, PaidCents: stuck.TotalCents, Since: list[0].Since},
		Step: "RevokeAccess", Error: "ssh: dial tcp 10.0.0.7:22: i/o timeout", HostName: "gpu-host-7"}, list[0])
	require.True(t, list[0].Since.Equal(now.Add(-2*time.Hour)), "since %v", list[0].Since)
	require.Equal(t, later.Ref, list[1].Ref)
	require.Equal(t, "ada@example.com", list[1].Email)
	require.True(t, list[1].Since.Equal(now.Add(-time.Hour)), "since %v", list[1].Since)
	require.Empty(t, list[1].Step)
	require.Empty(t, list[1].Error)
	require.Empty(t, list[1].HostName)

	// The teardown completes: the order is ended and leaves the list.
	require.NoError(t, db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: stuck.Ref, Key: domain.KeyEnded, Kind: domain.EventEnded,
		Message: "Location terminée.", Status: domain.StatusEnded, At: now, EndedAt: &now}))
	list, err = db.TeardownsStuck(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, later.Ref, list[0].Ref)
}
