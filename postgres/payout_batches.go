package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

const batchColumns = `ref, network, asset, status, created_by, psbt, plan, fee_base, change_index, txid, raw_tx, signed_by, created_at, signed_at`

// maxBatch bounds the payouts of one batch (one transaction's outputs).
const maxBatch = 200

// OpenBatch gathers the approved payouts of one asset on one network into
// a batch for signing. The network's open batch, if there is one, is
// returned as it is (a retried call makes no second batch); with nothing
// approved, it is refused.
func (db *DB) OpenBatch(ctx context.Context, network, asset, agent string) (domain.PayoutBatch, []domain.Payout, error) {
	var (
		b  domain.PayoutBatch
		ps []domain.Payout
	)
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		err := tx.GetContext(ctx, &b, `SELECT `+batchColumns+` FROM payout_batches
			WHERE network = $1 AND asset = $2 AND status = 'open'`, network, asset)
		switch {
		case err == nil:
			return tx.SelectContext(ctx, &ps, `SELECT `+payoutColumns+payoutFrom+`
				WHERE p.batch_ref = $1 AND p.status = 'batched' ORDER BY p.created_at, p.ref`, b.Ref)
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("open batch %s %s: %w", asset, network, err)
		}
		if err := tx.SelectContext(ctx, &ps, `SELECT `+payoutColumns+payoutFrom+`
			WHERE p.network = $1 AND p.asset = $2 AND p.status = 'approved'
			ORDER BY p.created_at, p.ref LIMIT $3 FOR UPDATE OF p`, network, asset, maxBatch); err != nil {
			return fmt.Errorf("approved payouts %s %s: %w", asset, network, err)
		}
		if len(ps) == 0 {
			return domain.Errorf(domain.ECodeConflict, "Aucun retrait validé en %s sur le réseau %s n'attend d'envoi.", asset, domain.NetworkName(network))
		}
		ref := domain.NewRef(domain.PayoutBatchRefPrefix)
		// A UTXO batch's change index: one past the network's highest, so
		// a voided batch's is not used again (the open batch's unique index
		// serialises two agents).
		if err := tx.GetContext(ctx, &b, `INSERT INTO payout_batches (ref, network, asset, created_by, change_index)
			VALUES ($1, $2, $3, $4, CASE WHEN $2 IN ('bitcoin', 'litecoin') THEN
				(SELECT COALESCE(MAX(change_index) + 1, 0) FROM payout_batches WHERE network = $2) END)
			RETURNING `+batchColumns, ref, network, asset, agent); err != nil {
			return fmt.Errorf("insert batch: %w", err)
		}
		for i := range ps {
			if _, err := tx.ExecContext(ctx, `UPDATE payouts SET batch_ref = $2 WHERE ref = $1`, ps[i].Ref, ref); err != nil {
				return err
			}
			if err := movePayout(ctx, tx, &ps[i], domain.PayoutBatched, agent,
				"Retrait ajouté à un lot d'envoi, en attente de signature.", map[string]any{"batch": ref}); err != nil {
				return err
			}
			ps[i].BatchRef = &ref
		}
		return nil
	})
	return b, ps, err
}

// VoidOpenBatch gives up an open batch that could not be exported (the
// shop's received outputs do not cover it): its payouts wait for the next.
func (db *DB) VoidOpenBatch(ctx context.Context, ref string) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error { return voidBatch(ctx, tx, ref, "") })
}

// Batch reads a batch and its payouts.
func (db *DB) Batch(ctx context.Context, ref string) (domain.PayoutBatch, []domain.Payout, error) {
	var b domain.PayoutBatch
	if err := db.GetContext(ctx, &b, `SELECT `+batchColumns+` FROM payout_batches WHERE ref = $1`, ref); err != nil {
		return b, nil, fmt.Errorf("batch %s: %w", ref, notFound(err))
	}
	ps := []domain.Payout{}
	err := db.SelectContext(ctx, &ps, `SELECT `+payoutColumns+payoutFrom+`
		WHERE p.batch_ref = $1 ORDER BY p.created_at, p.ref`, ref)
	return b, ps, err
}

