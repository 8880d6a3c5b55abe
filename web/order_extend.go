package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// A customer extends their own rental from its page (issue 39, item 2):
// a link to the extension page (GET, no script), which shows each length
// with its price and the new end before anything is asked, and whose
// form posts the API's own ExtendRental. Paid from the balance, the order
// page says so; by crypto, the customer goes on to pay the extension's
// top-up like any top-up.

// extensions are the site's calls for extensions (api.Server's).
type extensions interface {
	Extensions(ctx context.Context, me *api.Customer, ref string) (domain.ExtensionOffers, error)
	ExtendRental(ctx context.Context, me *api.Customer, ref string, req domain.ExtensionRequest, amountCents int64) (domain.RentalExtension, error)
}

// extendPage is what the extension page shows.
type extendPage struct {
	Order   api.OrderView
	Offers  domain.ExtensionOffers
	Balance domain.Balance
	// Key names the extension this page asks for: a form sent twice
	// (a double click, a retried post) is one extension.
	Key string
	// Days and Method are what the customer chose (a refused form keeps them).
	Days   int
	Method string
}

func newExtensionKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// extendForm shows the lengths the rental may be extended by, priced,
// with the new end of each, and how to pay.
func (s *Site) extendForm(c *gin.Context) {
	me, d, ok := s.orderOf(c)
	if !ok {
		return
	}
	s.renderExtend(c, me, d.Order, extendPage{Key: newExtensionKey(), Days: 7, Method: domain.ExtensionByBalance}, nil)
}

func (s *Site) renderExtend(c *gin.Context, me *session, o api.OrderView, x extendPage, refusal error) {
	ctx := c.Request.Context()
	offers, err := s.svc.Extensions(ctx, me, o.Ref)
	if err != nil {
		s.failOrder(c, err)
		return
	}
	b, err := s.svc.Balance(ctx, me)
	if err != nil {
		s.fail(c, err)
		return
	}
	x.Order, x.Offers, x.Balance = o, offers, b
	p := pageFor(me, "Prolonger la location "+o.Ref)
	p.Data = x
	status := http.StatusOK
	if refusal != nil {
		p.Error, status = domain.ErrorMessage(refusal), statusOf(refusal)
	}
	s.render(c, status, "order_extend", p)
}

// extend posts the extension; a refusal shows on the extension page,
// nothing changed.
func (s *Site) extend(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	ref := c.Param("ref")
	days, _ := strconv.Atoi(c.PostForm("days"))
	shown, _ := strconv.ParseInt(c.PostForm("price_"+strconv.Itoa(days)), 10, 64)
	req := domain.ExtensionRequest{Days: days, Method: c.PostForm("method"), IdempotencyKey: c.PostForm("key")}
	e, err := s.svc.ExtendRental(c.Request.Context(), me, ref, req, shown)
	if err != nil {
		if code := domain.ErrorCode(err); code == domain.ECodeUnavailable || code == domain.ECodeInternal || code == domain.ECodeNotFound {
			s.failOrder(c, err)
			return
		}
		d, rerr := s.svc.Order(c.Request.Context(), me, ref)
		if rerr != nil {
			s.failOrder(c, rerr)
			return
		}
		s.renderExtend(c, me, d.Order, extendPage{Key: newExtensionKey(), Days: days, Method: req.Method}, err)
		return
	}
	if e.State == domain.ExtensionReserved && e.TopUpRef != nil {
		c.Redirect(http.StatusSeeOther, "/topups/"+url.PathEscape(*e.TopUpRef)+"?info=extension")
		return
	}
	c.Redirect(http.StatusSeeOther, orderURL(ref)+"?info=extended")
}
