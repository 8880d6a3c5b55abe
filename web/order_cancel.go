package web

import (
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// An unpaid order is cancelled from its page: a link to a confirmation page
// (GET, no script), whose form posts the API's own cancel (the workflow
// decides; a payment seen or received refuses it with its message).

// cancelOrderForm asks to confirm the cancellation of an unpaid order.
func (s *Site) cancelOrderForm(c *gin.Context) {
	me, ok := s.signedIn(c)
	if !ok {
		return
	}
	var d api.OrderDetail
	if err := s.api.call(c, http.MethodGet, "/v1/orders/"+url.PathEscape(c.Param("ref")), "", nil, &d); err != nil {
		s.failOrder(c, err)
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
func (s *Site) cancelOrder(c *gin.Context) {
	me, ok := s.signedIn(c)
	if !ok {
		return
	}
	ref := c.Param("ref")
	err := s.api.call(c, http.MethodPost, "/v1/orders/"+url.PathEscape(ref)+"/cancel", c.PostForm("csrf"), nil, nil)
	if domain.ErrorCode(err) == domain.ECodeConflict {
		s.showOrder(c, me, err)
		return
	}
	if err != nil {
		s.failOrder(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, orderURL(ref)+"?info=cancelled")
}
