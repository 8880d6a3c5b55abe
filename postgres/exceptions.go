package postgres

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// applyReversal voids what remains queued of a payment removed from the
// chain (or, Remined, closes its flag once nothing is missing) and returns
// what was already refunded from it.
func applyReversal(ctx context.Context, tx *sqlx.Tx, m moneyChange, r domain.Reversal) (int64, error) {
	if r.Remined {
		if r.Restore {
			var refunded int64
			err := tx.GetContext(ctx, &refunded, `
				WITH v AS (
					UPDATE payment_exceptions SET voided_cents = 0,
						settled_at = CASE WHEN counted_cents + refunded_cents < amount_cents THEN NULL ELSE settled_at END
					WHERE target_ref = $1 AND payment_key = $2 AND reason <> 'reverted'
					RETURNING refunded_cents)
				SELECT COALESCE(sum(refunded_cents), 0) FROM v`, m.ref, r.PaymentKey)
			if err != nil {
				return 0, fmt.Errorf("restore %s of %s: %w", r.PaymentKey, m.ref, err)
			}
			r.RecoveredCents += refunded
		}
		// A flag support already acknowledged keeps its resolution; what
		// is backed again still leaves its shortfall.
		_, err := tx.ExecContext(ctx, `
			UPDATE payment_exceptions SET shortfall_cents = GREATEST(shortfall_cents - $3, 0),
				resolved_at = CASE WHEN resolved_at IS NOT NULL THEN resolved_at WHEN shortfall_cents <= $3 THEN now() END,
				resolution = CASE WHEN resolved_at IS NOT NULL THEN resolution WHEN shortfall_cents <= $3 THEN 'remined' END,
				resolved_by = CASE WHEN resolved_at IS NOT NULL THEN resolved_by WHEN shortfall_cents <= $3 THEN 'chain' END
			WHERE target_ref = $1 AND payment_key = $2 AND reason = 'reverted'`,
			m.ref, r.PaymentKey, r.RecoveredCents)
		if err != nil {
			return 0, fmt.Errorf("remined %s of %s: %w", r.PaymentKey, m.ref, err)
		}
		return 0, nil
	}
	var paidOut int64
	err := tx.GetContext(ctx, &paidOut, `
		WITH v AS (
			UPDATE payment_exceptions SET voided_cents = amount_cents - counted_cents - refunded_cents, settled_at = now()
			WHERE target_ref = $1 AND payment_key = $2 AND reason <> 'reverted'
			RETURNING refunded_cents)
		SELECT COALESCE(sum(refunded_cents), 0) FROM v`, m.ref, r.PaymentKey)
	if err != nil {
		return 0, fmt.Errorf("void %s of %s: %w", r.PaymentKey, m.ref, err)
	}
	return paidOut, nil
}

// flagReverted puts (or opens again) a reverted payment's flag in the queue.
func flagReverted(ctx context.Context, tx *sqlx.Tx, m moneyChange, e domain.NewException) error {
	if e.AmountCents <= 0 {
		e.AmountCents = max(e.ShortfallCents, 1) // amount_cents > 0: the flag shows at least its shortfall
	}
	_, err := tx.ExecContext(ctx, `
		INSERT INTO payment_exceptions (target_kind, target_ref, account_id, reason, payment_key, network, txid,
			asset, amount_base, amount_cents, shortfall_cents)
		VALUES ($1, $2, $3, 'reverted', $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (target_ref, reason, payment_key) DO UPDATE SET shortfall_cents = EXCLUDED.shortfall_cents,
			resolved_at = NULL, resolved_by = NULL, resolution = NULL`,
		m.kind, m.ref, m.accountID, e.PaymentKey, e.Network, e.TxID, e.Asset, e.AmountBase, e.AmountCents, e.ShortfallCents)
	if err != nil {
		return fmt.Errorf("flag reverted %s of %s: %w", e.PaymentKey, m.ref, err)
	}
	return nil
}

