package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// Ledger accounts of payouts: what is held for payouts not confirmed yet,
// and what left the shop on chain.
const (
	ledgerPayoutsHeld = "payouts_held"
	ledgerPayoutsSent = "payouts_sent"
)

const payoutColumns = `p.ref, p.account_id, p.asset, p.network, p.address, p.amount_cents, p.fee_cents, p.decimals,
	p.amount_base, p.rate, p.rate_at, p.status, p.needs_two, p.approved_by, p.second_by, p.declined_by, p.reason,
	p.batch_ref, p.txid, p.created_at, p.updated_at, a.email`

const payoutFrom = ` FROM payouts p JOIN accounts a ON a.id = p.account_id`

// RequestPayout holds the quote's amount from the account's balance and
// records the payout, in one transaction; a retried request (same key)
// returns the payout it made. Refused (balance, daily limit), nothing
// changes.
func (db *DB) RequestPayout(ctx context.Context, in domain.NewPayout) (domain.Payout, error) {
	var out domain.Payout
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := lockAccount(ctx, tx, in.AccountID); err != nil {
			return err
		}
		err := tx.GetContext(ctx, &out, `SELECT `+payoutColumns+payoutFrom+`
			WHERE p.account_id = $1 AND p.request_key = $2`, in.AccountID, in.RequestKey)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("payout %s: %w", in.RequestKey, err)
		}
		q := in.Quote
		avail, err := availableCents(ctx, tx, in.AccountID)
		if err != nil {
			return err
		}
		if err := domain.CheckBalance(avail, q.AmountCents); err != nil {
			return err
		}
		var today int64
		if err := tx.GetContext(ctx, &today, `SELECT COALESCE(SUM(amount_cents), 0) FROM payouts
			WHERE account_id = $1 AND created_at > now() - $2::interval AND status NOT IN ('cancelled', 'declined')`,
			in.AccountID, fmt.Sprintf("%d seconds", int(domain.PayoutDailyWindow.Seconds()))); err != nil {
			return fmt.Errorf("payouts of the day: %w", err)
		}
		if today+q.AmountCents > in.Daily {
			return domain.Errorf(domain.ECodePayoutLimit,
				"Ce retrait dépasserait votre limite de %s par 24 heures (déjà demandé : %s).",
				domain.FrenchUSD(in.Daily), domain.FrenchUSD(today))
		}
		ref := domain.NewRef(domain.PayoutRefPrefix)
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO payouts (ref, account_id, asset, network, address, amount_cents, fee_cents, decimals,
				amount_base, rate, rate_at, status, needs_two, request_key)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'requested', $12, $13)`,
			ref, in.AccountID, q.Asset, q.Network, q.Address, q.AmountCents, q.FeeCents, q.Decimals,
			q.AmountBase.String(), q.Rate, q.RateAt, in.NeedsTwo, in.RequestKey); err != nil {
			return fmt.Errorf("insert payout: %w", err)
		}
		if _, err := postLedger(ctx, tx, domain.PayoutKey("held", ref), domain.MovementPayout, ref, "payout requested",
			entry{customerLedger(in.AccountID), -q.AmountCents}, entry{ledgerPayoutsHeld, q.AmountCents}); err != nil {
			return err
		}
		if err := payoutEvent(ctx, tx, ref, domain.PayoutRequested, "", fmt.Sprintf(
			"Retrait demandé : %s de votre solde, %s %s à recevoir (frais de réseau %s). Le montant est réservé sur votre solde.",
			domain.FrenchUSD(q.AmountCents), q.Amount, q.Asset, domain.FrenchUSD(q.FeeCents)), nil); err != nil {
			return err
		}
		return tx.GetContext(ctx, &out, `SELECT `+payoutColumns+payoutFrom+` WHERE p.ref = $1`, ref)
	})
	return out, err
}

// payoutMails are the statuses whose timeline line is also mailed.
var payoutMails = map[domain.PayoutStatus]string{
	domain.PayoutRequested: MailPayoutRequested,
	domain.PayoutDone:      MailPayoutDone,
	domain.PayoutDeclined:  MailPayoutDeclined,
}

// queuePayoutMail mails a payout's timeline line to its customer, once per
// status it reaches (a reorganisation's second confirmation mails nothing
// more).
func queuePayoutMail(ctx context.Context, tx *sqlx.Tx, ref string, s domain.PayoutStatus, msg string) error {
	template, ok := payoutMails[s]
	if !ok {
		return nil
	}
	data, err := json.Marshal(MailData{Kind: template, Message: msg})
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO mail_outbox (outbox_key, account_id, template, ref, data)
		SELECT $1, account_id, $2, ref, $3 FROM payouts WHERE ref = $4
		ON CONFLICT (outbox_key) DO NOTHING`, template+":"+ref, template, string(data), ref); err != nil {
		return fmt.Errorf("queue %s mail of %s: %w", template, ref, err)
	}
	return nil
}

