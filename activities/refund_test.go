package activities_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// refundFixture is an account with an unpaid order on a fresh database,
// and the activities on it.
type refundFixture struct {
	db   *postgres.DB
	acts *activities.Activities
	acc  int64
	ref  string
}

func newRefundFixture(t *testing.T) refundFixture {
	t.Helper()
	db := pgtest.NewDB(t)
	acc, ref := pgtest.AccountWithOrder(t, db, "refund@example.com")
	return refundFixture{db: db, acts: &activities.Activities{Store: db}, acc: acc, ref: ref}
}

// refund runs the activity as the worker does, in Temporal's activity
// test environment, with ctx's deadline and cancellation.
func (f refundFixture) refund(t *testing.T, ctx context.Context, in activities.RefundInput) error {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetTestTimeout(time.Minute)
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	env.RegisterActivity(f.acts)
	_, err := env.ExecuteActivity(f.acts.RefundToBalance, in)
	return err
}

// state is the customer's available balance, the order's refunded cents
// and the sum of the whole ledger (0 when it balances).
func (f refundFixture) state(t *testing.T) (available, refunded, ledger int64) {
	t.Helper()
	b, err := f.db.Balance(context.Background(), f.acc)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.db.Get(&refunded, `SELECT refunded_cents FROM orders WHERE ref = $1`, f.ref); err != nil {
		t.Fatal(err)
	}
	if err := f.db.Get(&ledger, `SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entries`); err != nil {
		t.Fatal(err)
	}
	return b.AvailableCents, refunded, ledger
}

// A refund credits the balance and the order's refunded cents once per
// support action, whatever the retries; the ledger balances.
func TestRefundToBalanceOncePerAction(t *testing.T) {
	f := newRefundFixture(t)
	ctx := context.Background()
	first := activities.RefundInput{Ref: f.ref, AccountID: f.acc, AmountCents: 1000, ActionID: 1, Agent: "a", Reason: "geste", At: time.Now()}
	for range 2 { // the activity retried after its answer was lost
		if err := f.refund(t, ctx, first); err != nil {
			t.Fatal(err)
		}
	}
	if avail, refunded, ledger := f.state(t); avail != 1000 || refunded != 1000 || ledger != 0 {
		t.Fatalf("after one refund retried: available %d, refunded %d, ledger %d; want 1000, 1000, 0", avail, refunded, ledger)
	}
	second := first
	second.ActionID, second.AmountCents = 2, 357
	if err := f.refund(t, ctx, second); err != nil {
		t.Fatal(err)
	}
	if avail, refunded, ledger := f.state(t); avail != 1357 || refunded != 1357 || ledger != 0 {
		t.Fatalf("after a second action: available %d, refunded %d, ledger %d; want 1357, 1357, 0", avail, refunded, ledger)
	}
}

// What the store refuses is not retried (a non-retryable error with the
// domain's code) and moves nothing; a failure that may pass (here the
// caller gave up) stays retryable.
func TestRefundToBalanceRefusalsAreFinal(t *testing.T) {
	f := newRefundFixture(t)
	ok := activities.RefundInput{Ref: f.ref, AccountID: f.acc, AmountCents: 1000, ActionID: 1, Agent: "a", Reason: "geste", At: time.Now()}
	zero, stranger := ok, ok
	zero.AmountCents = 0
	stranger.AccountID = f.acc + 1000
	for _, c := range []struct {
		name string
		in   activities.RefundInput
		code string
	}{{"no amount", zero, domain.ECodeInvalid}, {"no such account", stranger, domain.ECodeNotFound}} {
		err := f.refund(t, context.Background(), c.in)
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || !ae.NonRetryable() || ae.Type() != c.code {
			t.Errorf("%s: %v, want a non-retryable %s", c.name, err, c.code)
		}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	err := f.refund(t, cancelled, ok)
	var ae *temporal.ApplicationError
	if err == nil || errors.As(err, &ae) && ae.NonRetryable() {
		t.Errorf("cancelled: %v, want a retryable error", err)
	}
	if avail, refunded, ledger := f.state(t); avail != 0 || refunded != 0 || ledger != 0 {
		t.Fatalf("refusals moved money: available %d, refunded %d, ledger %d", avail, refunded, ledger)
	}
}
