package api

import (
	"context"

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
	o, ok := s.ownOrder(c)
	if !ok {
		return
	}
	if o.Status != domain.StatusWaitingForMachine {
		s.fail(c, domain.Errorf(domain.ECodeConflict,
			"La commande n'attend pas de machine : son paiement ne peut pas être repris sur le solde."))
		return
	}
	ctx, cancel := s.workflowCtx(c)
	amount, err := s.wf.Refundable(ctx, o.Ref)
	cancel()
	if err != nil {
		s.fail(c, s.workflowError(c.Request.Context(), "take back", o.Ref, err))
		return
	}
	if amount <= 0 {
		s.fail(c, domain.Errorf(domain.ECodeConflict, "Aucun montant reçu ne reste à reprendre sur cette commande : contactez le support."))
		return
	}
	_, runErr, err := s.runAction(c, domain.CustomerAgent(account(c).ID), o.Ref, domain.ActionRefund, takeBackReason,
		map[string]any{"amount_cents": amount},
		func(ctx context.Context, id int64, agent string) error {
			return s.wf.Refund(ctx, o.Ref, workflows.Refund{ActionID: id, Agent: agent, AmountCents: amount, Reason: takeBackReason})
		})
	if err == nil {
		err = runErr
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	s.respondOrder(c, o.Ref)
}
