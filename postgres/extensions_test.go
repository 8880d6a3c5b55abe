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

// The same host must be free for the added days (SSH driver): refused
// while paid orders wait for a host of that size that the free ones do
// not cover, and once the host is drained (retired after this rental);
// free again, the days are reserved, and a top-up that expires unpaid
// lapses the reservation in its event's transaction, with its reason on
// the order's timeline, so another may be asked.
func TestExtensionNeedsTheSameHostFree(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	x := postgres.Extensions{DB: db, Provisioner: postgres.ProvisionerSSH}
	acc := mkAccount(t, db, "ext-host@example.com")
	addGPUHost(t, db, "gpu-1", "rtx-a5000", 1)
	o := mkOrder(t, db, acc.ID, "rtx-a5000", 1)
	_, err := db.Exec(`UPDATE orders SET status = 'active', period_start = now(), period_end = now() + interval '3 days' WHERE ref = $1`, o.Ref)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO host_reservations (order_ref, host_id, host_name, unix_user, state)
		SELECT $1, id, name, 'kd1', 'active' FROM gpu_hosts WHERE name = 'gpu-1'`, o.Ref)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE gpu_hosts SET state = 'in_use' WHERE name = 'gpu-1'`)
	require.NoError(t, err)
	offers := func() domain.ExtensionOffers {
		t.Helper()
		f, err := x.ExtensionOffers(ctx, o.Ref, acc.ID, 24*time.Hour)
		require.NoError(t, err)
		return f
	}
	require.True(t, offers().Available)
	reserve := func(key string) (domain.RentalExtension, error) {
		return x.ReserveExtension(ctx, domain.ExtensionNew{Ref: domain.ExtensionRefFor(acc.ID, key), OrderRef: o.Ref, AccountID: acc.ID,
			Days: 3, Method: domain.ExtensionByCrypto, AmountCents: 2357, HeldUntil: time.Now().Add(time.Hour)})
	}

	// A paid order waits for a one-GPU host and none is free: the host
	// is theirs at this rental's end.
	w := mkOrder(t, db, acc.ID, "rtx-a5000", 1)
	_, err = db.Exec(`UPDATE orders SET status = 'waiting_for_machine', paid_at = now() WHERE ref = $1`, w.Ref)
	require.NoError(t, err)
	f := offers()
	require.False(t, f.Available)
	require.Equal(t, domain.ECodeExtensionUnavailable, f.Code)
	require.Contains(t, f.Message, "attendent une machine")
	_, err = reserve("key-line-0001")
	require.Equal(t, domain.ECodeExtensionUnavailable, domain.ErrorCode(err), "%v", err)
	setStatus(t, db, w.Ref, domain.StatusRefunded)

	// The host drained: it leaves service at the end of this rental.
	_, err = db.Exec(`UPDATE gpu_hosts SET state = 'draining' WHERE name = 'gpu-1'`)
	require.NoError(t, err)
	_, err = reserve("key-drain-0001")
	require.Equal(t, domain.ECodeExtensionUnavailable, domain.ErrorCode(err), "%v", err)
	require.Contains(t, domain.ErrorMessage(err), "sort du service")
	var n int
	require.NoError(t, db.Get(&n, `SELECT count(*) FROM rental_extensions`))
	require.Zero(t, n, "refusals write nothing")
	_, err = db.Exec(`UPDATE gpu_hosts SET state = 'in_use' WHERE name = 'gpu-1'`)
	require.NoError(t, err)

	// Reserved, with its top-up; the top-up expires unpaid.
	e, err := reserve("key-expire-01")
	require.NoError(t, err)
	require.Equal(t, domain.ExtensionReserved, e.State)
	require.Equal(t, domain.ECodeConflict, domain.ErrorCode(func() error { _, err := reserve("key-second-01"); return err }()))
	require.NoError(t, db.RecordTopUpEvent(ctx, domain.TopUpEvent{TopUpRef: *e.TopUpRef, Key: domain.KeyExpired,
		Kind: domain.EventExpired, Status: domain.TopUpExpired, At: time.Now(), Message: "Recharge expirée."}))
	e, err = x.Extension(ctx, e.Ref, acc.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ExtensionLapsed, e.State)
	require.Contains(t, e.Reason, "n'a pas été reçu avant l'échéance")
	var msg string
	require.NoError(t, db.Get(&msg, `SELECT message FROM timeline_events WHERE ref = $1 AND kind = 'extension_lapsed'`, o.Ref))
	require.Contains(t, msg, "non appliquée")
	require.True(t, offers().Available, "the lapsed reservation no longer blocks another")
	second, err := reserve("key-second-01")
	require.NoError(t, err)

	// The rental ends: the reservation awaiting payment lapses with it.
	require.NoError(t, db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: o.Ref, Key: domain.KeyRevoked,
		Kind: domain.EventAccessRevoked, Status: domain.StatusEnding, At: time.Now(), Message: "Période terminée."}))
	second, err = x.Extension(ctx, second.Ref, acc.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ExtensionLapsed, second.State)
	require.Contains(t, second.Reason, "la location se termine")
	tu, err := db.GetTopUp(ctx, *second.TopUpRef)
	require.NoError(t, err)
	require.Equal(t, domain.ExtensionLapsed, tu.ExtensionState, "its top-up's page says so")
}
