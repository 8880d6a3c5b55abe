package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// supportThread is a support request and the answers it received.
type supportThread struct {
	domain.SupportRequest
	Answers []domain.TimelineEvent
}

// orderPageData is everything the order page shows.
type orderPageData struct {
	api.OrderDetail
	Checkout  checkout
	Reminders []domain.TimelineEvent
	Support   []supportThread
	// KeyDownload: a generated private key can be downloaded now.
	KeyDownload bool
	// KeyRequest is the order's last key change (lost key), if any.
	KeyRequest *domain.KeyRequest
}

// loadOrder reads the caller's order and what its page shows.
func (s *Site) loadOrder(c *gin.Context, me *session, ref string) (orderPageData, error) {
	op, err := s.svc.OrderPage(c.Request.Context(), me, ref)
	if err != nil {
		return orderPageData{}, err
	}
	return s.orderPageData(c, me, op)
}

// sessionOrder reads the visitor's session and the order named in the
// path together, or answers (ok false): the login page without a session,
// the site's 404 for another's order.
func (s *Site) sessionOrder(c *gin.Context) (*session, orderPageData, bool) {
	me, op, err := s.svc.SessionOrderPage(c.Request.Context(), c.Request, c.Param("ref"))
	if err == nil && me == nil {
		s.svc.ClearSession(c)
		s.toLogin(c)
		return nil, orderPageData{}, false
	}
	var d orderPageData
	if err == nil {
		d, err = s.orderPageData(c, me, op)
	}
	if err != nil {
		s.failOrder(c, err)
		return nil, d, false
	}
	return me, d, true
}

// orderPageData arranges an order's page for its template.
func (s *Site) orderPageData(c *gin.Context, me *session, op api.OrderPage) (orderPageData, error) {
	d := orderPageData{OrderDetail: op.OrderDetail, KeyRequest: op.KeyRequest}
	readableTimeline(d.Timeline, d.Order.GPUNames())
	answers := map[int64][]domain.TimelineEvent{}
	for _, ev := range d.Timeline {
		switch ev.Kind {
		case domain.EventReminderSent:
			d.Reminders = append(d.Reminders, ev)
		case domain.EventSupportAnswer:
			var data struct {
				ID int64 `json:"support_request_id"`
			}
			if json.Unmarshal(ev.Data, &data) == nil {
				answers[data.ID] = append(answers[data.ID], ev)
			}
		}
	}
	for _, r := range op.SupportRequests {
		d.Support = append(d.Support, supportThread{SupportRequest: r, Answers: answers[r.ID]})
	}
	if a := d.Access; a != nil && a.RevokedAt == nil {
		d.KeyDownload = a.PrivateKeyAvailable
	}
	o := d.Order
	ck, err := s.checkout(c, me, target{Kind: "order", Ref: o.Ref, Status: o.Status, TotalCents: o.TotalCents,
		PaidCents: o.PaidCents, LateCents: o.LateCents, Unpaid: unpaidOrder(o.Status)}, d.PaymentIntents, d.Timeline)
	if err != nil {
		return d, err
	}
	d.Checkout = ck
	return d, nil
}

func unpaidOrder(status string) bool {
	return status == domain.StatusAwaitingPayment || status == domain.StatusPaymentDetected
}

// orderConfirm is the last step before ordering: the configuration's
// summary, an optional SSH public key, and "Confirmer la commande".
func (s *Site) orderConfirm(c *gin.Context) {
	me, ok := s.signedIn(c)
	if !ok {
		return
	}
	p := pageFor(me, "Confirmer la commande")
	d, err := s.configure(c)
	if err != nil && d.Catalog.Models == nil {
		s.fail(c, err)
		return
	}
	if err != nil {
		// Back to the configurator, which says what is wrong.
		c.Redirect(http.StatusSeeOther, "/?"+configQuery(d.Config))
		return
	}
	d.Confirming = true
	p.Data = d
	s.render(c, http.StatusOK, "order_confirm", p)
}

func (s *Site) createOrder(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	lots, _ := strconv.Atoi(c.PostForm("lots"))
	days, _ := strconv.Atoi(c.PostForm("duration_days"))
	created, err := s.svc.CreateOrder(c.Request.Context(), me, api.OrderRequest{Model: c.PostForm("gpu_model"), Lots: lots,
		DurationDays: days, Preset: c.PostForm("preset"), SSHPublicKey: c.PostForm("ssh_public_key")})
	if err != nil {
		if domain.ErrorCode(err) != domain.ECodeInvalid {
			s.fail(c, err)
			return
		}
		c.Request.URL.RawQuery = configQuery(domain.Configuration{Model: c.PostForm("gpu_model"), Lots: lots,
			DurationDays: days, Preset: c.PostForm("preset")})
		p := pageFor(me, "Confirmer la commande")
		d, qerr := s.configure(c)
		if qerr != nil {
			s.fail(c, qerr)
			return
		}
		d.Confirming = true
		p.Data = d
		p.fieldError(err)
		s.render(c, statusOf(err), "order_confirm", p)
		return
	}
	c.Redirect(http.StatusSeeOther, orderURL(created.Order.Ref)+"#paiement")
}

