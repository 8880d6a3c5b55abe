package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

const intentColumns = `id, target_kind, target_ref, account_id, asset, network, decimals, amount_base, usd_cents,
	rate::text AS rate, rate_source, rate_at, address, derivation_index, reference_key, token_contract, payment_uri,
	deadline, watch_until, status, created_at`

// reserveAmount takes the first amount at or above the request's that no
// watched request on the shared address holds, until the request's
// watch_until: an amount whose reservation ended is taken over. The request
// itself is inserted next in the same transaction (the reference to it is
// checked at commit).
func reserveAmount(ctx context.Context, tx *sqlx.Tx, in domain.Intent, now time.Time) (*big.Int, error) {
	amount := new(big.Int).Set(&in.AmountBase.Int)
	for try := 0; try < maxAmountBumps; try++ {
		var got int
		err := tx.GetContext(ctx, &got, `
			INSERT INTO shared_address_amounts AS r (network, asset, amount_base, intent_id, reserved_until)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (network, asset, amount_base) DO UPDATE
				SET intent_id = EXCLUDED.intent_id, reserved_until = EXCLUDED.reserved_until
				WHERE r.reserved_until < $6
			RETURNING 1`, in.Network, in.Asset, amount.String(), in.ID, in.WatchUntil, now)
		if err == nil {
			return amount, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("reserve amount %s %s: %w", amount, in.Asset, err)
		}
		amount.Add(amount, big.NewInt(1)) // held by a watched request
	}
	return nil, fmt.Errorf("no free amount near %s for %s/%s", in.AmountBase.String(), in.Asset, in.Network)
}

// maxAmountBumps bounds the search for a free amount: each try adds one base
// unit, so it stays far below any amount that matters.
const maxAmountBumps = 1000

