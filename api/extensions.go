package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// Customers extend their own rental (issue 39, item 2): 3, 7 or 30 more
// days on the same machine, priced as a new rental of that length, paid
// from the balance (the rental's workflow reserves and debits at once) or
// by a crypto payment (a top-up of the exact amount, reserved here; its
// workflow asks the rental's to apply it once credited).

// ExtensionStore keeps customers' extensions (postgres.Extensions).
type ExtensionStore interface {
	ExtensionOffers(ctx context.Context, orderRef string, accountID int64, step time.Duration) (domain.ExtensionOffers, error)
	ReserveExtension(ctx context.Context, in domain.ExtensionNew) (domain.RentalExtension, error)
	Extension(ctx context.Context, ref string, accountID int64) (domain.RentalExtension, error)
}

var errNoExtensions = domain.Errorf(domain.ECodeUnavailable,
	"La prolongation en ligne n'est pas disponible pour le moment : contactez le support avec la référence de la commande.")

// ExtensionCreated is what asking an extension answers: the extension,
// paid (balance) or reserved awaiting its payment (crypto: pay its
// top-up, topup_reference, like any top-up).
type ExtensionCreated struct {
	Extension domain.RentalExtension `json:"extension"`
}

type createExtensionRequest struct {
	Days   int    `json:"days"`
	Method string `json:"method"`
	// AmountCents is the price the customer was shown (optional): when
	// given, a price changed since is refused rather than charged.
	AmountCents int64 `json:"amount_cents"`
}

func (s *Server) getExtensions(c *gin.Context) {
	out, err := s.Extensions(c.Request.Context(), customer(c), c.Param("ref"))
	s.answer(c, http.StatusOK, out, err)
}

func (s *Server) createExtension(c *gin.Context) {
	var req createExtensionRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	e, err := s.ExtendRental(c.Request.Context(), customer(c), c.Param("ref"),
		domain.ExtensionRequest{Days: req.Days, Method: req.Method, IdempotencyKey: keyOf(c)}, req.AmountCents)
	s.answer(c, http.StatusCreated, ExtensionCreated{Extension: e}, err)
}

// day is the length of a rental's day (shorter in tests).
func (s *Server) day() time.Duration {
	if s.cfg.Rental.Day > 0 {
		return s.cfg.Rental.Day
	}
	return 24 * time.Hour
}

// Extensions is what the caller may add to their order ref now, priced,
// and the extensions asked so far.
func (s *Server) Extensions(ctx context.Context, me *Customer, ref string) (domain.ExtensionOffers, error) {
	if s.extensions == nil {
		return domain.ExtensionOffers{}, errNoExtensions
	}
	o, err := s.ownOrderRef(ctx, me, ref)
	if err != nil {
		return domain.ExtensionOffers{}, err
	}
	return s.extensions.ExtensionOffers(ctx, o.Ref, me.Account.ID, s.day())
}

// ExtendRental extends the caller's order ref as req asks. The request's
// key names the extension: sent again, it answers the same extension and
// changes nothing. Refused, with nothing changed, when the order is not
// paid or active, its machine is not free for the added days, the price
// differs from amountCents (when given), or the balance is short.
func (s *Server) ExtendRental(ctx context.Context, me *Customer, ref string, req domain.ExtensionRequest, amountCents int64) (domain.RentalExtension, error) {
	if s.extensions == nil {
		return domain.RentalExtension{}, errNoExtensions
	}
	if err := req.Validate(); err != nil {
		return domain.RentalExtension{}, err
	}
	if amountCents < 0 || amountCents > domain.MaxSupportCents {
		return domain.RentalExtension{}, domain.FieldError("amount_cents", "Le montant de la prolongation est invalide.")
	}
	if err := s.WorkflowsReady(ctx); err != nil {
		return domain.RentalExtension{}, err
	}
	o, err := s.ownOrderRef(ctx, me, ref)
	if err != nil {
		return domain.RentalExtension{}, err
	}
	xref := domain.ExtensionRefFor(me.Account.ID, req.IdempotencyKey)
	if e, err := s.extensions.Extension(ctx, xref, me.Account.ID); err == nil {
		if e.OrderRef != o.Ref || e.Days != req.Days || e.Method != req.Method {
			return domain.RentalExtension{}, domain.Errorf(domain.ECodeIdempotencyKeyReused,
				"Cette clé d'idempotence a déjà servi à une autre prolongation : envoyez une nouvelle clé pour une nouvelle demande.")
		}
		return e, nil
	} else if !errors.Is(err, domain.ErrNotFound) {
		return domain.RentalExtension{}, err
	}
	price, err := s.extensionPrice(ctx, o, me, req.Days, amountCents)
	if err != nil {
		return domain.RentalExtension{}, err
	}
	if req.Method == domain.ExtensionByBalance {
		err = s.extendFromBalance(ctx, o, xref, req.Days, price)
	} else {
		err = s.reserveCryptoExtension(ctx, o, xref, req.Days, price)
	}
	if err != nil {
		return domain.RentalExtension{}, err
	}
	return s.extensions.Extension(ctx, xref, me.Account.ID)
}

