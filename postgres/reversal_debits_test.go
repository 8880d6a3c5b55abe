package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// balanceOf reads acc's balance and checks the ledger still balances.
func balanceOf(t *testing.T, db *postgres.DB, acc int64) domain.Balance {
	t.Helper()
	b, err := db.Balance(context.Background(), acc)
	if err != nil {
		t.Fatal(err)
	}
	if s := ledgerSum(t, db); s != 0 {
		t.Fatalf("ledger does not balance: %d", s)
	}
	return b
}

func takenBack(t *testing.T, db *postgres.DB, ref string) []int64 {
	t.Helper()
	var amounts []int64
	if err := db.Select(&amounts, `SELECT (data->>'amount_cents')::bigint FROM timeline_events
		WHERE ref = $1 AND kind = $2 ORDER BY id`, ref, domain.EventBalanceTakenBack); err != nil {
		t.Fatal(err)
	}
	return amounts
}

// Money refunded to a balance from a payment the chain then removes is
// debited from it, once however often the reversal is written; already
// spent, the balance shows a debt, which the next top-up covers first;
// the payment mined again gives it back.
func TestRefundOfAReversedPaymentTakenBackFromTheBalance(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, "reversed@example.com")
	ref := seedOrder(t, db, acc, 1)
	const pk = "bitcoin:tx1:0"
	late := domain.NewException{Reason: domain.ExceptionLate, PaymentKey: pk, Network: "bitcoin",
		TxID: "tx1", Asset: "BTC", AmountBase: "36262", AmountCents: 3118}
	if err := db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: ref, Key: domain.KeyConfirmed(pk), Kind: domain.EventPaymentConfirmed,
		Message: "late", At: time.Now(), Exceptions: []domain.NewException{late}}); err != nil {
		t.Fatal(err)
	}
	open, err := db.OpenExceptions(ctx)
	if err != nil || len(open) != 1 {
		t.Fatalf("queue: %+v %v", open, err)
	}
	if err := db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: ref, Key: domain.KeyExceptionRefund(1), Kind: domain.EventRefunded,
		Message: "r", At: time.Now(), Use: &domain.ExceptionUse{ExceptionID: open[0].ID, Cents: 3118, Refund: true},
		Posting: &domain.Posting{Kind: domain.PostingRefund, AccountID: acc, Cents: 3118}}); err != nil {
		t.Fatal(err)
	}
	// Spent: another order paid from the balance.
	other := seedOrder(t, db, acc, 1)
	if err := db.PayOrderFromBalance(ctx, domain.PayFromBalanceInput{OrderRef: other, AccountID: acc, AmountCents: 2357, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if b := balanceOf(t, db, acc); b.AvailableCents != 761 || b.DebtCents != 0 {
		t.Fatalf("before the reversal: %+v", b)
	}

	reverted := domain.OrderEvent{OrderRef: ref, Key: domain.KeyRevertedConfirmed(pk), Kind: domain.EventPaymentReverted,
		Message: "reverted", At: time.Now(), Reversal: &domain.Reversal{PaymentKey: pk}}
	for range 2 { // a retried write takes it back once
		if err := db.RecordOrderEvent(ctx, reverted); err != nil {
			t.Fatal(err)
		}
	}
	if b := balanceOf(t, db, acc); b.AvailableCents != 0 || b.DebtCents != 2357 {
		t.Fatalf("after the reversal: %+v, want a debt of 23.57", b)
	}
	if got := takenBack(t, db, ref); len(got) != 1 || got[0] != 3118 {
		t.Fatalf("balance_taken_back events: %v", got)
	}
	flag := func() domain.Exception {
		t.Helper()
		var id int64
		if err := db.Get(&id, `SELECT id FROM payment_exceptions WHERE target_ref = $1 AND reason = 'reverted'`, ref); err != nil {
			t.Fatal(err)
		}
		e, err := db.Exception(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if e := flag(); e.ShortfallCents != 3118 || e.DebitedCents != 3118 || e.AtRiskCents != 2357 {
		t.Fatalf("the flag: shortfall %d, taken back %d, at risk %d; want 3118, 3118, 2357", e.ShortfallCents, e.DebitedCents, e.AtRiskCents)
	}
	// A debt refuses a balance payment, and the next top-up covers it first.
	third := seedOrder(t, db, acc, 1)
	if err := db.PayOrderFromBalance(ctx, domain.PayFromBalanceInput{OrderRef: third, AccountID: acc, AmountCents: 2357, At: time.Now()}); domain.ErrorCode(err) != domain.ECodeInsufficient {
		t.Fatalf("paid from a balance in debt: %v", err)
	}
	tu := seedTopUp(t, db, acc, 10000)
	if err := db.CreditTopUp(ctx, domain.CreditTopUpInput{TopUpRef: tu, AccountID: acc, AmountCents: 10000, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if b := balanceOf(t, db, acc); b.AvailableCents != 10000-2357 || b.DebtCents != 0 {
		t.Fatalf("after a top-up: %+v", b)
	}
	if e := flag(); e.AtRiskCents != 0 {
		t.Fatalf("at risk after the top-up covered the debt: %d", e.AtRiskCents)
	}

	// Mined again: what was taken back is given back.
	if err := db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: ref, Key: domain.KeyConfirmed(pk) + ":2", Kind: domain.EventPaymentConfirmed,
		Message: "remined", At: time.Now(), Reversal: &domain.Reversal{PaymentKey: pk, Remined: true, Restore: true}}); err != nil {
		t.Fatal(err)
	}
	if b := balanceOf(t, db, acc); b.AvailableCents != 10000-2357+3118 {
		t.Fatalf("after the payment was mined again: %+v", b)
	}
	if got := takenBack(t, db, ref); len(got) != 2 || got[1] != -3118 {
		t.Fatalf("balance_taken_back events: %v", got)
	}
	var reversals int64
	if err := db.Get(&reversals, `SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entries WHERE ledger_account = 'reversals'`); err != nil || reversals != 0 {
		t.Fatalf("reversals ledger %d (%v), want 0 once given back", reversals, err)
	}
}

// A credited top-up whose payment the chain removes is taken back from
// the balance (the workflow flags it with its shortfall, the credit).
func TestCreditOfAReversedTopUpTakenBackFromTheBalance(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, "topup-reversed@example.com")
	tu := seedTopUp(t, db, acc, 10000)
	if err := db.CreditTopUp(ctx, domain.CreditTopUpInput{TopUpRef: tu, AccountID: acc, AmountCents: 10000, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	const pk = "bitcoin:tx9:0"
	if err := db.RecordTopUpEvent(ctx, domain.TopUpEvent{TopUpRef: tu, Key: domain.KeyRevertedConfirmed(pk), Kind: domain.EventPaymentReverted,
		Message: "reverted", At: time.Now(), Reversal: &domain.Reversal{PaymentKey: pk},
		Exceptions: []domain.NewException{{Reason: domain.ExceptionReverted, PaymentKey: pk, Network: "bitcoin", TxID: "tx9",
			Asset: "BTC", AmountBase: "150000", AmountCents: 10000, ShortfallCents: 10000}}}); err != nil {
		t.Fatal(err)
	}
	if b := balanceOf(t, db, acc); b.AvailableCents != 0 || b.DebtCents != 0 {
		t.Fatalf("after the reversal: %+v, want the credit taken back", b)
	}
	if got := takenBack(t, db, tu); len(got) != 1 || got[0] != 10000 {
		t.Fatalf("balance_taken_back events: %v", got)
	}
}

// A live rental paid with a payment the chain then removes (the workflow
// flags it with the counted amount as its shortfall): the customer owes
// it. The balance shows the debt, which their next top-up pays, and
// support's queue shows it at risk beside the flag, where support may end
// the rental early.
func TestLiveRentalPaidWithReversedMoneyBecomesADebt(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, "live-reversed@example.com")
	ref := seedOrder(t, db, acc, 1)
	if _, err := db.Exec(`UPDATE orders SET status = 'active', paid_cents = 2357 WHERE ref = $1`, ref); err != nil {
		t.Fatal(err)
	}
	const pk = "bitcoin:tx7:0"
	if err := db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: ref, Key: domain.KeyRevertedConfirmed(pk), Kind: domain.EventPaymentReverted,
		Message: "reverted", At: time.Now(), Reversal: &domain.Reversal{PaymentKey: pk},
		Exceptions: []domain.NewException{{Reason: domain.ExceptionReverted, PaymentKey: pk, Network: "bitcoin", TxID: "tx7",
			Asset: "BTC", AmountBase: "4714", AmountCents: 2357, ShortfallCents: 2357}}}); err != nil {
		t.Fatal(err)
	}
	if b := balanceOf(t, db, acc); b.AvailableCents != 0 || b.DebtCents != 2357 {
		t.Fatalf("after the reversal: %+v, want a debt of 23.57", b)
	}
	open, err := db.OpenExceptions(ctx)
	if err != nil || len(open) != 1 || open[0].Reason != domain.ExceptionReverted || open[0].AtRiskCents != 2357 {
		t.Fatalf("support's queue: %+v %v", open, err)
	}
	if got := takenBack(t, db, ref); len(got) != 1 || got[0] != 2357 {
		t.Fatalf("balance_taken_back events: %v", got)
	}
}
