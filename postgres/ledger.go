package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/jmoiron/sqlx"

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

// balanceSQL is the available balance (availableCents) and the pending
// top-ups of an account.
const balanceSQL = `SELECT
	(SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entries WHERE ledger_account = $1) AS avail,
	(SELECT COALESCE(SUM(amount_cents), 0) FROM topups
		WHERE account_id = $2 AND status IN ('awaiting_payment', 'payment_detected')) AS pending`

// Balance returns a customer's available balance, derived from the ledger,
// and their pending (unconfirmed) top-ups apart.
func (db *DB) Balance(ctx context.Context, accountID int64) (domain.Balance, error) {
	// One prepared statement: an unpaid order's page reads it each time.
	var row struct {
		Avail   int64 `db:"avail"`
		Pending int64 `db:"pending"`
	}
	if err := db.getPrepared(ctx, &row, balanceSQL, customerLedger(accountID), accountID); err != nil {
		return domain.Balance{}, fmt.Errorf("balance of %d: %w", accountID, err)
	}
	avail, pending := row.Avail, row.Pending
	debt := max(-avail, 0)
	avail = max(avail, 0)
	return domain.Balance{
		AvailableCents:     avail,
		AvailableUSD:       domain.FormatUSD(avail),
		DebtCents:          debt,
		DebtUSD:            domain.FormatUSD(debt),
		PendingTopUpsCents: pending,
		PendingTopUpsUSD:   domain.FormatUSD(pending),
	}, nil
}

// PayOrderFromBalance debits the customer's balance and records the order
// paid, as one transition of the order (its "paid" event carries the
// posting). Retried, it changes nothing.
func (db *DB) PayOrderFromBalance(ctx context.Context, in domain.PayFromBalanceInput) error {
	if in.AmountCents <= 0 {
		return domain.FieldError("amount_cents", "Le montant doit être positif.")
	}
	paid := max(in.PaidCents, in.AmountCents) // cumulative: a partial crypto payment may come first
	return db.RecordOrderEvent(ctx, domain.OrderEvent{
		OrderRef: in.OrderRef, Key: domain.KeyPaid, Kind: domain.EventPaid, At: in.At,
		Message: fmt.Sprintf("Commande réglée par le solde : %s USD débités. La préparation de la machine commence.", domain.FormatUSD(in.AmountCents)),
		Data:    map[string]any{"method": "balance", "amount_cents": in.AmountCents},
		Status:  domain.StatusPaid, PaidCents: &paid, PaymentMethod: "balance", PaidAt: &in.At,
		Posting: &domain.Posting{Kind: domain.PostingOrderPayment, AccountID: in.AccountID, Cents: in.AmountCents, Memo: "rental paid from balance"},
	})
}

// CreditTopUp credits a covered top-up to the balance, as one transition of
// the top-up (its "credited" event carries the posting), once.
func (db *DB) CreditTopUp(ctx context.Context, in domain.CreditTopUpInput) error {
	t, err := db.GetTopUp(ctx, in.TopUpRef)
	if err != nil {
		return err
	}
	if t.AccountID != in.AccountID || t.AmountCents != in.AmountCents {
		return domain.Errorf(domain.ECodeConflict, "La recharge ne correspond pas au compte ou au montant.")
	}
	return db.RecordTopUpEvent(ctx, domain.TopUpEvent{
		TopUpRef: in.TopUpRef, Key: domain.KeyCredited, Kind: domain.EventTopUpCredited, At: in.At,
		Message: fmt.Sprintf("Recharge créditée : %s USD ajoutés à votre solde disponible.", domain.FormatUSD(in.AmountCents)),
		Data:    map[string]any{"amount_cents": in.AmountCents},
		Status:  domain.TopUpCredited, CreditedAt: &in.At,
		Posting: &domain.Posting{Kind: domain.PostingTopUp, AccountID: in.AccountID, Cents: in.AmountCents, Memo: "top-up confirmed"},
	})
}