func payoutEvent(ctx context.Context, tx *sqlx.Tx, ref string, s domain.PayoutStatus, actor, msg string, data map[string]any) error {
	if data == nil {
		data = map[string]any{}
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO payout_events (payout_ref, status, message, actor, data)
		VALUES ($1, $2, $3, $4, $5)`, ref, s, msg, actor, string(raw)); err != nil {
		return fmt.Errorf("payout %s event: %w", ref, err)
	}
	return queuePayoutMail(ctx, tx, ref, s, msg)
}

// lockPayout reads a payout for a change; a customer's (accountID > 0)
// must be theirs.
func lockPayout(ctx context.Context, tx *sqlx.Tx, ref string, accountID int64) (domain.Payout, error) {
	var p domain.Payout
	err := tx.GetContext(ctx, &p, `SELECT `+payoutColumns+payoutFrom+`
		WHERE p.ref = $1 AND ($2 = 0 OR p.account_id = $2) FOR UPDATE OF p`, ref, accountID)
	if err != nil {
		return p, fmt.Errorf("payout %s: %w", ref, notFound(err))
	}
	return p, nil
}

// movePayout is the one writer of a payout's status: it refuses a move the
// domain's table does not allow, records the timeline line, and posts the
// ledger's side of the move (release on cancel or decline, the final debit
// on done, once each).
func movePayout(ctx context.Context, tx *sqlx.Tx, p *domain.Payout, to domain.PayoutStatus, actor, msg string, data map[string]any) error {
	if !p.Status.CanMove(to) {
		return domain.Errorf(domain.ECodeConflict, "Ce retrait est %s : il ne peut pas passer à « %s ».", p.Status.Label(), to.Label())
	}
	if _, err := tx.ExecContext(ctx, `UPDATE payouts SET status = $2, txid = $3, updated_at = now() WHERE ref = $1`, p.Ref, to, p.TxID); err != nil {
		return fmt.Errorf("payout %s to %s: %w", p.Ref, to, err)
	}
	switch to {
	case domain.PayoutCancelled, domain.PayoutDeclined:
		if _, err := postLedger(ctx, tx, domain.PayoutKey("released", p.Ref), domain.MovementPayout, p.Ref, "payout "+string(to),
			entry{ledgerPayoutsHeld, -p.AmountCents}, entry{customerLedger(p.AccountID), p.AmountCents}); err != nil {
			return err
		}
	case domain.PayoutDone:
		if _, err := postLedger(ctx, tx, domain.PayoutKey("sent", p.Ref), domain.MovementPayout, p.Ref, "payout confirmed",
			entry{ledgerPayoutsHeld, -p.AmountCents}, entry{ledgerPayoutsSent, p.AmountCents}); err != nil {
			return err
		}
	}
	p.Status = to
	return payoutEvent(ctx, tx, p.Ref, to, actor, msg, data)
}

// CancelPayout is the customer's: a payout not signed yet is cancelled and
// its amount goes back to the balance. A payout in an exported batch voids
// that batch (its other payouts wait for the next one); the returned batch
// reference names it, so that its workflow can be told.
func (db *DB) CancelPayout(ctx context.Context, accountID int64, ref string) (domain.Payout, string, error) {
	var (
		p      domain.Payout
		voided string
	)
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := lockAccount(ctx, tx, accountID); err != nil {
			return err
		}
		var err error
		if p, err = lockPayout(ctx, tx, ref, accountID); err != nil {
			return err
		}
		if !p.Status.Cancellable() {
			return domain.ErrPayoutNotCancellable(p.Status)
		}
		if p.Status == domain.PayoutBatched && p.BatchRef != nil {
			voided = *p.BatchRef
			if err := voidBatch(ctx, tx, voided, p.Ref); err != nil {
				return err
			}
		}
		return movePayout(ctx, tx, &p, domain.PayoutCancelled, "",
			fmt.Sprintf("Retrait annulé : %s sont de nouveau disponibles sur votre solde.", domain.FrenchUSD(p.AmountCents)), nil)
	})
	return p, voided, err
}

// voidBatch ends an open batch before it is signed: its inputs are free
// again and its payouts other than except wait for the next batch.
func voidBatch(ctx context.Context, tx *sqlx.Tx, batchRef, except string) error {
	res, err := tx.ExecContext(ctx, `UPDATE payout_batches SET status = 'voided' WHERE ref = $1 AND status = 'open'`, batchRef)
	if err != nil {
		return fmt.Errorf("void batch %s: %w", batchRef, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return domain.Errorf(domain.ECodeConflict, "Le lot %s n'est plus ouvert : il a déjà été signé.", batchRef)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE payout_batch_inputs SET released = true WHERE batch_ref = $1`, batchRef); err != nil {
		return fmt.Errorf("release inputs of %s: %w", batchRef, err)
	}
	var others []domain.Payout
	if err := tx.SelectContext(ctx, &others, `SELECT `+payoutColumns+payoutFrom+`
		WHERE p.batch_ref = $1 AND p.status = 'batched' AND p.ref <> $2 ORDER BY p.ref FOR UPDATE OF p`, batchRef, except); err != nil {
		return fmt.Errorf("payouts of %s: %w", batchRef, err)
	}
	for i := range others {
		if _, err := tx.ExecContext(ctx, `UPDATE payouts SET batch_ref = NULL WHERE ref = $1`, others[i].Ref); err != nil {
			return err
		}
		if err := movePayout(ctx, tx, &others[i], domain.PayoutApproved, "",
			"Le lot d'envoi a été refait : ce retrait partira avec le suivant.", map[string]any{"voided_batch": batchRef}); err != nil {
			return err
		}
	}
	return nil
}

