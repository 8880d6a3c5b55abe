package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// Ledger accounts. A customer's account is a liability: what the shop owes
// them, credited positive. Every ledger transaction sums to zero (checked by
// a deferred constraint trigger at commit).
const (
	ledgerCryptoReceipts = "crypto_receipts"
	ledgerRevenue        = "revenue"
	ledgerRefunds        = "refunds"
)

func customerLedger(accountID int64) string { return "customer:" + strconv.FormatInt(accountID, 10) }

type entry struct {
	account string
	cents   int64
}

// postLedger writes one balanced ledger transaction, once per idempotency
// key. It reports false when the key was already posted.
func postLedger(ctx context.Context, tx *sqlx.Tx, key, kind, ref, memo string, entries ...entry) (bool, error) {
	var id int64
	err := tx.QueryRowxContext(ctx, `
		INSERT INTO ledger_transactions (idempotency_key, kind, ref, memo) VALUES ($1, $2, $3, $4)
		ON CONFLICT (idempotency_key) DO NOTHING RETURNING id`, key, kind, ref, memo).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ledger transaction %s: %w", key, err)
	}
	for _, e := range entries {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO ledger_entries (transaction_id, ledger_account, amount_cents) VALUES ($1, $2, $3)`,
			id, e.account, e.cents); err != nil {
			return false, fmt.Errorf("ledger entry %s: %w", key, err)
		}
	}
	return true, nil
}

// lockAccount serialises every balance movement of one customer, so two
// concurrent debits cannot both see the same available balance.
func lockAccount(ctx context.Context, tx *sqlx.Tx, accountID int64) error {
	var id int64
	err := tx.GetContext(ctx, &id, `SELECT id FROM accounts WHERE id = $1 FOR UPDATE`, accountID)
	if err != nil {
		return fmt.Errorf("lock account %d: %w", accountID, notFound(err))
	}
	return nil
}

func availableCents(ctx context.Context, q sqlx.QueryerContext, accountID int64) (int64, error) {
	var cents int64
	err := sqlx.GetContext(ctx, q, &cents,
		`SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entries WHERE ledger_account = $1`, customerLedger(accountID))
	if err != nil {
		return 0, fmt.Errorf("balance of %d: %w", accountID, err)
	}
	return cents, nil
}

// Balance returns a customer's available balance, derived from the ledger,
// and their pending (unconfirmed) top-ups apart.
func (db *DB) Balance(ctx context.Context, accountID int64) (domain.Balance, error) {
	avail, err := availableCents(ctx, db, accountID)
	if err != nil {
		return domain.Balance{}, err
	}
	var pending int64
	if err := db.GetContext(ctx, &pending, `
		SELECT COALESCE(SUM(amount_cents), 0) FROM topups
		WHERE account_id = $1 AND status IN ('awaiting_payment', 'payment_detected')`, accountID); err != nil {
		return domain.Balance{}, fmt.Errorf("pending top-ups of %d: %w", accountID, err)
	}
	return domain.Balance{
		AvailableCents:     avail,
		AvailableUSD:       domain.FormatUSD(avail),
		PendingTopUpsCents: pending,
		PendingTopUpsUSD:   domain.FormatUSD(pending),
	}, nil
}

// PayOrderFromBalance debits the customer's balance and marks the order paid
// in one transaction. Retried with the same order it changes nothing.
func (db *DB) PayOrderFromBalance(ctx context.Context, in activities.PayFromBalanceInput) error {
	if in.AmountCents <= 0 {
		return domain.FieldError("amount_cents", "Le montant doit être positif.")
	}
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := lockAccount(ctx, tx, in.AccountID); err != nil {
			return err
		}
		var o struct {
			AccountID int64  `db:"account_id"`
			Status    string `db:"status"`
		}
		if err := tx.GetContext(ctx, &o, `SELECT account_id, status FROM orders WHERE ref = $1 FOR UPDATE`, in.OrderRef); err != nil {
			return fmt.Errorf("order %s: %w", in.OrderRef, notFound(err))
		}
		if o.AccountID != in.AccountID {
			return domain.ErrNotFound
		}
		key := "order-payment:" + in.OrderRef
		var done bool
		if err := tx.GetContext(ctx, &done, `SELECT EXISTS (SELECT 1 FROM ledger_transactions WHERE idempotency_key = $1)`, key); err != nil {
			return fmt.Errorf("order payment %s: %w", in.OrderRef, err)
		}
		if done {
			return nil
		}
		if o.Status != domain.StatusAwaitingPayment && o.Status != domain.StatusPaymentDetected {
			return domain.Errorf(domain.ECodeConflict, "Cette commande n'attend plus de paiement.")
		}
		avail, err := availableCents(ctx, tx, in.AccountID)
		if err != nil {
			return err
		}
		if avail < in.AmountCents {
			return domain.Errorf(domain.ECodeInsufficient,
				"Votre solde disponible (%s USD) ne couvre pas le total de la commande (%s USD).",
				domain.FormatUSD(avail), domain.FormatUSD(in.AmountCents))
		}
		if _, err := postLedger(ctx, tx, key, "order_payment", in.OrderRef, "rental paid from balance",
			entry{customerLedger(in.AccountID), -in.AmountCents},
			entry{ledgerRevenue, in.AmountCents}); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `
			UPDATE orders SET status = 'paid', payment_method = 'balance', paid_cents = paid_cents + $2,
				paid_at = $3, updated_at = now()
			WHERE ref = $1`, in.OrderRef, in.AmountCents, in.At); err != nil {
			return fmt.Errorf("mark order %s paid: %w", in.OrderRef, err)
		}
		// insertEvent also queues the "payment confirmed" mail, in this transaction.
		_, err = insertEvent(ctx, tx, in.OrderRef, "paid", domain.EventPaid,
			fmt.Sprintf("Commande réglée par le solde : %s USD débités. La préparation de la machine commence.", domain.FormatUSD(in.AmountCents)),
			map[string]any{"method": "balance", "amount_cents": in.AmountCents}, in.At)
		return err
	})
}

// CreditTopUp credits a confirmed top-up to the customer's balance and marks
// it credited, once per top-up.
func (db *DB) CreditTopUp(ctx context.Context, in activities.CreditTopUpInput) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := lockAccount(ctx, tx, in.AccountID); err != nil {
			return err
		}
		var t struct {
			AccountID   int64 `db:"account_id"`
			AmountCents int64 `db:"amount_cents"`
		}
		if err := tx.GetContext(ctx, &t, `SELECT account_id, amount_cents FROM topups WHERE ref = $1 FOR UPDATE`, in.TopUpRef); err != nil {
			return fmt.Errorf("top-up %s: %w", in.TopUpRef, notFound(err))
		}
		if t.AccountID != in.AccountID || t.AmountCents != in.AmountCents {
			return domain.Errorf(domain.ECodeConflict, "La recharge ne correspond pas au compte ou au montant.")
		}
		fresh, err := postLedger(ctx, tx, "topup:"+in.TopUpRef, "topup", in.TopUpRef, "top-up confirmed",
			entry{ledgerCryptoReceipts, -in.AmountCents},
			entry{customerLedger(in.AccountID), in.AmountCents})
		if err != nil || !fresh {
			return err
		}
		if _, err := tx.ExecContext(ctx, `
			UPDATE topups SET status = 'credited', credited_at = $2, updated_at = now() WHERE ref = $1`,
			in.TopUpRef, in.At); err != nil {
			return fmt.Errorf("mark top-up %s credited: %w", in.TopUpRef, err)
		}
		// insertEvent also queues the "top-up credited" mail, in this transaction.
		_, err = insertEvent(ctx, tx, in.TopUpRef, "credited", domain.EventTopUpCredited,
			fmt.Sprintf("Recharge créditée : %s USD ajoutés à votre solde disponible.", domain.FormatUSD(in.AmountCents)),
			map[string]any{"amount_cents": in.AmountCents}, in.At)
		return err
	})
}

// RefundToBalance credits an amount of an order back to the customer's
// balance, once per support action. The refunds of an order never exceed
// what was received for it (counted payments and late ones).
func (db *DB) RefundToBalance(ctx context.Context, in activities.RefundInput) error {
	if in.AmountCents <= 0 {
		return domain.FieldError("amount_cents", "Le montant à rembourser doit être positif.")
	}
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := lockAccount(ctx, tx, in.AccountID); err != nil {
			return err
		}
		var o struct {
			AccountID int64 `db:"account_id"`
			Paid      int64 `db:"paid_cents"`
			Late      int64 `db:"late_cents"`
			Refunded  int64 `db:"refunded_cents"`
		}
		if err := tx.GetContext(ctx, &o, `SELECT account_id, paid_cents, late_cents, refunded_cents FROM orders WHERE ref = $1 FOR UPDATE`, in.Ref); err != nil {
			return fmt.Errorf("order %s: %w", in.Ref, notFound(err))
		}
		if o.AccountID != in.AccountID {
			return domain.ErrNotFound
		}
		key := "refund:" + strconv.FormatInt(in.ActionID, 10)
		var done bool
		if err := tx.GetContext(ctx, &done, `SELECT EXISTS (SELECT 1 FROM ledger_transactions WHERE idempotency_key = $1)`, key); err != nil {
			return fmt.Errorf("refund %s: %w", key, err)
		}
		if done {
			return nil
		}
		// What was received: counted payments, and late ones left to support.
		if o.Refunded+in.AmountCents > o.Paid+o.Late {
			return domain.Errorf(domain.ECodeConflict,
				"Le remboursement dépasserait le montant reçu (%s USD reçus, %s USD déjà remboursés).",
				domain.FormatUSD(o.Paid+o.Late), domain.FormatUSD(o.Refunded))
		}
		if _, err := postLedger(ctx, tx, key, "refund", in.Ref, in.Reason,
			entry{ledgerRefunds, -in.AmountCents},
			entry{customerLedger(in.AccountID), in.AmountCents}); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `
			UPDATE orders SET refunded_cents = refunded_cents + $2, updated_at = now() WHERE ref = $1`,
			in.Ref, in.AmountCents); err != nil {
			return fmt.Errorf("order %s refund: %w", in.Ref, err)
		}
		_, err := insertEvent(ctx, tx, in.Ref, key, domain.EventRefunded,
			fmt.Sprintf("%s USD remboursés sur votre solde.", domain.FormatUSD(in.AmountCents)),
			map[string]any{"amount_cents": in.AmountCents, "agent": in.Agent, "reason": in.Reason}, in.At)
		return err
	})
}