// InsertIntent stores a new payment request for a target. See
// payments.Store for the contract.
func (db *DB) InsertIntent(ctx context.Context, in domain.Intent, requestKey string, now time.Time,
	derive func(index int64) (string, error), uri func(domain.Intent) string) (domain.Intent, error) {
	var out domain.Intent
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		err := tx.GetContext(ctx, &out, `SELECT `+intentColumns+` FROM payment_intents
			WHERE target_ref = $1 AND request_key = $2`, in.TargetRef, requestKey)
		if err == nil {
			if out.Asset == in.Asset && out.Network == in.Network {
				return nil // a retried creation: the same request
			}
			// The key's request is another method's, written by a creation
			// that gave up (the workflow gives its key back): it is the
			// open one, or it just expired.
			if !out.Expired(now) {
				return domain.ErrIntentActive(out.Deadline)
			}
			return domain.Errorf(domain.ECodeConflict, "La demande de paiement précédente vient d'expirer : réessayez.")
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("intent by key: %w", err)
		}
		var open domain.Intent
		err = tx.GetContext(ctx, &open, `SELECT `+intentColumns+` FROM payment_intents
			WHERE target_ref = $1 AND status = 'open' FOR UPDATE`, in.TargetRef)
		switch {
		case err == nil && !open.Expired(now):
			return domain.ErrIntentActive(open.Deadline)
		case err == nil:
			if _, err := tx.ExecContext(ctx, `UPDATE payment_intents SET status = 'superseded' WHERE id = $1`, open.ID); err != nil {
				return fmt.Errorf("supersede %s: %w", open.ID, err)
			}
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("open intent: %w", err)
		}
		if derive != nil {
			var idx int64
			if err := tx.GetContext(ctx, &idx, `UPDATE hd_indexes SET next_index = next_index + 1
				WHERE network = $1 RETURNING next_index - 1`, in.Network); err != nil {
				return fmt.Errorf("derivation index %s: %w", in.Network, err)
			}
			addr, err := derive(idx)
			if err != nil {
				return fmt.Errorf("derive %s/%d: %w", in.Network, idx, err)
			}
			in.DerivationIndex, in.Address = &idx, addr
		}
		amount := new(big.Int).Set(&in.AmountBase.Int)
		if derive == nil {
			// A shared address (Solana): the amount tells the requests
			// apart when a payment lacks its reference.
			var err error
			if amount, err = reserveAmount(ctx, tx, in, now); err != nil {
				return err
			}
			in.AmountBase = domain.NewBigInt(amount)
		}
		in.PaymentURI = uri(in)
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals,
				amount_base, usd_cents, rate, rate_source, rate_at, address, derivation_index, reference_key,
				token_contract, payment_uri, deadline, watch_until, request_key)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`,
			in.ID, in.TargetKind, in.TargetRef, in.AccountID, in.Asset, in.Network, in.Decimals,
			in.AmountBase, in.USDCents, in.Rate, in.RateSource, in.RateAt, in.Address, in.DerivationIndex,
			in.ReferenceKey, in.TokenContract, in.PaymentURI, in.Deadline, in.WatchUntil, requestKey); err != nil {
			return fmt.Errorf("insert intent: %w", err)
		}
		amountText := domain.FormatUnits(amount, in.Decimals)
		if _, err := insertEvent(ctx, tx, in.TargetRef, domain.KeyIntent(in.ID), domain.EventPaymentRequested,
			fmt.Sprintf("Demande de paiement : envoyez exactement %s %s sur le réseau %s à l'adresse %s avant le %s. Un transfert sur un autre réseau n'est pas équivalent.",
				amountText, in.Asset, in.Network, in.Address, in.Deadline.UTC().Format("02/01/2006 à 15:04 UTC")),
			map[string]any{"intent_id": in.ID, "asset": in.Asset, "network": in.Network, "amount": amountText,
				"amount_base_units": amount.String(), "address": in.Address, "deadline": in.Deadline.UTC(),
				"usd_cents": in.USDCents, "rate": in.Rate, "rate_source": in.RateSource}, now); err != nil {
			return err
		}
		return tx.GetContext(ctx, &out, `SELECT `+intentColumns+` FROM payment_intents WHERE id = $1`, in.ID)
	})
	return out, err
}

// Intent returns one payment request.
func (db *DB) Intent(ctx context.Context, id string) (domain.Intent, error) {
	var in domain.Intent
	if err := db.GetContext(ctx, &in, `SELECT `+intentColumns+` FROM payment_intents WHERE id = $1`, id); err != nil {
		return domain.Intent{}, fmt.Errorf("intent %s: %w", id, notFound(err))
	}
	in.Amount = domain.FormatUnits(&in.AmountBase.Int, in.Decimals)
	return in, nil
}

// IntentsFor lists a target's payment requests, newest first, with the
// customer's "J'ai payé" claims.
func (db *DB) IntentsFor(ctx context.Context, targetRef string) ([]domain.Intent, error) {
	var out []domain.Intent
	if err := db.SelectContext(ctx, &out, `SELECT `+intentColumns+` FROM payment_intents
		WHERE target_ref = $1 ORDER BY seq DESC`, targetRef); err != nil {
		return nil, fmt.Errorf("intents of %s: %w", targetRef, err)
	}
	for i := range out {
		out[i].Amount = domain.FormatUnits(&out[i].AmountBase.Int, out[i].Decimals)
		if err := db.SelectContext(ctx, &out[i].Claims, `SELECT created_at FROM payment_claims
			WHERE intent_id = $1 ORDER BY id`, out[i].ID); err != nil {
			return nil, fmt.Errorf("claims of %s: %w", out[i].ID, err)
		}
	}
	return out, nil
}

// ClaimPaid records the customer's "J'ai payé" on an intent and shows it on
// the target's timeline. It changes no payment state. One claim per
// request: a repeated claim writes nothing (no row, no timeline entry, so
// no open stream wakes up) and says so (first false).
func (db *DB) ClaimPaid(ctx context.Context, intentID string, accountID int64, now time.Time) (first bool, err error) {
	err = db.inTx(ctx, func(tx *sqlx.Tx) error {
		var in domain.Intent
		// The row lock decides parallel claims one after the other.
		if err := tx.GetContext(ctx, &in, `SELECT `+intentColumns+` FROM payment_intents WHERE id = $1 FOR UPDATE`, intentID); err != nil {
			return fmt.Errorf("intent %s: %w", intentID, notFound(err))
		}
		if in.AccountID != accountID {
			return domain.ErrNotFound
		}
		var claimed bool
		if err := tx.GetContext(ctx, &claimed, `SELECT EXISTS (SELECT 1 FROM payment_claims WHERE intent_id = $1)`, intentID); err != nil {
			return fmt.Errorf("claims of %s: %w", intentID, err)
		}
		if claimed {
			return nil
		}
		first = true
		var id int64
		if err := tx.GetContext(ctx, &id, `INSERT INTO payment_claims (intent_id, account_id) VALUES ($1, $2) RETURNING id`,
			intentID, accountID); err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		_, err := insertEvent(ctx, tx, in.TargetRef, domain.KeyClaim(id), domain.EventPaymentClaimed,
			"Vous avez signalé avoir payé (« J'ai payé »). Ce signalement ne confirme pas la réception : la commande attend la confirmation du paiement sur le réseau.",
			map[string]any{"intent_id": intentID, "asset": in.Asset, "network": in.Network}, now)
		return err
	})
	return first && err == nil, err
}
