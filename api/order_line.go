package api

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// takeBackReason is the audit reason of a customer leaving the line.
const takeBackReason = "Le client reprend son paiement sur son solde : aucune machine n'était libre."

// takeBack credits all that a paid order waiting for a machine may still
// refund to its owner's balance, which closes the order (issue 35): the
// customer leaves the line, once. It runs as support's refund does,
// audited in support_actions, under the customer's name
// (domain.CustomerAgent); the workflow allows it in line only, for the
// whole refundable amount.
func (s *Server) takeBack(c *gin.Context) {
	var req struct{}
	if err := s.decodeJSON(c, &req, true); err != nil {
		s.fail(c, err)
		return
	}
	d, err := s.TakeBack(c.Request.Context(), customer(c), c.Param("ref"))
	s.answer(c, http.StatusOK, d, err)
}

// TakeBack credits all that the caller's paid order ref, waiting for a
// machine, may still refund to their balance, which closes the order.
func (s *Server) TakeBack(ctx context.Context, me *Customer, ref string) (OrderDetail, error) {
	if err := s.WorkflowsReady(ctx); err != nil {
		return orderDetail{}, err
	}
	o, err := s.ownOrderRef(ctx, me, ref)
	if err != nil {
		return orderDetail{}, err
	}
	if o.Status != domain.StatusWaitingForMachine {
		return orderDetail{}, domain.Errorf(domain.ECodeConflict,
			"La commande n'attend pas de machine : son paiement ne peut pas être repris sur le solde.")
	}
	wctx, cancel := s.wfCtx(ctx)
	amount, err := s.wf.Refundable(wctx, o.Ref)
	cancel()
	if err != nil {
		return orderDetail{}, s.workflowError(ctx, "take back", o.Ref, err)
	}
	if amount <= 0 {
		return orderDetail{}, domain.Errorf(domain.ECodeConflict, "Aucun montant reçu ne reste à reprendre sur cette commande : contactez le support.")
	}
	_, runErr, err := s.runAction(ctx, domain.CustomerAgent(me.Account.ID), o.Ref, domain.ActionRefund, takeBackReason,
		map[string]any{"amount_cents": amount},
		func(ctx context.Context, id int64, agent string) error {
			return s.wf.Refund(ctx, o.Ref, workflows.Refund{ActionID: id, Agent: agent, AmountCents: amount, Reason: takeBackReason})
		})
	if err == nil {
		err = runErr
	}
	if err != nil {
		return orderDetail{}, err
	}
	return s.orderDetail(ctx, o.Ref, me.Account.ID)
}