// Payouts lists an account's payouts, newest first.
func (db *DB) Payouts(ctx context.Context, accountID int64) ([]domain.Payout, error) {
	out := []domain.Payout{}
	err := db.SelectContext(ctx, &out, `SELECT `+payoutColumns+payoutFrom+`
		WHERE p.account_id = $1 ORDER BY p.created_at DESC, p.ref LIMIT 200`, accountID)
	if err != nil {
		return nil, fmt.Errorf("payouts of %d: %w", accountID, err)
	}
	return out, nil
}

// Payout reads one payout; a customer's (accountID > 0) must be theirs.
func (db *DB) Payout(ctx context.Context, accountID int64, ref string) (domain.Payout, []domain.PayoutEvent, error) {
	var p domain.Payout
	err := db.GetContext(ctx, &p, `SELECT `+payoutColumns+payoutFrom+`
		WHERE p.ref = $1 AND ($2 = 0 OR p.account_id = $2)`, ref, accountID)
	if err != nil {
		return p, nil, fmt.Errorf("payout %s: %w", ref, notFound(err))
	}
	ev := []domain.PayoutEvent{}
	err = db.SelectContext(ctx, &ev, `SELECT status, message, actor, created_at FROM payout_events
		WHERE payout_ref = $1 ORDER BY id`, ref)
	if err != nil {
		return p, nil, fmt.Errorf("payout %s events: %w", ref, err)
	}
	return p, ev, nil
}

// PayoutsHeldCents is what an account's payouts hold from its balance.
func (db *DB) PayoutsHeldCents(ctx context.Context, accountID int64) (int64, error) {
	var c int64
	err := db.GetContext(ctx, &c, `SELECT COALESCE(SUM(amount_cents), 0) FROM payouts
		WHERE account_id = $1 AND status NOT IN ('done', 'cancelled', 'declined')`, accountID)
	if err != nil {
		return 0, fmt.Errorf("payouts held of %d: %w", accountID, err)
	}
	return c, nil
}