// extensionPrice checks, before anything is written, that the order may
// be extended now and prices the days asked (the catalog's), refusing a
// price other than the one shown.
func (s *Server) extensionPrice(ctx context.Context, o domain.Order, me *Customer, days int, shown int64) (int64, error) {
	offers, err := s.extensions.ExtensionOffers(ctx, o.Ref, me.Account.ID, s.day())
	if err != nil {
		return 0, err
	}
	if !offers.Available {
		if offers.Code == "" {
			return 0, domain.ErrNotExtendable
		}
		return 0, &domain.Error{Code: offers.Code, Message: offers.Message}
	}
	for _, of := range offers.Offers {
		if of.Days != days {
			continue
		}
		if shown != 0 && shown != of.AmountCents {
			return 0, domain.Errorf(domain.ECodeConflict,
				"Le prix de la prolongation est maintenant de %s USD : vérifiez-le avant de confirmer. Rien n'a été débité.", of.AmountUSD)
		}
		return of.AmountCents, nil
	}
	return 0, domain.FieldError("days", "Cette durée n'est pas proposée pour ce modèle.")
}

// extendFromBalance asks the rental's workflow to reserve the days and
// debit the balance in one transaction. A balance that cannot cover it
// is refused here first, so the refusal writes no workflow history.
func (s *Server) extendFromBalance(ctx context.Context, o domain.Order, xref string, days int, price int64) error {
	b, err := s.stores.Balances.Balance(ctx, o.AccountID)
	if err != nil {
		return err
	}
	if b.AvailableCents < price {
		return domain.Errorf(domain.ECodeInsufficient,
			"Votre solde disponible (%s USD) ne couvre pas la prolongation (%s USD) : rien n'a été débité. Rechargez votre solde ou payez en crypto.",
			b.AvailableUSD, domain.FormatUSD(price))
	}
	wctx, cancel := s.wfCtx(ctx)
	defer cancel()
	err = s.wf.Extend(wctx, o.Ref, workflows.Extension{ExtensionRef: xref, Days: days, Method: domain.ExtensionByBalance, AmountCents: price})
	return s.workflowError(wctx, "extend rental", o.Ref, err)
}

// reserveCryptoExtension reserves the days with the top-up that takes
// their payment (one transaction), then starts the top-up's workflow
// (the starter's reconciler starts it if this fails).
func (s *Server) reserveCryptoExtension(ctx context.Context, o domain.Order, xref string, days int, price int64) error {
	timeout := s.cfg.TopUpTimeout
	if timeout <= 0 {
		timeout = workflows.DefaultTopUpTimeout
	}
	e, err := s.extensions.ReserveExtension(ctx, domain.ExtensionNew{Ref: xref, OrderRef: o.Ref, AccountID: o.AccountID,
		Days: days, Method: domain.ExtensionByCrypto, AmountCents: price, HeldUntil: s.now().Add(timeout)})
	if err != nil {
		return err
	}
	if e.TopUpRef == nil {
		return nil
	}
	t, err := s.stores.TopUps.GetTopUp(ctx, *e.TopUpRef)
	if err != nil {
		return err
	}
	wctx, cancel := s.wfCtx(ctx)
	defer cancel()
	if err := s.wf.StartTopUp(wctx, workflows.NewTopUpInput(t, s.cfg.TopUpTimeout)); err != nil {
		s.log.Warn("extension top-up workflow not started; the reconciler will retry", "ref", t.Ref, "err", err)
	} else if err := s.stores.TopUps.MarkTopUpWorkflowStarted(wctx, t.Ref); err != nil {
		s.log.Warn("extension top-up workflow started but not marked", "ref", t.Ref, "err", err)
	}
	return nil
}
