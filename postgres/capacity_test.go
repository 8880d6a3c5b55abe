package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

func addGPUHost(t *testing.T, db *postgres.DB, name, model string, gpus int) {
	t.Helper()
	_, err := db.Exec(`INSERT INTO gpu_hosts (name, address, host_key_fingerprint, gpu_model, gpu_count)
		VALUES ($1, $1 || '.example', 'SHA256:' || rpad(md5($1), 43, 'A'), $2, $3)`, name, model, gpus)
	require.NoError(t, err)
}

// hold is HoldCapacity where only its refusal matters.
func hold(capa postgres.Capacity, ref string, until time.Time) error {
	_, err := capa.HoldCapacity(context.Background(), ref, until)
	return err
}

func setStatus(t *testing.T, db *postgres.DB, ref, status string) {
	t.Helper()
	_, err := db.Exec(`UPDATE orders SET status = $2 WHERE ref = $1`, ref, status)
	require.NoError(t, err)
}

// No host: the hold (and so the payment request) is refused with a French
// message and the quote says the same; a host added, it is accepted, and a
// second order is refused while the first one's hold lasts. The hold lapses
// at its deadline unless the order is paid: a paid order keeps its host.
func TestCapacityHeldFromPaymentRequestUntilProvisioning(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := mkAccount(t, db, "cap@example.com")
	capa := postgres.Capacity{DB: db, Provisioner: postgres.ProvisionerSSH}
	a := mkOrder(t, db, acc.ID, "rtx-a5000", 1)
	b := mkOrder(t, db, acc.ID, "rtx-a5000", 1)
	until := time.Now().Add(time.Hour)

	err := hold(capa, a.Ref, until)
	require.Equal(t, domain.ECodeNoCapacity, domain.ErrorCode(err), "%v", err)
	require.Contains(t, err.Error(), "paiement n'est demandé")
	av, err := capa.Availability(ctx, "rtx-a5000", 1, 1)
	require.NoError(t, err)
	require.False(t, av.AvailableNow)

	addGPUHost(t, db, "gpu-1", "rtx-a5000", 1)
	av, err = capa.Availability(ctx, "rtx-a5000", 1, 1)
	require.NoError(t, err)
	require.True(t, av.AvailableNow)
	taken, err := capa.HoldCapacity(ctx, a.Ref, until)
	require.NoError(t, err)
	require.True(t, taken)
	taken, err = capa.HoldCapacity(ctx, a.Ref, until.Add(time.Minute))
	require.NoError(t, err)
	require.False(t, taken, "the order's own hold is extended, not taken again")

	// The quote now says what the payment request would: nothing free.
	av, err = capa.Availability(ctx, "rtx-a5000", 1, 1)
	require.NoError(t, err)
	require.False(t, av.AvailableNow)
	require.Equal(t, domain.ECodeNoCapacity, domain.ErrorCode(hold(capa, b.Ref, until)))

	// a is paid (its payment seen in time): its hold outlives the deadline.
	_, err = db.Exec(`UPDATE capacity_holds SET held_until = now() - interval '1 minute' WHERE order_ref = $1`, a.Ref)
	require.NoError(t, err)
	setStatus(t, db, a.Ref, domain.StatusPaymentDetected)
	require.Equal(t, domain.ECodeNoCapacity, domain.ErrorCode(hold(capa, b.Ref, until)))
	setStatus(t, db, a.Ref, domain.StatusPaid)
	require.Equal(t, domain.ECodeNoCapacity, domain.ErrorCode(hold(capa, b.Ref, until)))
	host, ok, err := postgres.HeldHost(ctx, db, a.Ref)
	require.NoError(t, err)
	require.True(t, ok)
	require.NotZero(t, host)

	// Unpaid at its deadline, the hold lapses and b may take the host.
	setStatus(t, db, a.Ref, domain.StatusAwaitingPayment)
	require.NoError(t, hold(capa, b.Ref, until))
	// A paid order is never held again (a retried activity takes nothing).
	setStatus(t, db, b.Ref, domain.StatusPaid)
	require.NoError(t, hold(capa, b.Ref, until))
	var holds int
	require.NoError(t, db.Get(&holds, `SELECT count(*) FROM capacity_holds WHERE order_ref = $1`, b.Ref))
	require.Equal(t, 1, holds)
}

// A hold that lapsed (window over, order unpaid) stays given back: when its
// order is paid late (a payment support attributes, a payment made in time
// but seen after the window), it does not count again against the order that
// took the host meanwhile.
func TestLapsedHoldDoesNotComeBackWhenPaidLate(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := mkAccount(t, db, "lapsed@example.com")
	capa := postgres.Capacity{DB: db, Provisioner: postgres.ProvisionerSSH}
	addGPUHost(t, db, "gpu-1", "rtx-a5000", 1)
	a := mkOrder(t, db, acc.ID, "rtx-a5000", 1)
	b := mkOrder(t, db, acc.ID, "rtx-a5000", 1)
	require.NoError(t, hold(capa, a.Ref, time.Now().Add(time.Hour)))
	_, err := db.Exec(`UPDATE capacity_holds SET held_until = now() - interval '1 minute' WHERE order_ref = $1`, a.Ref)
	require.NoError(t, err)
	require.NoError(t, hold(capa, b.Ref, time.Now().Add(time.Hour)), "a's hold lapsed: b takes the host")
	setStatus(t, db, b.Ref, domain.StatusPaid)
	setStatus(t, db, a.Ref, domain.StatusPaid)

	var live int
	require.NoError(t, db.Get(&live, `SELECT count(*) FROM live_capacity_holds`))
	require.Equal(t, 1, live, "one host, one hold that counts")
	held, ok, err := postgres.HeldHost(ctx, db, b.Ref)
	require.NoError(t, err)
	require.True(t, ok, "b keeps the host it holds")
	_, ok, err = postgres.HeldHost(ctx, db, a.Ref)
	require.NoError(t, err)
	require.False(t, ok, "a's lapsed hold counts again")
	// b's reservation still finds its host free of any other live hold.
	free, _, found, err := postgres.FreeHost(ctx, db, "rtx-a5000", 1, b.Ref, 0)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, held, free)
}

