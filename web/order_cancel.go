package web

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// An unpaid order is cancelled from its page: a link to a confirmation page
// (GET, no script), whose form posts the API's own cancel (the workflow
// decides; a payment seen or received refuses it with its message).

// cancelOrderForm asks to confirm the cancellation of an unpaid order.
func (s *Site) cancelOrderForm(c *gin.Context) {
	s.confirmForm(c, domain.StatusAwaitingPayment, "Annuler la commande ", "order_cancel")
}

// confirmForm renders page tmpl, titled title and the order's reference,
// asking to confirm an action on the order while it is in status; in any
// other status it goes back to the order's page.
func (s *Site) confirmForm(c *gin.Context, status, title, tmpl string) {
	me, d, ok := s.orderOf(c)
	if !ok {
		return
	}
	if d.Order.Status != status {
		c.Redirect(http.StatusSeeOther, orderURL(d.Order.Ref))
		return
	}
	p := pageFor(me, title+d.Order.Ref)
	p.Data = d.Order
	s.render(c, http.StatusOK, tmpl, p)
}

// cancelOrder posts the cancellation; a refusal shows on the order page.
func (s *Site) cancelOrder(c *gin.Context) {
	s.orderAction(c, func(ctx context.Context, me *session, ref string) error {
		_, err := s.svc.CancelOrder(ctx, me, ref, "")
		return err
	}, "?info=cancelled")
}

// A paid order waiting for a machine gives its money back to the balance
// from its page the same way: a confirmation page, whose form posts the
// API's take-back (the workflow decides, once).

// takeBackForm asks to confirm taking the payment back to the balance.
func (s *Site) takeBackForm(c *gin.Context) {
	s.confirmForm(c, domain.StatusWaitingForMachine, "Reprendre le paiement de la commande ", "order_take_back")
}

// takeBack posts it; a refusal shows on the order page.
func (s *Site) takeBack(c *gin.Context) {
	s.orderAction(c, func(ctx context.Context, me *session, ref string) error {
		_, err := s.svc.TakeBack(ctx, me, ref)
		return err
	}, "?info=taken-back")
}
