package workflows_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/provision/localpg"
	"github.com/kernodeck/kernodeck/secrets"
	"github.com/kernodeck/kernodeck/workflows"
)

// Customers extend their own rental (issue 39, item 2), on the real
// RentalWorkflow with the real activities, the local machine driver and
// the extensions' store on a real PostgreSQL: money moves once, in the
// transaction that checks and reserves the added days.

const extDay = time.Hour // a rental day in these tests

// extWorld is one customer with 500 USD on their balance and a 2-lot
// RTX A5000 rental of 3 days, its workflow in a test environment.
type extWorld struct {
	t     *testing.T
	ctx   context.Context
	db    *postgres.DB
	x     postgres.Extensions
	acts  *activities.Activities
	env   *testsuite.TestWorkflowEnvironment
	acc   int64
	order domain.Order
	n     int
}

func newExtWorld(t *testing.T) *extWorld {
	w := &extWorld{t: t, ctx: context.Background(), db: pgtest.NewDB(t)}
	kr, err := secrets.Parse("ext1:aW52YXJpYW50LXRlc3Qta2V5LW5vdC1mb3ItcHJvZCE=")
	require.NoError(t, err)
	w.x = postgres.Extensions{DB: w.db, Provisioner: postgres.ProvisionerLocal}
	w.env = invSuite().NewTestWorkflowEnvironment()
	w.env.SetTestTimeout(2 * time.Minute)
	w.acts = &activities.Activities{
		Store:       w.db,
		Provisioner: &localpg.Provisioner{Store: postgres.LocalGPUs{DB: w.db}, Host: "gpu-ext.local", Port: 2222, Keyring: kr},
		Extensions:  w.x,
		Now:         w.env.Now,
	}
	w.env.RegisterActivity(w.acts)
	w.env.RegisterWorkflow(workflows.RentalWorkflow)
	acc, err := w.db.CreateAccount(w.ctx, domain.Account{FirstName: "Ext", LastName: "Ension", Email: "ext@example.com"}, "x")
	require.NoError(t, err)
	_, err = w.db.VerifyEmail(w.ctx, acc.ID, acc.Email)
	require.NoError(t, err)
	w.acc = acc.ID
	w.credit(50000)
	q := domain.Quote{Configuration: domain.Configuration{Model: "rtx-a5000", Lots: 2, DurationDays: 3, Preset: "python"},
		GPUsPerLot: 1, TotalGPUs: 2, LotCents: 2357, TotalCents: 4714}
	w.order, err = w.db.CreateOrder(w.ctx, acc.ID, q)
	require.NoError(t, err)
	w.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.RentalWorkflowID(w.order.Ref)})
	return w
}

// credit puts cents on the balance through a credited top-up.
func (w *extWorld) credit(cents int64) {
	tu, err := w.db.CreateTopUp(w.ctx, w.acc, cents)
	require.NoError(w.t, err)
	require.NoError(w.t, w.db.CreditTopUp(w.ctx, domain.CreditTopUpInput{TopUpRef: tu.Ref, AccountID: w.acc, AmountCents: cents, At: time.Now()}))
}

func (w *extWorld) balance() int64 {
	b, err := w.db.Balance(w.ctx, w.acc)
	require.NoError(w.t, err)
	return b.AvailableCents
}

// price is the catalog's price of days more for the order.
func (w *extWorld) price(days int) int64 {
	item, err := w.db.CatalogItem(w.ctx, "rtx-a5000")
	require.NoError(w.t, err)
	lot, ok := item.PriceFor(days)
	require.True(w.t, ok)
	return lot * 2
}

// run starts the rental (paid from the balance at 1 minute: provisioned
// at once by the local driver, its period of 3 hours starting then) and
// runs it to its end, with at its own callbacks on the way.
func (w *extWorld) run(at func()) workflows.RentalStatus {
	w.env.RegisterDelayedCallback(func() {
		w.env.UpdateWorkflow(workflows.UpdatePayFromBalance, "pay", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { w.t.Errorf("pay refused: %v", err) },
			OnComplete: func(_ any, err error) { require.NoError(w.t, err) },
		}, workflows.PayFromBalance{})
	}, time.Minute)
	at()
	cfg := workflows.RentalConfig{ReminderOffsets: []time.Duration{30 * time.Minute}, ProvisioningAttempts: 1, Day: extDay}
	w.env.ExecuteWorkflow(workflows.RentalWorkflow, workflows.NewRentalInput(w.order, cfg))
	require.True(w.t, w.env.IsWorkflowCompleted())
	require.NoError(w.t, w.env.GetWorkflowError())
	var st workflows.RentalStatus
	require.NoError(w.t, w.env.GetWorkflowResult(&st))
	return st
}