// ordersData is the "Mes commandes" page.
type ordersData struct {
	Orders []api.OrderView
}

func (s *Site) orders(c *gin.Context) {
	me, ok := s.signedIn(c)
	if !ok {
		return
	}
	orders, err := s.svc.Orders(c.Request.Context(), me)
	if err != nil {
		s.fail(c, err)
		return
	}
	p := pageFor(me, "Mes commandes")
	p.Data = ordersData{Orders: orders}
	s.render(c, http.StatusOK, "orders", p)
}

func (s *Site) orderPage(c *gin.Context) {
	me, d, ok := s.sessionOrder(c)
	if !ok {
		return
	}
	s.renderOrder(c, me, d, nil)
}

// showOrder renders the order page, with refusal's message if not nil.
func (s *Site) showOrder(c *gin.Context, me *session, refusal error) {
	d, err := s.loadOrder(c, me, c.Param("ref"))
	if err != nil {
		// Another customer's order, or none: the same page, nothing of it.
		s.failOrder(c, err)
		return
	}
	s.renderOrder(c, me, d, refusal)
}

func (s *Site) renderOrder(c *gin.Context, me *session, d orderPageData, refusal error) {
	p := pageFor(me, "Commande "+d.Order.Ref)
	p.Data = d
	s.renderTracked(c, p, refusal, "order", "order_live_box", orderURL(d.Order.Ref)+"/live", orderTrigger)
}

// orderLive is the live part of the order page, fetched by htmx when the
// order's event stream says something may have changed.
func (s *Site) orderLive(c *gin.Context) {
	me, d, ok := s.sessionOrder(c)
	if !ok {
		return
	}
	p := pageFor(me, "")
	p.Data = d
	s.renderLive(c, p, "order_live_box", orderURL(d.Order.Ref)+"/live", orderTrigger)
}

// orderTrigger: the order page's live part is fetched again on each event
// of the order's stream (the SSE extension listens on the enclosing element).
const orderTrigger = "sse:order, sse:timeline"

// notices are the fixed messages a redirect can ask a page to show.
var notices = map[string]string{
	"claimed": "Votre signalement « J'ai payé » est enregistré. Il ne confirme pas la réception du paiement : " +
		"seule la confirmation du réseau valide le règlement, et cette page se met à jour d'elle-même.",
	"balance":    "Votre solde a réglé la commande. La préparation de la machine est suivie ci-dessous.",
	"cancelled":  "Votre commande est annulée. Ne réglez plus ses demandes de paiement.",
	"taken-back": "Le montant payé est crédité sur votre solde et la commande est close : elle quitte la file d'attente.",
	"support":    "Votre demande de support est envoyée. La réponse apparaîtra sur cette page et vous sera envoyée par email.",
	"topup":      "Recharge créée. Choisissez comment la régler.",
	"extended":   "Votre location est prolongée : la nouvelle fin et les rappels suivent ci-dessous.",
	"extension": "Les jours sont réservés sur votre machine. Choisissez la crypto et son réseau, puis réglez la prolongation avant l'échéance : " +
		"une fois le paiement confirmé, le montant crédité sur votre solde en est débité et la location prolongée. Si le paiement n'arrive pas à temps, " +
		"ou si la machine n'est plus libre à sa confirmation, le montant reçu reste sur votre solde.",
	"key-replace": "Votre nouvelle clé publique va remplacer l'ancienne sur la machine. Cette page indique quand c'est fait ; " +
		"l'ancienne clé sera alors refusée.",
	"key-reissue": "Une nouvelle paire de clés est en cours de génération. La clé privée pourra être téléchargée ici dès qu'elle est prête ; " +
		"l'ancienne clé sera alors refusée.",
}

// replaceKey asks for the customer's new public key to replace the current
// one on the running machine (a lost key).
func (s *Site) replaceKey(c *gin.Context) {
	key := c.PostForm("ssh_public_key")
	s.orderAction(c, func(ctx context.Context, me *session, ref string) error {
		_, err := s.svc.RequestKeyChange(ctx, me, ref, domain.KeyRequestReplace, key)
		return err
	}, "?info=key-replace#acces")
}

// reissueKey asks for a new generated key pair, the old key revoked.
func (s *Site) reissueKey(c *gin.Context) {
	s.orderAction(c, func(ctx context.Context, me *session, ref string) error {
		_, err := s.svc.RequestKeyChange(ctx, me, ref, domain.KeyRequestReissue, "")
		return err
	}, "?info=key-reissue#acces")
}

