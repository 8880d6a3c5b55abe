package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// Mails are queued by the very transactions that credit, debit or record:
// once each however often the activity is retried, and not at all when the
// transaction fails.
func TestMailsQueuedWithTheStateChange(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash)
		VALUES ('Eve', 'E', 'eve@example.com', 'h') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	o, err := db.CreateOrder(ctx, acc, domain.Quote{Configuration: domain.Configuration{Model: "rtx-a5000", Lots: 1, DurationDays: 3, Preset: "python"},
		GPUsPerLot: 1, TotalGPUs: 1, LotCents: 2357, TotalCents: 2357})
	if err != nil {
		t.Fatal(err)
	}
	// Refused debit: no mail.
	if err := db.PayOrderFromBalance(ctx, activities.PayFromBalanceInput{OrderRef: o.Ref, AccountID: acc, AmountCents: 2357, At: time.Now()}); domain.ErrorCode(err) != domain.ECodeInsufficient {
		t.Fatalf("debit without balance: %v", err)
	}
	tu, err := db.CreateTopUp(ctx, acc, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := db.CreditTopUp(ctx, activities.CreditTopUpInput{TopUpRef: tu.Ref, AccountID: acc, AmountCents: 10000, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := db.PayOrderFromBalance(ctx, activities.PayFromBalanceInput{OrderRef: o.Ref, AccountID: acc, AmountCents: 2357, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	rows := map[string]int{}
	var list []struct {
		Template string `db:"template"`
		Ref      string `db:"ref"`
	}
	if err := db.Select(&list, `SELECT template, ref FROM mail_outbox`); err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		rows[r.Template+" "+r.Ref]++
	}
	want := map[string]int{"order_created " + o.Ref: 1, "topup_credited " + tu.Ref: 1, "payment_confirmed " + o.Ref: 1}
	if len(rows) != len(want) {
		t.Fatalf("queued %v, want %v", rows, want)
	}
	for k, n := range want {
		if rows[k] != n {
			t.Fatalf("queued %v, want %v", rows, want)
		}
	}
}
