package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// seedAccount inserts an account directly (the account store is tested elsewhere).
func seedAccount(t *testing.T, db *postgres.DB, email string) int64 {
	t.Helper()
	var id int64
	if err := db.Get(&id, `INSERT INTO accounts (first_name, last_name, email, password_hash)
		VALUES ('Ada', 'Lovelace', $1, 'x') RETURNING id`, email); err != nil {
		t.Fatal(err)
	}
	return id
}

// seedOrder inserts an unpaid rtx-a5000 order for 3 days x lots.
func seedOrder(t *testing.T, db *postgres.DB, accountID int64, lots int) string {
	t.Helper()
	ref := domain.NewRef(domain.OrderRefPrefix)
	if _, err := db.Exec(`INSERT INTO orders (ref, account_id, gpu_model, lots, gpus_per_lot, total_gpus,
		duration_days, preset, lot_cents, total_cents, status, workflow_id)
		VALUES ($1, $2, 'rtx-a5000', $3, 1, $3, 3, 'python', 2357, 2357 * $3, 'awaiting_payment', 'rental-' || $1)`,
		ref, accountID, lots); err != nil {
		t.Fatal(err)
	}
	return ref
}

func seedTopUp(t *testing.T, db *postgres.DB, accountID, cents int64) string {
	t.Helper()
	ref := domain.NewRef(domain.TopUpRefPrefix)
	if _, err := db.Exec(`INSERT INTO topups (ref, account_id, amount_cents, status, workflow_id)
		VALUES ($1, $2, $3, 'awaiting_payment', 'topup-' || $1)`, ref, accountID, cents); err != nil {
		t.Fatal(err)
	}
	return ref
}

