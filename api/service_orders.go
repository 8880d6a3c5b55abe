package api

import (
	"context"
	"strings"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// The customer's order services that ask the order's workflow (see
// service.go). Each checks ownership first: another customer's order is
// not found.

// wfCtx detaches a workflow call from the caller (a started update should
// complete and be answered to the log) and bounds it.
func (s *Server) wfCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.cfg.WorkflowTimeout)
}

// CancelOrder cancels the caller's unpaid order ref, with an optional reason.
func (s *Server) CancelOrder(ctx context.Context, me *Customer, ref, reason string) (OrderDetail, error) {
	if err := s.WorkflowsReady(ctx); err != nil {
		return orderDetail{}, err
	}
	reason, err := text("reason", reason, 0, 2000, "La raison fait 2000 caractères au plus.")
	if err != nil {
		return orderDetail{}, err
	}
	o, err := s.ownOrderRef(ctx, me, ref)
	if err != nil {
		return orderDetail{}, err
	}
	wctx, cancel := s.wfCtx(ctx)
	defer cancel()
	if err := s.wf.CancelOrder(wctx, o.Ref, workflows.CancelRequest{By: "customer", Reason: reason}); err != nil {
		return orderDetail{}, s.workflowError(wctx, "cancel order", o.Ref, err)
	}
	return s.orderDetail(ctx, o.Ref, me.Account.ID)
}

// PayFromBalance pays the caller's order ref from their balance.
func (s *Server) PayFromBalance(ctx context.Context, me *Customer, ref string) (OrderDetail, error) {
	if err := s.WorkflowsReady(ctx); err != nil {
		return orderDetail{}, err
	}
	o, err := s.ownOrderRef(ctx, me, ref)
	if err != nil {
		return orderDetail{}, err
	}
	// A balance that cannot cover the order is refused here, with the
	// store's code and message, so the refusal writes no workflow history
	// (the debit itself stays checked in its transaction).
	if o.Status == domain.StatusAwaitingPayment || o.Status == domain.StatusPaymentDetected {
		b, err := s.stores.Balances.Balance(ctx, o.AccountID)
		if err != nil {
			return orderDetail{}, err
		}
		if err := domain.CheckBalance(b.AvailableCents, o.TotalCents-o.PaidCents+o.RefundedCents); err != nil {
			return orderDetail{}, err
		}
	}
	wctx, cancel := s.wfCtx(ctx)
	defer cancel()
	if err := s.wf.PayFromBalance(wctx, o.Ref); err != nil {
		return orderDetail{}, s.workflowError(wctx, "pay from balance", o.Ref, err)
	}
	return s.orderDetail(ctx, o.Ref, me.Account.ID)
}

// SupportRequestInput is a customer's support request on an order.
type SupportRequestInput = supportRequestInput

// CreateSupportRequest files a support request on the caller's order ref,
// within the per-account and per-order daily limits.
func (s *Server) CreateSupportRequest(ctx context.Context, me *Customer, ref string, in SupportRequestInput) (domain.SupportRequest, error) {
	r, err := in.validate()
	if err != nil {
		return r, err
	}
	o, err := s.ownOrderRef(ctx, me, ref)
	if err != nil {
		return r, err
	}
	r.OrderRef, r.AccountID = o.Ref, o.AccountID
	perAccount, perOrder := s.supportLimits()
	return s.stores.Quotas.CreateSupportRequestLimited(ctx, r, perAccount, perOrder)
}

// RevealPrivateKey hands the owner the private key generated for the order
// (SSH driver, no public key given), starting its display window.
func (s *Server) RevealPrivateKey(ctx context.Context, me *Customer, ref string) (key string, shownAt time.Time, err error) {
	o, err := s.ownOrderRef(ctx, me, ref)
	if err != nil {
		return "", time.Time{}, err
	}
	if s.ownerAccess == nil {
		return "", time.Time{}, domain.Errorf(domain.ECodeConflict, "Aucune clé privée n'a été générée pour cette commande.")
	}
	key, shownAt, err = s.ownerAccess.RevealPrivateKey(ctx, o.Ref)
	if err != nil {
		return "", time.Time{}, notFoundAs(err, domain.Errorf(domain.ECodeConflict, "La machine n'est pas encore prête : aucune clé privée à remettre."))
	}
	return key, shownAt, nil
}

// RequestKeyChange asks for the caller's rental's key to be replaced by
// publicKey (kind domain.KeyRequestReplace) or reissued as a new generated
// pair (domain.KeyRequestReissue, publicKey empty); the worker applies it.
func (s *Server) RequestKeyChange(ctx context.Context, me *Customer, ref, kind, publicKey string) (domain.KeyRequest, error) {
	if kind == domain.KeyRequestReplace {
		key, err := validSSHKey(publicKey)
		if err == nil && key == "" {
			err = domain.FieldError("ssh_public_key", "Collez la nouvelle clé publique SSH.")
		}
		if err != nil {
			return domain.KeyRequest{}, err
		}
		publicKey = key
	}
	o, st, err := s.ownKeyRequests(ctx, me, ref)
	if err != nil {
		return domain.KeyRequest{}, err
	}
	return st.RequestKeyChange(ctx, o.Ref, kind, publicKey)
}