// SupportPayouts lists payouts for the console: those of status (all when
// empty), newest first.
func (db *DB) SupportPayouts(ctx context.Context, status domain.PayoutStatus, limit int) ([]domain.Payout, error) {
	out := []domain.Payout{}
	err := db.SelectContext(ctx, &out, `SELECT `+payoutColumns+payoutFrom+`
		WHERE ($1 = '' OR p.status = $1) ORDER BY p.created_at DESC, p.ref LIMIT $2`, string(status), limit)
	if err != nil {
		return nil, fmt.Errorf("support payouts: %w", err)
	}
	return out, nil
}

// ApprovePayout records an agent's approval. A payout above the four-eyes
// threshold takes two different agents, the second a senior; the first
// approval leaves it waiting. The agent alone may never approve twice.
func (db *DB) ApprovePayout(ctx context.Context, ref, agent string, senior bool) (domain.Payout, error) {
	var p domain.Payout
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		if p, err = lockPayout(ctx, tx, ref, 0); err != nil {
			return err
		}
		if p.Status != domain.PayoutRequested {
			return domain.Errorf(domain.ECodeConflict, "Ce retrait est %s : il n'attend plus de validation.", p.Status.Label())
		}
		if p.NeedsTwo && p.ApprovedBy == nil {
			if _, err := tx.ExecContext(ctx, `UPDATE payouts SET approved_by = $2, updated_at = now() WHERE ref = $1`, ref, agent); err != nil {
				return fmt.Errorf("approve payout %s: %w", ref, err)
			}
			p.ApprovedBy = &agent
			return payoutEvent(ctx, tx, ref, p.Status, agent,
				"Première validation du support : une seconde validation est nécessaire pour ce montant.", nil)
		}
		if p.NeedsTwo {
			if *p.ApprovedBy == agent {
				return domain.Errorf(domain.ECodeOwnAction, "Vous avez déjà validé ce retrait : un second agent doit le faire.")
			}
			if !senior {
				return domain.Errorf(domain.ECodeForbidden, "La seconde validation d'un retrait de ce montant revient à un agent senior.")
			}
			if _, err := tx.ExecContext(ctx, `UPDATE payouts SET second_by = $2 WHERE ref = $1`, ref, agent); err != nil {
				return fmt.Errorf("approve payout %s: %w", ref, err)
			}
			p.SecondBy = &agent
		} else {
			if _, err := tx.ExecContext(ctx, `UPDATE payouts SET approved_by = $2 WHERE ref = $1`, ref, agent); err != nil {
				return fmt.Errorf("approve payout %s: %w", ref, err)
			}
			p.ApprovedBy = &agent
		}
		return movePayout(ctx, tx, &p, domain.PayoutApproved, agent, "Retrait validé par le support : il partira avec le prochain envoi.", nil)
	})
	return p, err
}

// DeclinePayout is an agent's refusal of a payout not batched yet: its
// amount goes back to the balance, with the reason on its timeline.
func (db *DB) DeclinePayout(ctx context.Context, ref, agent, reason string) (domain.Payout, error) {
	var p domain.Payout
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		if p, err = lockPayout(ctx, tx, ref, 0); err != nil {
			return err
		}
		if p.Status != domain.PayoutRequested && p.Status != domain.PayoutApproved {
			return domain.Errorf(domain.ECodeConflict, "Ce retrait est %s : il ne peut plus être refusé.", p.Status.Label())
		}
		if _, err := tx.ExecContext(ctx, `UPDATE payouts SET declined_by = $2, reason = $3 WHERE ref = $1`, ref, agent, reason); err != nil {
			return fmt.Errorf("decline payout %s: %w", ref, err)
		}
		return movePayout(ctx, tx, &p, domain.PayoutDeclined, agent, fmt.Sprintf(
			"Retrait refusé par le support (%s) : %s sont de nouveau disponibles sur votre solde.", reason, domain.FrenchUSD(p.AmountCents)), nil)
	})
	return p, err
}

// IsShopAddress reports whether address was handed out by the shop on
// network (a payment request's): a payout never goes there.
func (db *DB) IsShopAddress(ctx context.Context, network, address string) (bool, error) {
	var own bool
	err := db.GetContext(ctx, &own, `SELECT EXISTS (SELECT 1 FROM payment_intents
		WHERE network = $1 AND target_kind <> 'payout' AND lower(address) = lower($2))`, network, address)
	if err != nil {
		return false, fmt.Errorf("shop address %s: %w", network, err)
	}
	return own, nil
}