// orderAction runs an action on the order named in the path and goes back
// to its page with then (notice, anchor); a refusal (key not valid, a
// change already running, a payment seen before a cancellation) shows on
// the order page.
func (s *Site) orderAction(c *gin.Context, do func(ctx context.Context, me *session, ref string) error, then string) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	ref := c.Param("ref")
	err := do(c.Request.Context(), me, ref)
	if code := domain.ErrorCode(err); code == domain.ECodeInvalid || code == domain.ECodeConflict {
		s.showOrder(c, me, err)
		return
	}
	if err != nil {
		s.failOrder(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, orderURL(ref)+then)
}

func (s *Site) createOrderIntent(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	ref := c.Param("ref")
	_, _, err := s.svc.CreateOrderPaymentRequest(c.Request.Context(), me, ref, chosenMethod(c), domain.ClientNetwork(c.ClientIP()))
	s.intentCreated(c, err, orderURL(ref), func(refusal error) { s.showOrder(c, me, refusal) })
}

func (s *Site) payFromBalance(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	ref := c.Param("ref")
	if _, err := s.svc.PayFromBalance(c.Request.Context(), me, ref); err != nil {
		if code := domain.ErrorCode(err); code == domain.ECodeInsufficient || code == domain.ECodeConflict {
			s.showOrder(c, me, err)
			return
		}
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, orderURL(ref)+"?info=balance")
}

// privateKey hands the generated private key over as a file: the API's
// explicit reveal (a POST with the CSRF token), which starts its window.
func (s *Site) privateKey(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	ref := c.Param("ref")
	key, _, err := s.svc.RevealPrivateKey(c.Request.Context(), me, ref)
	if domain.ErrorCode(err) == domain.ECodeConflict {
		p := pageFor(me, "Clé privée indisponible")
		p.Error = domain.ErrorMessage(err) + " Si vous ne l'avez pas enregistrée, contactez le support avec la référence " + ref + "."
		s.render(c, http.StatusConflict, "error", p)
		return
	}
	if err != nil {
		s.failOrder(c, err)
		return
	}
	c.Header("Content-Disposition", `attachment; filename="kernodeck-`+ref+`.key"`)
	c.Data(http.StatusOK, "application/x-pem-file", []byte(key))
}

// supportFormData is the support request form.
type supportFormData struct {
	Order  api.OrderView
	Values map[string]string
}

var supportFields = []string{"message", "launch_command", "versions", "first_error"}

// orderOf reads the signed-in customer's order named in the path (ok
// false: the answer is written).
func (s *Site) orderOf(c *gin.Context) (*session, api.OrderDetail, bool) {
	me, ok := s.signedIn(c)
	if !ok {
		return nil, api.OrderDetail{}, false
	}
	d, err := s.svc.Order(c.Request.Context(), me, c.Param("ref"))
	if err != nil {
		s.failOrder(c, err)
		return nil, d, false
	}
	return me, d, true
}

func (s *Site) supportForm(c *gin.Context) {
	me, d, ok := s.orderOf(c)
	if !ok {
		return
	}
	p := pageFor(me, "Demande de support "+d.Order.Ref)
	p.Data = supportFormData{Order: d.Order, Values: map[string]string{}}
	s.render(c, http.StatusOK, "support", p)
}

func (s *Site) createSupportRequest(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	ref := c.Param("ref")
	values := map[string]string{"when": c.PostForm("when")}
	for _, f := range supportFields {
		values[f] = c.PostForm(f)
	}
	in := api.SupportRequestInput{Message: values["message"], LaunchCommand: values["launch_command"],
		Versions: values["versions"], FirstError: values["first_error"]}
	if when := strings.TrimSpace(values["when"]); when != "" && strings.TrimSpace(in.Message) != "" {
		// The request has no field for it: it leads the message.
		in.Message = "Moment du problème : " + when + "\n\n" + in.Message
	}
	_, err := s.svc.CreateSupportRequest(c.Request.Context(), me, ref, in)
	if err == nil {
		c.Redirect(http.StatusSeeOther, orderURL(ref)+"?info=support#support")
		return
	}
	if domain.ErrorCode(err) != domain.ECodeInvalid {
		s.failOrder(c, err)
		return
	}
	d, gerr := s.svc.Order(c.Request.Context(), me, ref)
	if gerr != nil {
		s.failOrder(c, gerr)
		return
	}
	p := pageFor(me, "Demande de support "+d.Order.Ref)
	p.Data = supportFormData{Order: d.Order, Values: values}
	p.fieldError(err)
	s.render(c, statusOf(err), "support", p)
}

// failOrder answers an error about an order: not found is the site's 404.
func (s *Site) failOrder(c *gin.Context, err error) {
	if domain.ErrorCode(err) == domain.ECodeNotFound {
		s.notFound(c)
		return
	}
	s.fail(c, err)
}