// extend sends the customer's extension update at d and returns where
// its outcome lands.
func (w *extWorld) extend(d time.Duration, e domain.Extension) *error {
	w.n++
	out := new(error)
	*out = errors.New("update not completed")
	id := "extend-" + strings.Repeat("x", w.n)
	w.env.RegisterDelayedCallback(func() {
		w.env.UpdateWorkflow(workflows.UpdateExtend, id, &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { *out = err },
			OnComplete: func(_ any, err error) { *out = err },
		}, e)
	}, d)
	return out
}

// periodStartAt reads, at d, the period's start PostgreSQL shows.
func (w *extWorld) periodStartAt(d time.Duration) *time.Time {
	start := new(time.Time)
	w.env.RegisterDelayedCallback(func() {
		o, err := w.db.GetOrder(w.ctx, w.order.Ref)
		require.NoError(w.t, err)
		*start = o.PeriodStart.UTC()
	}, d)
	return start
}

func (w *extWorld) extension(ref string) domain.RentalExtension {
	e, err := w.x.Extension(w.ctx, ref, w.acc)
	require.NoError(w.t, err)
	return e
}

func (w *extWorld) count(query string, args ...any) int {
	var n int
	require.NoError(w.t, w.db.Get(&n, query, args...))
	return n
}

// Paid from the balance: the balance is debited once although the
// customer's request arrives twice, the end moves by 7 days, the
// reminder follows the new end, the timeline and the mail say it.
func TestCustomerExtensionFromBalanceDebitedOnce(t *testing.T) {
	w := newExtWorld(t)
	price := w.price(7)
	ref := domain.ExtensionRefFor(w.acc, "key-balance-1")
	e := domain.Extension{ExtensionRef: ref, Days: 7, Method: domain.ExtensionByBalance, AmountCents: price}
	first := w.extend(90*time.Minute, e)
	again := w.extend(100*time.Minute, e)
	var during workflows.RentalStatus
	w.env.RegisterDelayedCallback(func() {
		v, err := w.env.QueryWorkflow(workflows.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&during))
	}, 110*time.Minute)
	st := w.run(func() {})

	require.NoError(t, *first)
	require.NoError(t, *again, "the same extension asked again is answered, not refused")
	require.Equal(t, during.PeriodStart.Add(10*extDay), during.PeriodEnd, "3 days + 7 days")
	require.Equal(t, domain.StatusEnded, string(st.Status))
	require.Equal(t, int64(50000-4714)-price, w.balance(), "debited once")
	x := w.extension(ref)
	require.Equal(t, domain.ExtensionPaid, x.State)
	sameTime(t, during.PeriodEnd, *x.PeriodEnd)
	require.Equal(t, 1, w.count(`SELECT count(*) FROM ledger_transactions WHERE memo = $1`, "rental extension "+ref))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM timeline_events WHERE ref = $1 AND kind = 'extension_paid'`, w.order.Ref))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM mail_outbox WHERE ref = $1 AND template = 'extension_paid'`, w.order.Ref))
	// The reminder announced the new end, 30 minutes before it.
	var reminded []time.Time
	require.NoError(t, w.db.Select(&reminded, `SELECT at FROM timeline_events WHERE ref = $1 AND kind = $2`,
		w.order.Ref, domain.EventReminderSent))
	require.Len(t, reminded, 1)
	sameTime(t, during.PeriodEnd.Add(-30*time.Minute), reminded[0])
	o, err := w.db.GetOrder(w.ctx, w.order.Ref)
	require.NoError(t, err)
	sameTime(t, during.PeriodEnd, *o.PeriodEnd)
	sameTime(t, during.PeriodEnd, *o.EndedAt, "the rental ran to its new end")
}

// The machine is not free for the added days (the local inventory shrank
// below what the rental holds): refused with extension_unavailable, and
// nothing changes: no debit, no extension, the same end.
func TestCustomerExtensionRefusedWhenTheMachineIsNotFree(t *testing.T) {
	w := newExtWorld(t)
	price := w.price(3)
	ref := domain.ExtensionRefFor(w.acc, "key-refused-1")
	w.env.RegisterDelayedCallback(func() {
		_, err := w.db.Exec(`UPDATE gpu_inventory SET total_gpus = 1 WHERE gpu_model = 'rtx-a5000'`)
		require.NoError(t, err)
	}, 80*time.Minute)
	refused := w.extend(90*time.Minute, domain.Extension{ExtensionRef: ref, Days: 3, Method: domain.ExtensionByBalance, AmountCents: price})
	start := w.periodStartAt(2 * time.Hour)
	st := w.run(func() {})

	require.Equal(t, domain.ECodeExtensionUnavailable, applicationCode(*refused), "%v", *refused)
	sameTime(t, (*start).Add(3*extDay), st.PeriodEnd)
	require.Equal(t, int64(50000-4714), w.balance())
	_, err := w.x.Extension(w.ctx, ref, w.acc)
	require.ErrorIs(t, err, domain.ErrNotFound)
	require.Zero(t, w.count(`SELECT count(*) FROM timeline_events WHERE ref = $1 AND kind LIKE 'extension%'`, w.order.Ref))
}

