package web

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// An unpaid order is cancelled from its page: a link to a confirmation page
// (GET, no script), whose form posts the API's own cancel (the workflow
// decides; a payment seen or received refuses it with its message).

// cancelOrderForm asks to confirm the cancellation of an unpaid order.
func (s *Site) cancelOrderForm(c *gin.Context) {
	me, d, ok := s.orderOf(c)
	if !ok {
		return
	}
	if d.Order.Status != domain.StatusAwaitingPayment {
		c.Redirect(http.StatusSeeOther, orderURL(d.Order.Ref))
		return
	}
	p := pageFor(me, "Annuler la commande "+d.Order.Ref)
	p.Data = d.Order
	s.render(c, http.StatusOK, "order_cancel", p)
}

// cancelOrder posts the cancellation; a refusal shows on the order page.
func (s *Site) cancelOrder(c *gin.Context) { s.orderAction(c, "/cancel", nil, "?info=cancelled") }
