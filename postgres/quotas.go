package postgres

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// Quotas on what a free account can create (issue 19). Each decision is
// taken in one transaction under an advisory lock of the quota's scope (an
// account, an order), so parallel requests are decided one after the
// other: the second one counts what the first wrote. A refusal is a
// *domain.QuotaError and writes nothing.

// quotaLock serialises the decisions of one quota scope until the end of tx.
func quotaLock(ctx context.Context, tx sqlx.ExecerContext, scope string) error {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('kd-quota:' || $1))`, scope); err != nil {
		return fmt.Errorf("lock quota %s: %w", scope, err)
	}
	return nil
}

// checkLimit refuses with message when lim.Max things already count.
// query selects the creation time ("at") of each thing that counts; the
// wait is until the lim.Max-th newest leaves the window (lim.Window after
// it was created).
func checkLimit(ctx context.Context, tx *sqlx.Tx, lim domain.Limit, message, query string, args ...any) error {
	if err := lim.Validate(); err != nil {
		return err
	}
	if lim.Max == 0 {
		return nil
	}
	var row struct {
		At  time.Time `db:"at"`
		Now time.Time `db:"now"`
	}
	args = append(args, lim.Max-1)
	err := tx.GetContext(ctx, &row, `SELECT q.at, now() AS now FROM (`+query+`) q
		ORDER BY q.at DESC OFFSET $`+strconv.Itoa(len(args))+` LIMIT 1`, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("quota %s: %w", lim.Quota, err)
	}
	return domain.QuotaExceeded(lim.Quota, row.At.Add(lim.Window).Sub(row.Now), message)
}

// CreateOrderLimited is CreateOrder, refused when the account already has
// lim.Max orders awaiting payment (lim.Window is the payment window: the
// oldest expires by then, or its owner pays or cancels it).
func (db *DB) CreateOrderLimited(ctx context.Context, accountID int64, q domain.Quote, lim domain.Limit) (domain.Order, error) {
	return db.createOrder(ctx, accountID, q, func(tx *sqlx.Tx) error {
		if err := quotaLock(ctx, tx, fmt.Sprintf("%s:%d", lim.Quota, accountID)); err != nil {
			return err
		}
		return checkLimit(ctx, tx, lim, fmt.Sprintf(
			"Vous avez déjà %s en attente de paiement : payez-en une ou annulez-la avant d'en passer une nouvelle.", domain.Plural(lim.Max, "commande", "commandes")),
			`SELECT created_at AS at FROM orders WHERE account_id = $1 AND status = 'awaiting_payment'`, accountID)
	})
}

// CreateTopUpLimited is CreateTopUp, refused when the account already has
// lim.Max top-ups awaiting payment (lim.Window: the top-up's payment window).
func (db *DB) CreateTopUpLimited(ctx context.Context, accountID, amountCents int64, lim domain.Limit) (domain.TopUp, error) {
	return db.createTopUp(ctx, accountID, amountCents, func(tx *sqlx.Tx) error {
		if err := quotaLock(ctx, tx, fmt.Sprintf("%s:%d", lim.Quota, accountID)); err != nil {
			return err
		}
		return checkLimit(ctx, tx, lim, fmt.Sprintf(
			"Vous avez déjà %s en attente de paiement : réglez-en une, ou attendez la fin de son délai de paiement, avant d'en demander une nouvelle.", domain.Plural(lim.Max, "recharge", "recharges")),
			`SELECT created_at AS at FROM topups WHERE account_id = $1 AND status = 'awaiting_payment'`, accountID)
	})
}

// CreateSupportRequestLimited is CreateSupportRequest, refused past
// perOrder requests on the order or perAccount requests of the account
// within their windows (a day).
func (db *DB) CreateSupportRequestLimited(ctx context.Context, r domain.SupportRequest, perAccount, perOrder domain.Limit) (domain.SupportRequest, error) {
	var out domain.SupportRequest
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		// One lock per account covers its orders too.
		if err := quotaLock(ctx, tx, fmt.Sprintf("support:%d", r.AccountID)); err != nil {
			return err
		}
		if err := checkLimit(ctx, tx, perOrder, fmt.Sprintf(
			"Vous avez déjà envoyé %s au support sur cette commande aujourd'hui : le support y répond sur la page de la commande.", domain.Plural(perOrder.Max, "demande", "demandes")),
			`SELECT created_at AS at FROM support_requests WHERE order_ref = $1 AND created_at > now() - make_interval(secs => $2)`,
			r.OrderRef, perOrder.Window.Seconds()); err != nil {
			return err
		}
		if err := checkLimit(ctx, tx, perAccount, fmt.Sprintf(
			"Vous avez déjà envoyé %s au support aujourd'hui : le support y répond sur la page de vos commandes.", domain.Plural(perAccount.Max, "demande", "demandes")),
			`SELECT created_at AS at FROM support_requests WHERE account_id = $1 AND created_at > now() - make_interval(secs => $2)`,
			r.AccountID, perAccount.Window.Seconds()); err != nil {
			return err
		}
		return insertSupportRequest(ctx, tx, r, &out)
	})
	return out, err
}

// AskPaymentRequest records that the customer asks for a payment request
// on the order or top-up targetRef, refused past lim.Max within lim.Window
// (asks are counted, not only the requests made: each one costs the
// workflow history). On an order it also records the asking client
// network: a hold the request then takes (Capacity.HoldForRequest) is
// recorded as that network's, and stays so whatever later asks name.
func (db *DB) AskPaymentRequest(ctx context.Context, targetRef, network string, lim domain.Limit) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := quotaLock(ctx, tx, lim.Quota+":"+targetRef); err != nil {
			return err
		}
		if err := checkLimit(ctx, tx, lim, fmt.Sprintf(
			"Vous avez déjà demandé %s pour ce dossier dans l'heure : utilisez la dernière demande de paiement.", domain.Plural(lim.Max, "paiement", "paiements")),
			`SELECT used_at AS at FROM quota_uses WHERE quota = $1 AND subject = $2 AND used_at > now() - make_interval(secs => $3)`,
			lim.Quota, targetRef, lim.Window.Seconds()); err != nil {
			return err
		}
		// Uses out of the window no longer count: the subject's old rows go.
		if _, err := tx.ExecContext(ctx, `DELETE FROM quota_uses WHERE quota = $1 AND subject = $2
			AND used_at <= now() - make_interval(secs => $3)`, lim.Quota, targetRef, lim.Window.Seconds()); err != nil {
			return fmt.Errorf("prune quota uses: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO quota_uses (quota, subject) VALUES ($1, $2)`, lim.Quota, targetRef); err != nil {
			return fmt.Errorf("record quota use: %w", err)
		}
		if network == "" {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE orders SET hold_network = $2 WHERE ref = $1 AND status = 'awaiting_payment'`,
			targetRef, networkKey(network)); err != nil {
			return fmt.Errorf("note network of %s: %w", targetRef, err)
		}
		return nil
	})
}

// networkKey is what is stored of a client network: a hash, no address.
func networkKey(network string) []byte {
	h := sha256.Sum256([]byte("kd-network:" + network))
	return h[:]
}

// OpenStream takes a place for a live stream of the session, refused when
// the session already has perSession streams open, or the account
// perAccount (0: no limit). The place is a lease until lease from now:
// renew it (RenewStream) while the stream runs and give it back
// (CloseStream) when it ends; a stream whose process died frees its place
// when its lease expires.
func (db *DB) OpenStream(ctx context.Context, accountID int64, session []byte, perSession, perAccount int, lease time.Duration) (int64, error) {
	var id int64
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := quotaLock(ctx, tx, fmt.Sprintf("streams:%d", accountID)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM live_streams WHERE account_id = $1 AND expires_at <= now()`, accountID); err != nil {
			return fmt.Errorf("expired streams: %w", err)
		}
		var n struct {
			Session int `db:"session"`
			Account int `db:"account"`
		}
		if err := tx.GetContext(ctx, &n, `SELECT count(*) FILTER (WHERE session = $2) AS session, count(*) AS account
			FROM live_streams WHERE account_id = $1`, accountID, session); err != nil {
			return fmt.Errorf("count streams: %w", err)
		}
		switch {
		case perSession > 0 && n.Session >= perSession:
			return domain.QuotaExceeded(domain.QuotaStreamsPerSession, lease, fmt.Sprintf(
				"Vous suivez déjà %d pages en direct avec cette session : fermez-en une (onglet ou fenêtre) avant d'en ouvrir une autre.", perSession))
		case perAccount > 0 && n.Account >= perAccount:
			return domain.QuotaExceeded(domain.QuotaStreamsPerAccount, lease, fmt.Sprintf(
				"Votre compte suit déjà %d pages en direct : fermez-en une (onglet, fenêtre ou autre appareil) avant d'en ouvrir une autre.", perAccount))
		}
		return tx.GetContext(ctx, &id, `INSERT INTO live_streams (account_id, session, expires_at)
			VALUES ($1, $2, now() + make_interval(secs => $3)) RETURNING id`, accountID, session, lease.Seconds())
	})
	if err != nil {
		return 0, fmt.Errorf("open stream: %w", err)
	}
	return id, nil
}