// upsertDust keeps one row per payment request's dust total at the latest
// total T. A lower total (dust removed by a reorganisation) voids the
// remainder above T; what support already counted or refunded above T is
// the row's shortfall, paid out on dust the chain no longer holds. The
// amount never decreases, so used + voided always fits in it.
func upsertDust(ctx context.Context, tx *sqlx.Tx, m moneyChange, e domain.NewException) error {
	total := max(e.AmountCents, 0)
	const used = `(payment_exceptions.counted_cents + payment_exceptions.refunded_cents)`
	const amount = `GREATEST(payment_exceptions.amount_cents, $8)`
	var err error
	if total == 0 {
		// Worth less than a cent (or nothing left): no row to create, but
		// an existing one loses its remainder.
		_, err = tx.ExecContext(ctx, `UPDATE payment_exceptions SET
				amount_base = $3,
				voided_cents = payment_exceptions.amount_cents - `+used+`,
				shortfall_cents = `+used+`,
				settled_at = COALESCE(payment_exceptions.settled_at, now())
			WHERE target_ref = $1 AND reason = 'dust' AND payment_key = $2`,
			m.ref, e.PaymentKey, e.AmountBase)
	} else {
		_, err = tx.ExecContext(ctx, `
		INSERT INTO payment_exceptions (target_kind, target_ref, account_id, reason, payment_key, network, txid,
			asset, amount_base, amount_cents)
		VALUES ($1, $2, $3, 'dust', $4, $5, '', $6, $7, $8)
		ON CONFLICT (target_ref, reason, payment_key) DO UPDATE SET
			amount_cents = `+amount+`,
			amount_base = EXCLUDED.amount_base,
			voided_cents = `+amount+` - GREATEST($8, `+used+`),
			shortfall_cents = GREATEST(`+used+` - $8, 0),
			settled_at = CASE WHEN $8 > `+used+` THEN NULL
				ELSE COALESCE(payment_exceptions.settled_at, now()) END`,
			m.kind, m.ref, m.accountID, e.PaymentKey, e.Network, e.Asset, e.AmountBase, total)
	}
	if err != nil {
		return fmt.Errorf("dust of %s: %w", m.ref, err)
	}
	return nil
}