// Batches lists the latest batches, newest first.
func (db *DB) Batches(ctx context.Context, limit int) ([]domain.PayoutBatch, error) {
	out := []domain.PayoutBatch{}
	err := db.SelectContext(ctx, &out, `SELECT `+batchColumns+` FROM payout_batches ORDER BY created_at DESC, ref LIMIT $1`, limit)
	return out, err
}

// SpendableOutputs are the shop's received outputs on a UTXO network that
// a batch may spend: confirmed payments to its own derived addresses, not
// spent by another batch.
func (db *DB) SpendableOutputs(ctx context.Context, network string) ([]domain.ShopOutput, error) {
	out := []domain.ShopOutput{}
	err := db.SelectContext(ctx, &out, `
		SELECT c.txid, c.output_index, c.amount_base, c.address, i.derivation_index
		FROM chain_payments c JOIN payment_intents i ON i.id = c.intent_id
		WHERE c.network = $1 AND c.state = 'confirmed' AND i.target_kind <> 'payout' AND i.derivation_index IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM payout_batch_inputs b WHERE b.network = c.network AND b.txid = c.txid
				AND b.output_index = c.output_index AND NOT b.released)
		ORDER BY c.amount_base DESC, c.txid, c.output_index`, network)
	if err != nil {
		return nil, fmt.Errorf("spendable outputs %s: %w", network, err)
	}
	return out, nil
}

// SaveBatchPSBT stores an open batch's PSBT with its plan and reserves the
// outputs it spends (an output goes in one unsigned batch at a time).
func (db *DB) SaveBatchPSBT(ctx context.Context, ref string, ex domain.BatchExport) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		var network string
		if err := tx.GetContext(ctx, &network, `UPDATE payout_batches SET psbt = $2, plan = $3, fee_base = $4
			WHERE ref = $1 AND status = 'open' AND psbt IS NULL RETURNING network`, ref, ex.PSBT, ex.Plan, ex.FeeBase.String()); err != nil {
			return fmt.Errorf("save PSBT of %s: %w", ref, notFound(err))
		}
		for _, in := range ex.Inputs {
			if _, err := tx.ExecContext(ctx, `INSERT INTO payout_batch_inputs (network, txid, output_index, batch_ref)
				VALUES ($1, $2, $3, $4)`, network, in.TxID, in.Index, ref); err != nil {
				return fmt.Errorf("reserve %s:%d for %s: %w", in.TxID, in.Index, ref, err)
			}
		}
		return nil
	})
}