// 20 rounds of two orders asking for the last host at once: exactly one
// gets the hold.
func TestTwoOrdersRaceForTheLastHold(t *testing.T) {
	db := pgtest.NewDB(t)
	acc := mkAccount(t, db, "race@example.com")
	capa := postgres.Capacity{DB: db, Provisioner: postgres.ProvisionerSSH}
	addGPUHost(t, db, "gpu-last", "h100-80g", 1)
	for round := 0; round < 20; round++ {
		refs := []string{mkOrder(t, db, acc.ID, "h100-80g", 1).Ref, mkOrder(t, db, acc.ID, "h100-80g", 1).Ref}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, ref := range refs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = hold(capa, ref, time.Now().Add(time.Hour))
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else {
				require.Equal(t, domain.ECodeNoCapacity, domain.ErrorCode(err), "round %d: %v", round, err)
			}
		}
		require.Equal(t, 1, won, "round %d", round)
		// Both orders cancelled: their holds no longer count.
		for _, ref := range refs {
			setStatus(t, db, ref, domain.StatusCancelled)
		}
	}
}

// With the SSH driver an order is one whole host: a size no host has is
// refused at order time, with the sizes that exist.
func TestOrderMustFitOneHost(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	capa := postgres.Capacity{DB: db, Provisioner: postgres.ProvisionerSSH}
	addGPUHost(t, db, "gpu-b200-1", "b200", 8)
	addGPUHost(t, db, "gpu-b200-2", "b200", 8)
	fitErr := capa.CheckFits(ctx, "b200", 10, 2)
	err := fitErr
	require.Equal(t, domain.ECodeInvalid, domain.ErrorCode(err))
	require.True(t, strings.Contains(err.Error(), "4 lots (8 GPU)"), err.Error())
	t.Logf("10 B200: %v", err)
	require.NoError(t, capa.CheckFits(ctx, "b200", 8, 2))
	av, err := capa.Availability(ctx, "b200", 10, 2)
	require.NoError(t, err)
	require.False(t, av.AvailableNow)
	require.False(t, av.Fits)
	require.Equal(t, []int{8}, av.HostSizes)
	require.Equal(t, domain.ErrorMessage(fitErr), av.Message, "the quote says what the order would be told")
	av, err = capa.Availability(ctx, "b200", 8, 2)
	require.NoError(t, err)
	require.True(t, av.Fits && av.AvailableNow)
	require.Empty(t, av.Message)
	// The local driver counts GPUs: any size fits.
	require.NoError(t, postgres.Capacity{DB: db, Provisioner: postgres.ProvisionerLocal}.CheckFits(ctx, "b200", 10, 2))
}

// Paying from the balance goes through the same check: with no free host
// the payment is refused (no_capacity, not retried), nothing is debited and
// the order still awaits payment; with a host it is paid and the host held
// until provisioning.
func TestBalancePaymentRefusedWithoutCapacity(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, "bal@example.com")
	top := seedTopUp(t, db, acc, 10000)
	require.NoError(t, db.CreditTopUp(ctx, activities.CreditTopUpInput{TopUpRef: top, AccountID: acc, AmountCents: 10000}))
	ref := seedOrder(t, db, acc, 1)
	acts := &activities.Activities{Store: db, Capacity: postgres.Capacity{DB: db, Provisioner: postgres.ProvisionerSSH}}
	in := activities.PayFromBalanceInput{OrderRef: ref, AccountID: acc, AmountCents: 2357, At: time.Now()}

	err := acts.PayOrderFromBalance(ctx, in)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, domain.ECodeNoCapacity, appErr.Type())
	require.True(t, appErr.NonRetryable())
	b, err := db.Balance(ctx, acc)
	require.NoError(t, err)
	require.Equal(t, int64(10000), b.AvailableCents)
	var status string
	require.NoError(t, db.Get(&status, `SELECT status FROM orders WHERE ref = $1`, ref))
	require.Equal(t, domain.StatusAwaitingPayment, status)

	addGPUHost(t, db, "gpu-bal", "rtx-a5000", 1)
	// Refused for a short balance: the hold taken for it is given back at
	// once, not kept from other customers for its 15 minutes.
	short := in
	short.AmountCents = 10001
	require.ErrorAs(t, acts.PayOrderFromBalance(ctx, short), &appErr)
	require.Equal(t, domain.ECodeInsufficient, appErr.Type())
	_, held, err := postgres.HeldHost(ctx, db, ref)
	require.NoError(t, err)
	require.False(t, held, "a refused balance payment keeps its hold")

	require.NoError(t, acts.PayOrderFromBalance(ctx, in))
	require.NoError(t, db.Get(&status, `SELECT status FROM orders WHERE ref = $1`, ref))
	require.Equal(t, domain.StatusPaid, status)
	_, held, err = postgres.HeldHost(ctx, db, ref)
	require.NoError(t, err)
	require.True(t, held, "the paid order holds its host until provisioning")
}