// useException counts or refunds part of a queued amount of ref, refusing
// more than remains (a concurrent use came first).
func useException(ctx context.Context, tx *sqlx.Tx, ref string, u domain.ExceptionUse) error {
	if r := u.Resolve; r != nil {
		res, err := tx.ExecContext(ctx, `UPDATE payment_exceptions SET resolved_at = now(), resolved_by = $3,
			resolution = 'acknowledged', settled_at = now()
			WHERE id = $1 AND target_ref = $2 AND reason = 'reverted' AND resolved_at IS NULL`, u.ExceptionID, ref, r.Agent)
		if err != nil {
			return fmt.Errorf("resolve exception %d: %w", u.ExceptionID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return domain.Errorf(domain.ECodeConflict, "Ce signalement n'existe pas ou est déjà clos.")
		}
		return nil
	}
	var e domain.Exception
	if err := tx.GetContext(ctx, &e, `SELECT `+exceptionColumns+` FROM payment_exceptions x
		JOIN accounts a ON a.id = x.account_id WHERE x.id = $1 AND x.target_ref = $2 FOR UPDATE OF x`, u.ExceptionID, ref); err != nil {
		return fmt.Errorf("exception %d of %s: %w", u.ExceptionID, ref, notFound(err))
	}
	if u.Cents <= 0 || u.Cents > e.RemainingCents() {
		return domain.Errorf(domain.ECodeConflict, "Ce montant en attente n'a plus que %s USD à régler.",
			domain.FormatUSD(e.RemainingCents()))
	}
	col := "counted_cents"
	if u.Refund {
		col = "refunded_cents"
	}
	_, err := tx.ExecContext(ctx, `UPDATE payment_exceptions SET `+col+` = `+col+` + $2,
		settled_at = CASE WHEN counted_cents + refunded_cents + voided_cents + $2 = amount_cents THEN now() END
		WHERE id = $1`, u.ExceptionID, u.Cents)
	if err != nil {
		return fmt.Errorf("exception %d: %w", u.ExceptionID, err)
	}
	return nil
}

const exceptionColumns = `x.id, x.target_kind, x.target_ref, x.account_id, a.email, x.reason, x.payment_key, x.network,
	x.txid, x.asset, x.amount_base, x.amount_cents, x.counted_cents, x.refunded_cents, x.voided_cents, x.shortfall_cents,
	x.debited_cents, LEAST(x.debited_cents, GREATEST(-(SELECT COALESCE(SUM(l.amount_cents), 0) FROM ledger_entries l
		WHERE l.ledger_account = 'customer:' || x.account_id), 0)) AS at_risk_cents, x.resolved_at, COALESCE(x.resolution, '') AS resolution, x.needs_value, x.created_at`

// Exception returns one queued amount (settled or not).
func (db *DB) Exception(ctx context.Context, id int64) (domain.Exception, error) {
	var e domain.Exception
	if err := db.GetContext(ctx, &e, `SELECT `+exceptionColumns+` FROM payment_exceptions x
		JOIN accounts a ON a.id = x.account_id WHERE x.id = $1`, id); err != nil {
		return domain.Exception{}, fmt.Errorf("exception %d: %w", id, notFound(err))
	}
	return e, nil
}

// openExceptionWhere selects the rows (x) of support's queue: amounts not
// yet settled, reorg flags not yet resolved, amounts still to be valued.
const openExceptionWhere = `((x.reason <> 'reverted' AND x.counted_cents + x.refunded_cents + x.voided_cents < x.amount_cents)
	OR (x.reason = 'reverted' AND x.resolved_at IS NULL) OR x.needs_value)`

// OpenExceptions lists every received amount not settled and every
// reverted payment's flag not resolved, oldest first: support's exception
// queue.
func (db *DB) OpenExceptions(ctx context.Context) ([]domain.Exception, error) {
	out := []domain.Exception{}
	if err := db.SelectContext(ctx, &out, `SELECT `+exceptionColumns+` FROM payment_exceptions x
		JOIN accounts a ON a.id = x.account_id
		WHERE `+openExceptionWhere+`
		ORDER BY x.created_at, x.id`); err != nil {
		return nil, fmt.Errorf("open exceptions: %w", err)
	}
	return out, nil
}

// ExceptionsOf lists the queued amounts of an order or a top-up, oldest first.
func (db *DB) ExceptionsOf(ctx context.Context, ref string) ([]domain.Exception, error) {
	out := []domain.Exception{}
	if err := db.SelectContext(ctx, &out, `SELECT `+exceptionColumns+` FROM payment_exceptions x
		JOIN accounts a ON a.id = x.account_id WHERE x.target_ref = $1 ORDER BY x.created_at, x.id`, ref); err != nil {
		return nil, fmt.Errorf("exceptions of %s: %w", ref, err)
	}
	return out, nil
}

// maxFound bounds one search.
const maxFound = 200

// Find finds orders and top-ups by reference, customer email (exact, any
// case), transaction id or payment address (exact), newest first.
func (db *DB) Find(ctx context.Context, q string) ([]domain.FoundCase, error) {
	q = strings.TrimSpace(q)
	out := []domain.FoundCase{}
	if q == "" {
		return out, nil
	}
	err := db.SelectContext(ctx, &out, `
		WITH targets AS (
			SELECT 'order' AS kind, o.ref, o.account_id, o.status, o.total_cents AS amount_cents, o.created_at FROM orders o
			UNION ALL
			SELECT 'topup', t.ref, t.account_id, t.status, t.amount_cents, t.created_at FROM topups t
		), hits AS (
			SELECT ref, 'reference' AS matched FROM targets WHERE upper(ref) = upper($1)
			UNION SELECT tg.ref, 'email' FROM targets tg JOIN accounts a ON a.id = tg.account_id WHERE lower(a.email) = lower($1)
			UNION SELECT i.target_ref, 'txid' FROM chain_payments p JOIN payment_intents i ON i.id = p.intent_id WHERE p.txid = $1
			UNION SELECT target_ref, 'txid' FROM payment_exceptions WHERE txid = $1
			UNION SELECT target_ref, 'address' FROM payment_intents WHERE lower(address) = lower($1)
		)
		SELECT tg.kind, tg.ref, a.email, tg.status, tg.amount_cents, string_agg(DISTINCT h.matched, ',') AS matched
		FROM hits h JOIN targets tg ON tg.ref = h.ref JOIN accounts a ON a.id = tg.account_id
		GROUP BY tg.kind, tg.ref, a.email, tg.status, tg.amount_cents, tg.created_at
		ORDER BY tg.created_at DESC, tg.ref LIMIT $2`, q, maxFound)
	if err != nil {
		return nil, fmt.Errorf("find %q: %w", q, err)
	}
	return out, nil
}

// afterClose is a payment state delivered to a target whose workflow has
// closed.
type afterClose struct {
	TargetKind, TargetRef, IntentID, State string
	Network, TxID, Asset, AmountBase       string
	Index, AmountCents                     int64
}

// recordAfterClose shows a payment that reached a closed order or top-up on
// its timeline and, once confirmed, puts its amount in support's queue
// (after_close), in the caller's transaction: it is then refundable like
// any other unsettled amount.
func recordAfterClose(ctx context.Context, tx *sqlx.Tx, p afterClose) error {
	pk := domain.PaymentKey(p.Network, p.TxID, p.Index)
	if p.State != "reverted" {
		// A state the workflow received before it closed, re-sent because
		// its acknowledgement was lost (a watcher restart): already counted
		// or queued by the workflow, never queued a second time. The
		// workflow confirmed it more often than a deep reorganisation took
		// it back (each time mined again gets key~n).
		var handled bool
		if err := tx.GetContext(ctx, &handled, `SELECT
			count(*) FILTER (WHERE idem_key = $2 OR idem_key LIKE $3) >
			count(*) FILTER (WHERE idem_key = $4 OR idem_key LIKE $5)
			FROM timeline_events WHERE ref = $1`, p.TargetRef,
			domain.KeyConfirmed(pk), likePrefix(domain.KeyConfirmed(pk))+"~%",
			domain.KeyRevertedConfirmed(pk), likePrefix(domain.KeyRevertedConfirmed(pk))+"~%"); err != nil {
			return fmt.Errorf("payment %s of %s: %w", pk, p.TargetRef, err)
		}
		if handled {
			return nil
		}
	}
	var in struct {
		AccountID int64 `db:"account_id"`
		Decimals  int32 `db:"decimals"`
	}
	if err := tx.GetContext(ctx, &in, `SELECT account_id, decimals FROM payment_intents WHERE id = $1`, p.IntentID); err != nil {
		return fmt.Errorf("intent %s: %w", p.IntentID, err)
	}
	amount := inUnits(p.AmountBase, p.Asset, p.Network, in.Decimals)
	state := map[string]string{"seen": "détecté", "confirmed": "confirmé"}[p.State]
	msg := fmt.Sprintf("Paiement %s reçu (%s %s) alors que le dossier est clos : il est transmis au support.", state, amount, p.Asset)
	switch p.State {
	case "reverted":
		msg = fmt.Sprintf("Un paiement confirmé (%s %s) a été annulé par une réorganisation du réseau alors que le dossier est clos : le support est prévenu.",
			amount, p.Asset)
	case "confirmed":
		msg = fmt.Sprintf("Paiement confirmé (%s USD) reçu alors que le dossier est clos : il est transmis au support, qui vous le remboursera sur votre solde.",
			domain.FormatUSD(p.AmountCents))
	}
	fresh, err := insertEvent(ctx, tx, p.TargetRef, domain.KeyAfterClose(p.State, pk), domain.EventPaymentToSupport, msg,
		map[string]any{"network": p.Network, "txid": p.TxID, "index": p.Index, "asset": p.Asset,
			"amount_base_units": p.AmountBase, "amount_cents": p.AmountCents, "intent_id": p.IntentID, "state": p.State}, time.Now())
	if err != nil || !fresh || p.State != "confirmed" || p.AmountCents <= 0 {
		return err
	}
	return applyMoney(ctx, tx, moneyChange{kind: p.TargetKind, ref: p.TargetRef, accountID: in.AccountID,
		exceptions: []domain.NewException{{Reason: domain.ExceptionAfterClose, PaymentKey: pk, Network: p.Network,
			TxID: p.TxID, Asset: p.Asset, AmountBase: p.AmountBase, AmountCents: p.AmountCents}}})
}

// queueToSupport puts in support's queue the payments to_support among
// those just confirmed on network up to maxHeight (the caller's
// transaction): the watcher could not count them (another asset, after the
// request's watch window), so no workflow ever sees them; support refunds
// or counts them like any queued amount, once another asset is valued
// (ValueException).
func queueToSupport(ctx context.Context, tx *sqlx.Tx, network string, maxHeight int64) error {
	rows, err := asidePayments(ctx, tx, `p.network = $1 AND p.state = 'seen' AND p.block_height <= $2`, network, maxHeight)
	if err != nil {
		return err
	}
	for _, r := range rows {
		pk := domain.PaymentKey(network, r.TxID, r.Index)
		m := moneyChange{kind: r.TargetKind, ref: r.TargetRef, accountID: r.AccountID,
			exceptions: []domain.NewException{{Reason: r.Reason, PaymentKey: pk,
				Network: network, TxID: r.TxID, Asset: r.Asset, AmountBase: r.AmountBase, AmountCents: r.AmountCents}}}
		if r.Reversals > 0 {
			// Mined again after a reversal voided its row: the row is
			// queued again as it was, and what was counted or refunded
			// from it is no longer its flag's shortfall.
			counted, err := countedFrom(ctx, tx, r.TargetRef, pk)
			if err != nil {
				return err
			}
			m.reversal = &domain.Reversal{PaymentKey: pk, Remined: true, Restore: true, RecoveredCents: counted}
		}
		if err := applyMoney(ctx, tx, m); err != nil {
			return err
		}
	}
	return nil
}

// ValueException records support's valuation of a queued amount received
// in another asset, once (a second one is a conflict): the queued amount
// and its chain payment take the value, and the target's timeline says it.
// A value of 0 closes it: sent back on chain, nothing owed. Any other value
// must be within the amount's ValueBound (ECodeValueOutOfBounds), and when
// no rate bounds it, approved by a second agent (ECodeValueUnbounded);
// refused, nothing changes.
func (db *DB) ValueException(ctx context.Context, v domain.ExceptionValue) error {
	if err := v.Validate(); err != nil {
		return err
	}
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		var e domain.Exception
		if err := tx.GetContext(ctx, &e, `SELECT `+exceptionColumns+` FROM payment_exceptions x
			JOIN accounts a ON a.id = x.account_id WHERE x.id = $1 FOR UPDATE OF x`, v.ExceptionID); err != nil {
			return fmt.Errorf("exception %d: %w", v.ExceptionID, notFound(err))
		}
		if !e.NeedsValue {
			return domain.Errorf(domain.ECodeConflict, "Ce montant en attente a déjà une valeur (%s USD).", domain.FormatUSD(e.AmountCents))
		}
		bound, err := valueBound(ctx, tx, e.ID, db.tolerance())
		if err != nil {
			return err
		}
		if err := checkValue(bound, v); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE payment_exceptions SET amount_cents = $2::bigint, needs_value = false,
			settled_at = CASE WHEN $2::bigint = 0 THEN now() END WHERE id = $1`, e.ID, v.AmountCents); err != nil {
			return fmt.Errorf("value exception %d: %w", e.ID, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE chain_payments SET amount_cents = $2
			WHERE network || ':' || txid || ':' || output_index = $1 AND to_support = 'other_asset'`, e.PaymentKey, v.AmountCents); err != nil {
			return fmt.Errorf("value payment %s: %w", e.PaymentKey, err)
		}
		msg := fmt.Sprintf("Le support a évalué le paiement reçu en %s à %s USD : il vous sera remboursé sur votre solde ou compté.", e.Asset, domain.FormatUSD(v.AmountCents))
		if v.AmountCents == 0 {
			msg = fmt.Sprintf("Le paiement reçu en %s vous a été renvoyé sur la chaîne par le support : rien d'autre n'est dû.", e.Asset)
		}
		data := map[string]any{"action": domain.ActionValueException, "action_id": v.ActionID, "agent": v.Agent, "reason": v.Reason,
			"exception_id": e.ID, "payment_key": e.PaymentKey, "amount_cents": v.AmountCents}
		if v.AmountCents > 0 && bound.Known {
			data["rate_usd_per_unit"], data["rate_observed_at"] = bound.Rate, bound.ObservedAt
		} else if v.AmountCents > 0 {
			data["approved"] = true // no rate bounded it: a second agent approved it
		}
		_, err = insertEvent(ctx, tx, e.TargetRef, domain.KeyExceptionValue(e.ID), domain.EventSupportAction, msg, data, time.Now())
		return err
	})
}