// RenewStream extends a stream's lease until lease from now.
func (db *DB) RenewStream(ctx context.Context, id int64, lease time.Duration) error {
	if _, err := db.ExecContext(ctx, `UPDATE live_streams SET expires_at = now() + make_interval(secs => $2) WHERE id = $1`,
		id, lease.Seconds()); err != nil {
		return fmt.Errorf("renew stream %d: %w", id, err)
	}
	return nil
}

// CloseStream gives a stream's place back.
func (db *DB) CloseStream(ctx context.Context, id int64) error {
	if _, err := db.ExecContext(ctx, `DELETE FROM live_streams WHERE id = $1`, id); err != nil {
		return fmt.Errorf("close stream %d: %w", id, err)
	}
	return nil
}

// PruneQuotas deletes what no quota counts any more: uses older than
// before and expired stream leases (housekeeping; the quotas never count
// them anyway).
func (db *DB) PruneQuotas(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		for _, q := range []string{`DELETE FROM quota_uses WHERE used_at < $1`, `DELETE FROM live_streams WHERE expires_at < $1`} {
			res, err := tx.ExecContext(ctx, q, before)
			if err != nil {
				return fmt.Errorf("prune quotas: %w", err)
			}
			d, _ := res.RowsAffected()
			n += d
		}
		return nil
	})
	return n, err
}