func ledgerSum(t *testing.T, db *postgres.DB) int64 {
	t.Helper()
	var s int64
	if err := db.Get(&s, `SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entries`); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCreditTopUpOnceAndPendingApart(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, "a@example.com")
	ref := seedTopUp(t, db, acc, 10000)

	b, err := db.Balance(ctx, acc)
	if err != nil {
		t.Fatal(err)
	}
	if b.AvailableCents != 0 || b.PendingTopUpsCents != 10000 {
		t.Fatalf("before credit: %+v", b)
	}
	in := activities.CreditTopUpInput{TopUpRef: ref, AccountID: acc, AmountCents: 10000, At: time.Now()}
	for i := 0; i < 3; i++ { // a retried activity
		if err := db.CreditTopUp(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	b, err = db.Balance(ctx, acc)
	if err != nil {
		t.Fatal(err)
	}
	if b.AvailableCents != 10000 || b.PendingTopUpsCents != 0 || b.AvailableUSD != "100.00" {
		t.Fatalf("after credit: %+v", b)
	}
	var events int
	if err := db.Get(&events, `SELECT count(*) FROM timeline_events WHERE ref = $1`, ref); err != nil {
		t.Fatal(err)
	}
	if events != 1 {
		t.Fatalf("credited events = %d, want 1", events)
	}
	if s := ledgerSum(t, db); s != 0 {
		t.Fatalf("ledger does not balance: %d", s)
	}
	// A wrong amount is refused, not credited.
	if err := db.CreditTopUp(ctx, activities.CreditTopUpInput{TopUpRef: ref, AccountID: acc, AmountCents: 50000}); domain.ErrorCode(err) != domain.ECodeConflict {
		t.Fatalf("wrong amount: %v", err)
	}
}

// Twenty parallel balance payments against a balance that covers one:
// exactly one succeeds, the ledger stays balanced, the balance never goes
// negative.
func TestConcurrentBalancePaymentsNeverOverdraw(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, "b@example.com")
	top := seedTopUp(t, db, acc, 10000)
	if err := db.CreditTopUp(ctx, activities.CreditTopUpInput{TopUpRef: top, AccountID: acc, AmountCents: 10000}); err != nil {
		t.Fatal(err)
	}
	// Each order costs 3 lots x 23.57 = 70.71 USD: the 100 USD cover one.
	const n = 20
	refs := make([]string, n)
	for i := range refs {
		refs[i] = seedOrder(t, db, acc, 3)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range refs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			errs[i] = db.PayOrderFromBalance(ctx, activities.PayFromBalanceInput{
				OrderRef: refs[i], AccountID: acc, AmountCents: 7071, At: time.Now()})
		}(i)
	}
	close(start)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch domain.ErrorCode(err) {
		case "":
			ok++
		case domain.ECodeInsufficient:
		default:
			t.Errorf("payment %d: unexpected error %v", i, err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d payments succeeded, want exactly 1", ok)
	}
	b, err := db.Balance(ctx, acc)
	if err != nil {
		t.Fatal(err)
	}
	if b.AvailableCents != 10000-7071 {
		t.Fatalf("available = %d, want %d", b.AvailableCents, 10000-7071)
	}
	if s := ledgerSum(t, db); s != 0 {
		t.Fatalf("ledger does not balance: %d", s)
	}
	var paid int
	if err := db.Get(&paid, `SELECT count(*) FROM orders WHERE status = 'paid' AND payment_method = 'balance'`); err != nil {
		t.Fatal(err)
	}
	if paid != 1 {
		t.Fatalf("%d orders paid, want 1", paid)
	}
}

func TestPayFromBalanceIsIdempotentAndAtomic(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, "c@example.com")
	top := seedTopUp(t, db, acc, 10000)
	if err := db.CreditTopUp(ctx, activities.CreditTopUpInput{TopUpRef: top, AccountID: acc, AmountCents: 10000}); err != nil {
		t.Fatal(err)
	}
	ref := seedOrder(t, db, acc, 1)
	in := activities.PayFromBalanceInput{OrderRef: ref, AccountID: acc, AmountCents: 2357, At: time.Now()}
	for i := 0; i < 2; i++ {
		if err := db.PayOrderFromBalance(ctx, in); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	b, _ := db.Balance(ctx, acc)
	if b.AvailableCents != 10000-2357 {
		t.Fatalf("available = %d after a retried payment", b.AvailableCents)
	}
	o, err := db.GetOrder(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != domain.StatusPaid || o.PaidCents != 2357 || o.PaymentMethod == nil || *o.PaymentMethod != "balance" {
		t.Fatalf("order after payment: %+v", o)
	}
	// Another customer's order is not found and nothing moves.
	other := seedAccount(t, db, "d@example.com")
	if err := db.PayOrderFromBalance(ctx, activities.PayFromBalanceInput{OrderRef: seedOrder(t, db, other, 1), AccountID: acc, AmountCents: 2357}); domain.ErrorCode(err) != domain.ECodeNotFound {
		t.Fatalf("other's order: %v", err)
	}
	// Insufficient balance leaves the order unpaid.
	big := seedOrder(t, db, acc, 10)
	err = db.PayOrderFromBalance(ctx, activities.PayFromBalanceInput{OrderRef: big, AccountID: acc, AmountCents: 23570})
	if domain.ErrorCode(err) != domain.ECodeInsufficient {
		t.Fatalf("insufficient: %v", err)
	}
	var st string
	_ = db.Get(&st, `SELECT status FROM orders WHERE ref = $1`, big)
	if st != domain.StatusAwaitingPayment {
		t.Fatalf("status after refused payment = %s", st)
	}
}

// The ledger half of refunds of rentals started before refunds became one
// transition posts once per action (the workflow bounds the amount).
func TestLegacyRefundOncePerAction(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, "e@example.com")
	top := seedTopUp(t, db, acc, 10000)
	_ = db.CreditTopUp(ctx, activities.CreditTopUpInput{TopUpRef: top, AccountID: acc, AmountCents: 10000})
	ref := seedOrder(t, db, acc, 2)
	if err := db.PayOrderFromBalance(ctx, activities.PayFromBalanceInput{OrderRef: ref, AccountID: acc, AmountCents: 4714}); err != nil {
		t.Fatal(err)
	}
	r := activities.RefundInput{Ref: ref, AccountID: acc, AmountCents: 4000, ActionID: 7, Agent: "alice", Reason: "test"}
	for i := 0; i < 2; i++ {
		if err := db.RefundToBalance(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := db.Balance(ctx, acc)
	if b.AvailableCents != 10000-4714+4000 {
		t.Fatalf("available after refund = %d", b.AvailableCents)
	}
	var refunded int64
	if err := db.Get(&refunded, `SELECT refunded_cents FROM orders WHERE ref = $1`, ref); err != nil || refunded != 4000 {
		t.Fatalf("refunded_cents = %d (%v)", refunded, err)
	}
	if s := ledgerSum(t, db); s != 0 {
		t.Fatalf("ledger does not balance: %d", s)
	}
}

func TestLedgerIsAppendOnlyAndBalanced(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, "f@example.com")
	top := seedTopUp(t, db, acc, 10000)
	if err := db.CreditTopUp(ctx, activities.CreditTopUpInput{TopUpRef: top, AccountID: acc, AmountCents: 10000}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE ledger_entries SET amount_cents = amount_cents * 2`,
		`DELETE FROM ledger_entries`,
		`DELETE FROM ledger_transactions`,
		`TRUNCATE ledger_entries CASCADE`,
	} {
		if _, err := db.Exec(q); err == nil {
			t.Errorf("%q was accepted", q)
		}
	}
	// An unbalanced transaction is refused at commit.
	tx := db.MustBegin()
	var id int64
	if err := tx.Get(&id, `INSERT INTO ledger_transactions (idempotency_key, kind) VALUES ('x', 'refund') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO ledger_entries (transaction_id, ledger_account, amount_cents) VALUES ($1, $2, 500)`,
		id, fmt.Sprintf("customer:%d", acc)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err == nil {
		t.Fatal("unbalanced ledger transaction committed")
	}
	b, _ := db.Balance(ctx, acc)
	if b.AvailableCents != 10000 {
		t.Fatalf("available = %d", b.AvailableCents)
	}
}