// likePrefix escapes s for use as the start of a LIKE pattern.
func likePrefix(s string) string {
	return strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(s)
}

// revertToSupport voids the queued rows of the payments put aside for
// support (to_support) that a reorganisation above height removes after
// their confirmation, in the rewind's transaction: what was refunded from
// them is flagged as shortfall. No workflow ever saw them, so the store
// does what a workflow's reversal does, with a timeline entry.
func revertToSupport(ctx context.Context, tx *sqlx.Tx, network string, height int64) error {
	rows, err := asidePayments(ctx, tx, `p.network = $1 AND p.state = 'confirmed' AND p.block_height > $2`, network, height)
	if err != nil {
		return err
	}
	for _, r := range rows {
		pk := domain.PaymentKey(network, r.TxID, r.Index)
		if _, err := insertEvent(ctx, tx, r.TargetRef, domain.KeyToSupportReverted(pk, r.Reversals+1), domain.EventPaymentReverted,
			fmt.Sprintf("Un paiement transmis au support (%s %s) a été annulé par une réorganisation du réseau %s : il est retiré de la file du support.",
				inUnits(r.AmountBase, r.Asset, network, r.Decimals), r.Asset, network),
			map[string]any{"network": network, "txid": r.TxID, "index": r.Index, "asset": r.Asset,
				"amount_base_units": r.AmountBase, "after_confirmation": true}, time.Now()); err != nil {
			return err
		}
		// What support counted from it toward the target stays counted
		// (no workflow takes it back): with what was refunded from it,
		// it is the flag's shortfall.
		counted, err := countedFrom(ctx, tx, r.TargetRef, pk)
		if err != nil {
			return err
		}
		m := moneyChange{kind: r.TargetKind, ref: r.TargetRef, accountID: r.AccountID, reversal: &domain.Reversal{PaymentKey: pk},
			key: domain.KeyToSupportReverted(pk, r.Reversals+1)}
		if counted > 0 {
			m.exceptions = []domain.NewException{{Reason: domain.ExceptionReverted, PaymentKey: pk, Network: network,
				TxID: r.TxID, Asset: r.Asset, AmountBase: r.AmountBase, ShortfallCents: counted}}
		}
		if err := applyMoney(ctx, tx, m); err != nil {
			return err
		}
	}
	return nil
}

