package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/workflows"
)

func mkOrder(t *testing.T, db *postgres.DB, accountID int64, model string, lots int) domain.Order {
	t.Helper()
	ctx := context.Background()
	item, err := db.CatalogItem(ctx, model)
	require.NoError(t, err)
	q, err := domain.PriceQuote(item, domain.Configuration{Model: model, Lots: lots, DurationDays: 3, Preset: "pytorch"})
	require.NoError(t, err)
	o, err := db.CreateOrder(ctx, accountID, q)
	require.NoError(t, err)
	return o
}

func TestCreateOrderWritesCreatedEvent(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	a := mkAccount(t, db, "o@example.com")
	o := mkOrder(t, db, a.ID, "b200", 2)

	require.True(t, strings.HasPrefix(o.Ref, "KD-"))
	require.Equal(t, workflows.RentalWorkflowID(o.Ref), o.WorkflowID)
	require.Equal(t, domain.StatusAwaitingPayment, o.Status)
	require.Equal(t, 4, o.TotalGPUs)
	require.Equal(t, int64(2*69900), o.TotalCents)
	require.Nil(t, o.WorkflowStartedAt)

	tl, err := db.Timeline(ctx, o.Ref, 0)
	require.NoError(t, err)
	require.Len(t, tl, 1)
	require.Equal(t, domain.EventCreated, tl[0].Kind)
	require.NotEmpty(t, tl[0].Data)

	later, err := db.Timeline(ctx, o.Ref, tl[0].ID)
	require.NoError(t, err)
	require.Empty(t, later)

	// Events without data scan fine.
	_, err = db.Exec(`INSERT INTO timeline_events (ref, idem_key, kind, message) VALUES ($1, 'x', 'paid', 'ok')`, o.Ref)
	require.NoError(t, err)
	later, err = db.Timeline(ctx, o.Ref, tl[0].ID)
	require.NoError(t, err)
	require.Len(t, later, 1)
	require.Nil(t, later[0].Data)
}

func TestOrderOwnershipListAndStart(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	a := mkAccount(t, db, "a@example.com")
	b := mkAccount(t, db, "b@example.com")
	o1 := mkOrder(t, db, a.ID, "rtx-a5000", 1)
	o2 := mkOrder(t, db, a.ID, "rtx-a5000", 3)

	got, err := db.OrderForAccount(ctx, o1.Ref, a.ID)
	require.NoError(t, err)
	require.Equal(t, o1.Ref, got.Ref)
	_, err = db.OrderForAccount(ctx, o1.Ref, b.ID)
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))
	_, err = db.GetOrder(ctx, "KD-NOPE")
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))

	list, err := db.ListOrders(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, list, 2)
	list, err = db.ListOrders(ctx, b.ID)
	require.NoError(t, err)
	require.Empty(t, list)

	// Both are unstarted; only old enough ones are returned.
	un, err := db.UnstartedOrders(ctx, time.Hour)
	require.NoError(t, err)
	require.Empty(t, un)
	un, err = db.UnstartedOrders(ctx, 0)
	require.NoError(t, err)
	require.Len(t, un, 2)

	require.NoError(t, db.MarkOrderWorkflowStarted(ctx, o1.Ref))
	un, err = db.UnstartedOrders(ctx, 0)
	require.NoError(t, err)
	require.Len(t, un, 1)
	require.Equal(t, o2.Ref, un[0].Ref)
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(db.MarkOrderWorkflowStarted(ctx, "KD-NOPE")))
}

func TestAccessAbsentThenPresent(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	a := mkAccount(t, db, "acc@example.com")
	o := mkOrder(t, db, a.ID, "rtx-a5000", 1)
	_, err := postgres.NewStore(db, nil, "").Access(ctx, o.Ref)
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err))
	_, err = db.Exec(`INSERT INTO order_access (order_ref, host, port, username, password, gpu_model_seen,
		gpu_count_seen, driver_version, cuda_version) VALUES ($1, 'gpu1.example', 22, 'kd', 'pw', 'RTX A5000', 1, '550', '12.4')`, o.Ref)
	require.NoError(t, err)
	acc, err := postgres.NewStore(db, nil, "").Access(ctx, o.Ref)
	require.NoError(t, err)
	require.Equal(t, "gpu1.example", acc.Host)
	require.Equal(t, 1, acc.GPUCount)
	require.Nil(t, acc.RevokedAt)
}

func TestTimelineListenerWakesSubscribers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := pgtest.NewDB(t)
	a := mkAccount(t, db, "l@example.com")
	o := mkOrder(t, db, a.ID, "rtx-a5000", 1)
	other := mkOrder(t, db, a.ID, "rtx-a5000", 1)

	l := db.NewTimelineListener(slog.Default())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	ch, unsub := l.Subscribe(o.Ref)
	defer unsub()

	// The listener connects asynchronously: insert until a wake-up arrives.
	deadline := time.After(10 * time.Second)
	for i := 0; ; i++ {
		_, err := db.Exec(`INSERT INTO timeline_events (ref, idem_key, kind, message) VALUES ($1, $2, 'paid', 'ok')`,
			o.Ref, "k"+strings.Repeat("x", i))
		require.NoError(t, err)
		select {
		case <-ch:
		case <-time.After(200 * time.Millisecond):
			continue
		case <-deadline:
			t.Fatal("no wake-up")
		}
		break
	}
	// Drain, then an event on another order does not wake this one.
	for len(ch) > 0 {
		<-ch
	}
	_, err := db.Exec(`INSERT INTO timeline_events (ref, idem_key, kind, message) VALUES ($1, 'z', 'paid', 'ok')`, other.Ref)
	require.NoError(t, err)
	select {
	case <-ch:
		t.Fatal("woken by another reference")
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	require.NoError(t, <-done)
}
