package web

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// target is what a checkout pays: an order or a top-up.
type target struct {
	Kind       string // "order" or "topup"
	Ref        string
	Status     string
	TotalCents int64
	PaidCents  int64
	LateCents  int64
	// Unpaid: the target still waits for its payment.
	Unpaid bool
}

// checkout is the payment part of an order's or a top-up's page.
type checkout struct {
	Target  target
	Methods []domain.Method
	// Active is the payment request to pay now (nil if none is valid);
	// Expired the latest one whose deadline passed (never to be reused).
	Active  *api.IntentView
	Expired *api.IntentView
	Intents []api.IntentView
	// RemainingCents is what is still due; OverpaidCents what was received
	// beyond the total (flagged for refund).
	RemainingCents int64
	OverpaidCents  int64
	// Balance: the available balance, and whether it covers the order.
	BalanceCents   int64
	PayFromBalance bool
	// Seen are the payments seen on chain for the active request, not yet
	// confirmed (shown with "x sur N" confirmations).
	Seen []domain.IntentPayment
}

// Partial: some money was counted, not all.
func (ck checkout) Partial() bool { return ck.Target.Unpaid && ck.Target.PaidCents > 0 }

// Detected: a payment is seen on chain, waiting for its confirmations.
func (ck checkout) Detected() bool {
	return ck.Target.Status == domain.StatusPaymentDetected || ck.Target.Status == domain.TopUpPaymentDetected
}

func (s *Site) checkout(c *gin.Context, me *session, t target, intents []api.IntentView, tl []domain.TimelineEvent) (checkout, error) {
	ck := checkout{Target: t, Intents: intents}
	for i := range intents {
		in := &intents[i]
		if in.Status != domain.IntentOpen && in.Status != "" {
			continue
		}
		if !in.Expired && ck.Active == nil {
			ck.Active = in
		}
	}
	if ck.Active == nil && len(intents) > 0 {
		ck.Expired = &intents[0] // newest first
	}
	for _, in := range intents {
		for _, p := range in.Payments {
			if p.State != "confirmed" {
				ck.Seen = append(ck.Seen, p)
			}
		}
	}
	ck.RemainingCents = max(0, t.TotalCents-t.PaidCents)
	for _, ev := range tl {
		var data struct {
			Overpaid int64 `json:"overpaid_cents"`
		}
		if ev.Kind == domain.EventPaymentConfirmed && json.Unmarshal(ev.Data, &data) == nil && data.Overpaid > 0 {
			ck.OverpaidCents = data.Overpaid
		}
	}
	if !t.Unpaid {
		return ck, nil
	}
	ck.Methods = s.svc.PaymentMethods()
	if t.Kind == "order" && t.PaidCents == 0 {
		b, err := s.svc.Balance(c.Request.Context(), me)
		if err != nil {
			return ck, err
		}
		ck.BalanceCents = b.AvailableCents
		ck.PayFromBalance = b.AvailableCents >= t.TotalCents
	}
	return ck, nil
}

// chosenMethod is the method chosen in the form ("LTC/litecoin").
func chosenMethod(c *gin.Context) api.PaymentRequest {
	asset, network, _ := strings.Cut(c.PostForm("method"), "/")
	return api.PaymentRequest{Asset: asset, Network: network}
}

// intentCreated goes back to the page's checkout once a payment request
// is made. A refusal (no fresh rate, method not offered...) is shown on
// the page by show, with its message; the page stays usable.
func (s *Site) intentCreated(c *gin.Context, err error, pageURL string, show func(refusal error)) {
	switch domain.ErrorCode(err) {
	case "":
		c.Redirect(http.StatusSeeOther, pageURL+"#paiement")
	case domain.ECodeNotFound, domain.ECodeUnauthorized:
		s.fail(c, err)
	default:
		show(err)
	}
}

// claim records "J'ai payé" on a payment request. It confirms nothing.
func (s *Site) claim(c *gin.Context) {
	me, ok := s.signedInPost(c)
	if !ok {
		return
	}
	in, err := s.svc.ClaimPaid(c.Request.Context(), me, c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	back := orderURL(in.TargetRef)
	if in.TargetKind == "topup" {
		back = topUpURL(in.TargetRef)
	}
	c.Redirect(http.StatusSeeOther, back+"?info=claimed#paiement")
}