// countedFrom is what support counted toward ref from the queued rows of
// one payment.
func countedFrom(ctx context.Context, tx *sqlx.Tx, ref, paymentKey string) (int64, error) {
	var counted int64
	if err := tx.GetContext(ctx, &counted, `SELECT COALESCE(sum(counted_cents), 0) FROM payment_exceptions
		WHERE target_ref = $1 AND payment_key = $2 AND reason <> 'reverted'`, ref, paymentKey); err != nil {
		return 0, fmt.Errorf("counted from %s of %s: %w", paymentKey, ref, err)
	}
	return counted, nil
}

// asidePayment is a payment put aside for support (to_support) with its
// target.
type asidePayment struct {
	TxID        string `db:"txid"`
	Index       int64  `db:"output_index"`
	Asset       string `db:"asset"`
	AmountBase  string `db:"amount_base"`
	AmountCents int64  `db:"amount_cents"`
	Reason      string `db:"to_support"`
	TargetKind  string `db:"target_kind"`
	TargetRef   string `db:"target_ref"`
	AccountID   int64  `db:"account_id"`
	Reversals   int    `db:"reversals"`
	Decimals    int32  `db:"decimals"`
}

// inUnits is an amount of base units (decimal) of asset on network in
// that asset's units, for customers' eyes: the asset's own decimals (a
// payment in another asset than its request's has not the request's),
// else requestDecimals; as it is if unreadable.
func inUnits(base, asset, network string, requestDecimals int32) string {
	n, ok := new(big.Int).SetString(base, 10)
	if !ok {
		return base
	}
	if m, ok := domain.LookupMethod(asset, network); ok {
		requestDecimals = m.Decimals
	}
	return domain.FormatUnits(n, requestDecimals)
}

// asidePayments lists the payments put aside for support matching where
// (on chain_payments p), in the caller's transaction.
func asidePayments(ctx context.Context, tx *sqlx.Tx, where string, args ...any) ([]asidePayment, error) {
	var rows []asidePayment
	if err := tx.SelectContext(ctx, &rows, `
		SELECT p.txid, p.output_index, p.asset, p.amount_base::text AS amount_base, p.amount_cents, p.to_support,
			i.target_kind, i.target_ref, i.account_id, p.reversals, i.decimals
		FROM chain_payments p JOIN payment_intents i ON i.id = p.intent_id
		WHERE p.to_support IS NOT NULL AND `+where+`
		ORDER BY p.txid, p.output_index`, args...); err != nil {
		return nil, fmt.Errorf("payments put aside for support: %w", err)
	}
	return rows, nil
}