// ownKeyRequests is the caller's order ref and the store of its key
// changes (errNoKeyChanges without one).
func (s *Server) ownKeyRequests(ctx context.Context, me *Customer, ref string) (domain.Order, keyRequestStore, error) {
	o, err := s.ownOrderRef(ctx, me, ref)
	if err != nil {
		return o, nil, err
	}
	if s.keyRequests == nil {
		return o, nil, errNoKeyChanges
	}
	return o, s.keyRequests, nil
}

// PaymentRequest is what a customer asks a payment request for: an asset
// on a network (one of the methods offered).
type PaymentRequest = intentRequest

// CreateOrderPaymentRequest asks the workflow of the caller's order ref
// for a payment request. clientNetwork is the caller's network (the
// per-network limits of unpaid holds). A request still valid for the same
// method is answered again (existing true).
func (s *Server) CreateOrderPaymentRequest(ctx context.Context, me *Customer, ref string, req PaymentRequest, clientNetwork string) (in IntentView, existing bool, err error) {
	return s.createPaymentRequest(ctx, me, ref, false, req, clientNetwork)
}

// CreateTopUpPaymentRequest is CreateOrderPaymentRequest for the caller's
// top-up ref.
func (s *Server) CreateTopUpPaymentRequest(ctx context.Context, me *Customer, ref string, req PaymentRequest) (in IntentView, existing bool, err error) {
	return s.createPaymentRequest(ctx, me, ref, true, req, "")
}

func (s *Server) createPaymentRequest(ctx context.Context, me *Customer, ref string, topUp bool, req PaymentRequest, clientNetwork string) (in IntentView, existing bool, err error) {
	if err := s.WorkflowsReady(ctx); err != nil {
		return in, false, err
	}
	var target string
	if topUp {
		t, err := s.stores.TopUps.TopUpForAccount(ctx, ref, me.Account.ID)
		if err != nil {
			return intentView{}, false, notFoundAs(err, errTopUpNotFound)
		}
		target, clientNetwork = t.Ref, ""
	} else {
		o, err := s.ownOrderRef(ctx, me, ref)
		if err != nil {
			return intentView{}, false, err
		}
		target = o.Ref
	}
	// A method not offered is refused before the workflow is asked, so
	// the refusal writes no history.
	if s.methods != nil {
		if _, err := s.methods.Offered(req.Asset, req.Network); err != nil {
			return intentView{}, false, err
		}
	}
	quota := domain.QuotaOrderPaymentRequests
	if topUp {
		quota = domain.QuotaTopUpPaymentRequests
	}
	if err := s.stores.Quotas.AskPaymentRequest(ctx, target, clientNetwork, s.paymentRequestsLimit(quota)); err != nil {
		return intentView{}, false, err
	}
	wctx, cancel := s.wfCtx(ctx)
	defer cancel()
	ir := workflows.IntentRequest{Asset: req.Asset, Network: req.Network}
	var created domain.Intent
	if topUp {
		created, err = s.wf.CreateTopUpIntent(wctx, target, ir)
	} else {
		created, err = s.wf.CreateOrderIntent(wctx, target, ir)
	}
	if err == nil {
		return viewIntent(created, time.Now()), false, nil
	}
	err = s.workflowError(wctx, "create payment request", target, err)
	// Refused because a request is still valid for the same method: that
	// request is the answer (a customer asking again after a timeout,
	// their first call having gone through).
	if domain.ErrorCode(err) == domain.ECodeIntentActive {
		intents, lerr := s.stores.Payments.IntentsFor(ctx, target)
		now := time.Now()
		for _, in := range intents {
			if lerr == nil && !in.Expired(now) && strings.EqualFold(in.Asset, req.Asset) && strings.EqualFold(in.Network, req.Network) {
				return viewIntent(in, now), true, nil
			}
		}
	}
	return intentView{}, false, err
}

// ClaimPaid records "J'ai payé" on the caller's payment request id: shown
// on the tracking, it confirms nothing and asks no transaction hash.
func (s *Server) ClaimPaid(ctx context.Context, me *Customer, id string) (IntentView, error) {
	in, err := s.stores.Payments.Intent(ctx, id)
	if err == nil && in.AccountID != me.Account.ID {
		err = domain.ErrNotFound
	}
	if err != nil {
		return intentView{}, notFoundAs(err, errIntentNotFound)
	}
	first, err := s.stores.Payments.ClaimPaid(ctx, in.ID, me.Account.ID, time.Now())
	if err != nil {
		return intentView{}, notFoundAs(err, errIntentNotFound)
	}
	if !first {
		// One claim per request: the same answer, nothing written.
		s.countQuota(domain.QuotaClaims)
	}
	if in, err = s.stores.Payments.Intent(ctx, in.ID); err != nil {
		return intentView{}, err
	}
	return viewIntent(in, time.Now()), nil
}