// SignBatch records that an open batch was signed (BTC, LTC: its
// transaction, checked by the caller against the batch) or is about to be
// sent from the operator's payout wallet (a transfer list: no
// transaction; locked before any transfer leaves, as the watchers read
// each block once and see only what is watched by then), and starts
// watching each payout as a payment request to the customer's address.
//
// dress completes each watch with what only the caller knows: the token's
// contract, Solana's reference key, the wallet link.
func (db *DB) SignBatch(ctx context.Context, ref, txid, rawTx, agent string, dress func(domain.Payout, *domain.Intent) error) error {
	return db.inTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE payout_batches SET status = 'signed', txid = $2, raw_tx = $3,
			signed_by = $4, signed_at = now() WHERE ref = $1 AND status = 'open'`,
			ref, nullString(txid), nullString(rawTx), agent)
		if err != nil {
			return fmt.Errorf("sign batch %s: %w", ref, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return domain.Errorf(domain.ECodeConflict, "Le lot %s n'est pas ouvert : il a déjà été signé ou il a été refait.", ref)
		}
		var ps []domain.Payout
		if err := tx.SelectContext(ctx, &ps, `SELECT `+payoutColumns+payoutFrom+`
			WHERE p.batch_ref = $1 AND p.status = 'batched' ORDER BY p.ref FOR UPDATE OF p`, ref); err != nil {
			return err
		}
		msg := "Retrait en cours d'envoi depuis le portefeuille de la boutique : en attente de la blockchain."
		if txid != "" {
			msg = "Retrait signé et diffusé (transaction " + txid + ") : en attente de la blockchain."
		}
		for i := range ps {
			if txid != "" {
				ps[i].TxID = &txid
			}
			if err := movePayout(ctx, tx, &ps[i], domain.PayoutSigned, agent, msg, map[string]any{"batch": ref}); err != nil {
				return err
			}
		}
		now := time.Now()
		for _, p := range ps {
			w := payoutWatch(p, ref, now)
			if err := dress(p, &w); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `
				INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals,
					amount_base, usd_cents, rate, rate_source, rate_at, address, reference_key, token_contract,
					payment_uri, deadline, watch_until, request_key)
				VALUES ($1, 'payout', $2, $3, $4, $5, $6, $7, $8, $9, 'payout quote', $10, $11, $12, $13, $14, $15, $16, $17)`,
				w.ID, ref, w.AccountID, w.Asset, w.Network, w.Decimals, w.AmountBase.String(), w.USDCents, w.Rate,
				w.RateAt, w.Address, w.ReferenceKey, w.TokenContract, w.PaymentURI, w.Deadline, w.WatchUntil, p.Ref); err != nil {
				return fmt.Errorf("watch payout %s: %w", p.Ref, err)
			}
		}
		return nil
	})
}

// findPayoutIntent is the payout a chain payment to a customer's address
// may be: the oldest signed payout's watch there for exactly that asset and
// amount, not paid yet, whose transaction (when known) is this one.
func findPayoutIntent(ctx context.Context, tx *sqlx.Tx, network string, p domain.ChainSeen) (paidIntent, bool, error) {
	var in paidIntent
	err := tx.GetContext(ctx, &in, `
		SELECT i.id, i.asset, i.amount_base, i.usd_cents, i.deadline, i.watch_until, i.target_ref, i.target_kind
		FROM payment_intents i JOIN payouts po ON po.ref = i.request_key
		WHERE i.network = $1 AND i.target_kind = 'payout' AND lower(i.address) = lower($2)
			AND (i.network = 'ethereum' OR i.address = $2) AND i.asset = $3 AND i.amount_base = $4
			AND (po.txid IS NULL OR po.txid = $5)
			AND NOT EXISTS (SELECT 1 FROM chain_payments c WHERE c.intent_id = i.id AND c.state <> 'reverted')
		ORDER BY i.seq LIMIT 1`, network, p.Address, p.Asset, p.Amount.String(), p.TxID)
	if errors.Is(err, sql.ErrNoRows) {
		return in, false, nil
	}
	if err != nil {
		return in, false, fmt.Errorf("payout paid by %s/%s:%d: %w", network, p.TxID, p.Index, err)
	}
	return in, true, nil
}

// PayoutChainState applies what the chain watchers saw of a payout's
// transfer (the payout named by its watch): seen, confirmed (done: debited
// for good, once) or reverted by a reorganisation (waiting again). It
// reports whether the batch is now done. A state the payout already holds
// changes nothing.
func (db *DB) PayoutChainState(ctx context.Context, intentID, state, txid string) (bool, error) {
	var done bool
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		done, err = payoutChainState(ctx, tx, intentID, state, txid)
		return err
	})
	return done, err
}

func payoutChainState(ctx context.Context, tx *sqlx.Tx, intentID, state, txid string) (bool, error) {
	var done bool
	err := func() error {
		var ref, batch string
		if err := tx.QueryRowxContext(ctx, `SELECT request_key, target_ref FROM payment_intents
			WHERE id = $1 AND target_kind = 'payout'`, intentID).Scan(&ref, &batch); err != nil {
			return fmt.Errorf("payout watch %s: %w", intentID, notFound(err))
		}
		p, err := lockPayout(ctx, tx, ref, 0)
		if err != nil {
			return err
		}
		data := map[string]any{"txid": txid}
		var to domain.PayoutStatus
		var msg string
		switch state {
		case domain.PaymentStateSeen:
			to, msg = domain.PayoutSeen, fmt.Sprintf("Transfert vu sur la blockchain (transaction %s) : en attente de confirmations.", txid)
		case domain.PaymentStateConfirmed:
			to, msg = domain.PayoutDone, fmt.Sprintf("Retrait confirmé : %s %s reçus à votre adresse.", p.Amount(), p.Asset)
		case domain.PaymentStateReverted:
			to, msg = domain.PayoutSigned, "Le transfert a été retiré de la blockchain par une réorganisation : le retrait attend qu'il y revienne."
		default:
			return fmt.Errorf("payout %s: unknown chain state %q", ref, state)
		}
		// A transfer list's payout learns its transaction from the chain
		// (the customer's page shows it); reorganised out, it waits for
		// any transfer of its amount again (the operator may send anew),
		// while a signed batch's stays bound to the batch's transaction.
		if state == domain.PaymentStateReverted {
			var signed sql.NullString
			if err := tx.GetContext(ctx, &signed, `SELECT txid FROM payout_batches WHERE ref = $1`, batch); err != nil {
				return fmt.Errorf("payout batch %s: %w", batch, err)
			}
			p.TxID = nil
			if signed.Valid {
				p.TxID = &signed.String
			}
		} else if p.TxID == nil && txid != "" {
			p.TxID = &txid
		}
		if p.Status != to && p.Status.CanMove(to) {
			if err := movePayout(ctx, tx, &p, to, "", msg, data); err != nil {
				return err
			}
		}
		var left int
		if err := tx.GetContext(ctx, &left, `SELECT count(*) FROM payouts WHERE batch_ref = $1 AND status <> 'done'`, batch); err != nil {
			return err
		}
		done = left == 0
		status := domain.BatchSigned
		if done {
			status = domain.BatchDone
		}
		_, err = tx.ExecContext(ctx, `UPDATE payout_batches SET status = $2 WHERE ref = $1 AND status IN ('signed', 'done')`, batch, status)
		return err
	}()
	return done, err
}

// payoutWatchWindow is how long a signed payout's transfer is watched for.
const payoutWatchWindow = 30 * 24 * time.Hour

// payoutWatch is the payment request that watches a payout's transfer; its
// target is the batch (whose workflow hears the watchers), its request key
// the payout.
func payoutWatch(p domain.Payout, batchRef string, now time.Time) domain.Intent {
	return domain.Intent{
		ID: domain.NewRef("PW"), TargetKind: domain.TargetPayout, TargetRef: batchRef, AccountID: p.AccountID,
		Asset: p.Asset, Network: p.Network, Decimals: p.Decimals, AmountBase: p.AmountBase,
		USDCents: p.AmountCents - p.FeeCents, Rate: p.Rate, RateAt: p.RateAt, Address: p.Address, PaymentURI: p.Address,
		Deadline: now.Add(payoutWatchWindow), WatchUntil: now.Add(payoutWatchWindow),
	}
}

// UnseenPayoutTxs are the signed transactions of a network's batches some
// payout of which the chain has not shown yet (chainwatch's broadcast).
func (db *DB) UnseenPayoutTxs(ctx context.Context, network string) ([]string, error) {
	out := []string{}
	err := db.SelectContext(ctx, &out, `SELECT b.raw_tx FROM payout_batches b
		WHERE b.network = $1 AND b.status = 'signed' AND b.raw_tx IS NOT NULL
			AND EXISTS (SELECT 1 FROM payouts p WHERE p.batch_ref = b.ref AND p.status = 'signed')
		ORDER BY b.signed_at`, network)
	if err != nil {
		return nil, fmt.Errorf("unseen payout transactions %s: %w", network, err)
	}
	return out, nil
}