// Paid by crypto: the days are reserved with the top-up that takes the
// payment; once that top-up is credited, the rental's workflow debits the
// credit and the end moves. Then a second one whose machine left service
// before its payment confirmed: it lapses, the end stays, and the amount
// received stays on the balance with the reason on the timeline.
func TestCustomerExtensionByCrypto(t *testing.T) {
	w := newExtWorld(t)
	price := w.price(3)
	okRef := domain.ExtensionRefFor(w.acc, "key-crypto-ok")
	goneRef := domain.ExtensionRefFor(w.acc, "key-crypto-gone")
	reserve := func(ref string) domain.RentalExtension {
		e, err := w.x.ReserveExtension(w.ctx, domain.ExtensionNew{Ref: ref, OrderRef: w.order.Ref, AccountID: w.acc, Days: 3,
			Method: domain.ExtensionByCrypto, AmountCents: price, HeldUntil: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		require.Equal(t, domain.ExtensionReserved, e.State)
		require.NotNil(t, e.TopUpRef)
		return e
	}
	creditTopUp := func(e domain.RentalExtension) {
		require.NoError(t, w.db.CreditTopUp(w.ctx, domain.CreditTopUpInput{TopUpRef: *e.TopUpRef, AccountID: w.acc, AmountCents: price, At: time.Now()}))
	}
	var balanceAfterFirst int64
	w.env.RegisterDelayedCallback(func() {
		e := reserve(okRef)
		// Another extension may not be asked while this one awaits payment.
		_, err := w.x.ReserveExtension(w.ctx, domain.ExtensionNew{Ref: goneRef, OrderRef: w.order.Ref, AccountID: w.acc, Days: 3,
			Method: domain.ExtensionByCrypto, AmountCents: price, HeldUntil: time.Now().Add(time.Hour)})
		require.Equal(t, domain.ECodeConflict, domain.ErrorCode(err), "%v", err)
		creditTopUp(e) // the payment confirmed: the balance credited
	}, 80*time.Minute)
	first := w.extend(90*time.Minute, domain.Extension{ExtensionRef: okRef, Days: 3, Method: domain.ExtensionByCrypto, AmountCents: price})
	w.env.RegisterDelayedCallback(func() {
		balanceAfterFirst = w.balance()
		e := reserve(goneRef)
		// The machine leaves service before the payment confirms.
		_, err := w.db.Exec(`UPDATE gpu_inventory SET total_gpus = 1 WHERE gpu_model = 'rtx-a5000'`)
		require.NoError(t, err)
		creditTopUp(e)
	}, 100*time.Minute)
	second := w.extend(110*time.Minute, domain.Extension{ExtensionRef: goneRef, Days: 3, Method: domain.ExtensionByCrypto, AmountCents: price})
	start := w.periodStartAt(2 * time.Hour)
	st := w.run(func() {})

	require.NoError(t, *first)
	require.NoError(t, *second, "a lapse is an answer, not a refusal: the payment is in")
	sameTime(t, (*start).Add(6*extDay), st.PeriodEnd, "3 days + the first extension's 3 days only")
	require.Equal(t, int64(50000-4714), balanceAfterFirst, "credited then debited for the first")
	require.Equal(t, int64(50000-4714)+price, w.balance(), "the second's payment stays on the balance")
	require.Equal(t, domain.ExtensionPaid, w.extension(okRef).State)
	gone := w.extension(goneRef)
	require.Equal(t, domain.ExtensionLapsed, gone.State)
	require.Contains(t, gone.Reason, "sort du service")
	var msg string
	require.NoError(t, w.db.Get(&msg, `SELECT message FROM timeline_events WHERE ref = $1 AND kind = 'extension_lapsed'`, w.order.Ref))
	require.Contains(t, msg, "non appliquée")
}

// applicationCode is the domain code an update was refused with.
func applicationCode(err error) string {
	var ae interface{ Type() string }
	if errors.As(err, &ae) {
		return ae.Type()
	}
	return ""
}

// sameTime compares a workflow's time with one PostgreSQL kept (to the
// microsecond).
func sameTime(t *testing.T, want, got time.Time, msg ...any) {
	t.Helper()
	require.Equal(t, want.UTC().Round(time.Microsecond), got.UTC().Round(time.Microsecond), msg...)
}
