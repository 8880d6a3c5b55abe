package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// ledgerReversals holds what balances owe back for money paid out on
// payments the chain removed (a receivable: positive while owed).
const ledgerReversals = "reversals"

// takeBackShortfalls makes the ledger follow the shortfalls of ref's
// queued rows, inside the transaction of the event key that changed them:
// money refunded or credited to a balance on the strength of a payment
// the chain then removed is debited from that balance (a debt when it is
// spent: the next credits cover it first), and given back when the
// payment is mined again. Each row's debited_cents is what was taken
// back so far; each move is one 'reversal' transaction keyed by the event
// and the row (applied once), with a timeline event for the customer.
func takeBackShortfalls(ctx context.Context, tx *sqlx.Tx, ref, key string) error {
	var rows []struct {
		ID        int64  `db:"id"`
		AccountID int64  `db:"account_id"`
		Asset     string `db:"asset"`
		Network   string `db:"network"`
		Delta     int64  `db:"delta"`
	}
	if err := tx.SelectContext(ctx, &rows, `SELECT id, account_id, asset, network, shortfall_cents - debited_cents AS delta
		FROM payment_exceptions WHERE target_ref = $1 AND shortfall_cents <> debited_cents ORDER BY id FOR UPDATE`, ref); err != nil {
		return fmt.Errorf("shortfalls of %s: %w", ref, err)
	}
	for _, r := range rows {
		if err := lockAccount(ctx, tx, r.AccountID); err != nil {
			return err
		}
		idem := "reversal:" + ref + ":" + key + ":" + strconv.FormatInt(r.ID, 10)
		memo, msg := "paid out on a payment the chain removed",
			fmt.Sprintf("%s USD repris sur votre solde : ils avaient payé %s, ou vous avaient été remboursés ou crédités, sur la foi d'un paiement (%s %s) que le réseau a annulé.",
				domain.FormatUSD(r.Delta), ref, r.Asset, r.Network)
		if r.Delta < 0 {
			memo, msg = "payment removed by the chain mined again",
				fmt.Sprintf("%s USD rendus à votre solde : le paiement annulé par le réseau (%s %s) est de nouveau confirmé.",
					domain.FormatUSD(-r.Delta), r.Asset, r.Network)
		}
		fresh, err := postLedger(ctx, tx, idem, domain.PostingReversal, ref, memo,
			entry{customerLedger(r.AccountID), -r.Delta}, entry{ledgerReversals, r.Delta})
		if err != nil || !fresh {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE payment_exceptions SET debited_cents = debited_cents + $2 WHERE id = $1`,
			r.ID, r.Delta); err != nil {
			return fmt.Errorf("debited of %d: %w", r.ID, err)
		}
		balance, err := availableCents(ctx, tx, r.AccountID)
		if err != nil {
			return err
		}
		if balance < 0 {
			msg += fmt.Sprintf(" Votre solde est négatif (%s USD) : c'est une dette, que votre prochaine recharge couvre d'abord.", domain.FormatUSD(balance))
		}
		if _, err := insertEvent(ctx, tx, ref, "balance-taken-back:"+key+":"+strconv.FormatInt(r.ID, 10), domain.EventBalanceTakenBack, msg,
			map[string]any{"exception_id": r.ID, "amount_cents": r.Delta, "balance_cents": balance}, time.Now()); err != nil {
			return err
		}
	}
	return nil
}