// RefundToBalance is the ledger half of a refund for rentals started before
// refunds became one transition (workflow.GetVersion "refund-transition"):
// it posts the refund and counts it on the order, once per action, and
// writes no timeline event, so the workflow's own "refund:<action>" event
// (which carries the status) is the one stored.
func (db *DB) RefundToBalance(ctx context.Context, in domain.RefundInput) error {
	if in.AmountCents <= 0 {
		return domain.FieldError("amount_cents", "Le montant à rembourser doit être positif.")
	}
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := lockAccount(ctx, tx, in.AccountID); err != nil {
			return err
		}
		fresh, err := postLedger(ctx, tx, "refund:"+strconv.FormatInt(in.ActionID, 10), domain.PostingRefund, in.Ref, in.Reason,
			entry{ledgerRefunds, -in.AmountCents}, entry{customerLedger(in.AccountID), in.AmountCents})
		if err != nil || !fresh {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE orders SET refunded_cents = refunded_cents + $2, updated_at = now() WHERE ref = $1`,
			in.Ref, in.AmountCents)
		return err
	})
}

// moneyChange is what a transition's event causes besides the target's own
// columns.
type moneyChange struct {
	kind, ref  string
	accountID  int64
	key        string // the event's key: the posting's idempotency comes from it
	posting    *domain.Posting
	exceptions []domain.NewException
	use        *domain.ExceptionUse
	reversal   *domain.Reversal
}

// applyMoney applies the ledger posting, the new queued amounts and the use
// of a queued amount of one transition, inside its transaction. The event
// row was just inserted, so this runs once per event.
func applyMoney(ctx context.Context, tx *sqlx.Tx, m moneyChange) error {
	if m.use != nil {
		if err := useException(ctx, tx, m.ref, *m.use); err != nil {
			return err
		}
	}
	if p := m.posting; p != nil {
		if p.AccountID != m.accountID {
			return domain.ErrNotFound // not this customer's order or top-up
		}
		if p.Cents <= 0 {
			return fmt.Errorf("posting of %s/%s: %d cents", m.ref, m.key, p.Cents)
		}
		if err := lockAccount(ctx, tx, p.AccountID); err != nil {
			return err
		}
		var entries []entry
		switch p.Kind {
		case domain.PostingOrderPayment:
			avail, err := availableCents(ctx, tx, p.AccountID)
			if err != nil {
				return err
			}
			if err := domain.CheckBalance(avail, p.Cents); err != nil {
				return err
			}
			entries = []entry{{customerLedger(p.AccountID), -p.Cents}, {ledgerRevenue, p.Cents}}
		case domain.PostingTopUp:
			entries = []entry{{ledgerCryptoReceipts, -p.Cents}, {customerLedger(p.AccountID), p.Cents}}
		case domain.PostingRefund:
			entries = []entry{{ledgerRefunds, -p.Cents}, {customerLedger(p.AccountID), p.Cents}}
		default:
			return fmt.Errorf("posting of %s/%s: unknown kind %q", m.ref, m.key, p.Kind)
		}
		if _, err := postLedger(ctx, tx, "event:"+m.ref+":"+m.key, p.Kind, m.ref, p.Memo, entries...); err != nil {
			return err
		}
	}
	var paidOut int64 // refunded from the reverted payment's queued amounts
	if r := m.reversal; r != nil {
		var err error
		if paidOut, err = applyReversal(ctx, tx, m, *r); err != nil {
			return err
		}
	}
	for _, e := range m.exceptions {
		switch e.Reason {
		case domain.ExceptionDust:
			if err := upsertDust(ctx, tx, m, e); err != nil {
				return err
			}
			continue
		case domain.ExceptionReverted:
			e.ShortfallCents += paidOut
			paidOut = 0
			if err := flagReverted(ctx, tx, m, e); err != nil {
				return err
			}
			continue
		}
		// Another asset has no value yet: queued at 0 until support values it.
		needsValue := e.Reason == domain.ExceptionOtherAsset
		if e.AmountCents <= 0 && !needsValue {
			continue
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO payment_exceptions (target_kind, target_ref, account_id, reason, payment_key, network, txid,
				asset, amount_base, amount_cents, needs_value)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
			ON CONFLICT (target_ref, reason, payment_key) DO NOTHING`,
			m.kind, m.ref, m.accountID, e.Reason, e.PaymentKey, e.Network, e.TxID, e.Asset, e.AmountBase,
			max(e.AmountCents, 0), needsValue && e.AmountCents <= 0); err != nil {
			return fmt.Errorf("queue %s amount of %s: %w", e.Reason, m.ref, err)
		}
	}
	if paidOut > 0 {
		// Money already left on the strength of the payment: support must
		// see it even when the workflow did not flag the reversal.
		if err := flagReverted(ctx, tx, m, domain.NewException{Reason: domain.ExceptionReverted,
			PaymentKey: m.reversal.PaymentKey, ShortfallCents: paidOut}); err != nil {
			return err
		}
	}
	if m.reversal != nil || len(m.exceptions) > 0 {
		return takeBackShortfalls(ctx, tx, m.ref, m.key)
	}
	return nil
}
