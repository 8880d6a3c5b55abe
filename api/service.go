package api

import (
	"context"
	"crypto/subtle"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// The customer's services in Go: the JSON handlers decode a request, call
// one of these and encode its answer; the web site's handlers call the same
// methods and render templates. Each takes who is acting (a *Customer from
// CustomerSession) and returns typed values and *domain.Error, so the rules,
// the ownership checks and the French messages live here once.

// Customer is a signed-in customer: the account, the session's CSRF token
// and the session's key (never the token itself).
type Customer = sessionResponse

// customer is the request's authenticated customer (after customerAuth).
func customer(c *gin.Context) *Customer {
	return &Customer{Account: account(c), CSRFToken: c.GetString(ctxCSRF), tokenHash: currentSession(c)}
}

// CustomerSession reads the session named by the request's cookie or bearer
// token: nil (no error) when there is none or it is no longer valid.
func (s *Server) CustomerSession(ctx context.Context, r *http.Request) (*Customer, error) {
	token, _ := s.sessionToken(r)
	if token == "" {
		return nil, nil
	}
	h := tokenHash(token)
	acc, csrf, err := s.stores.Accounts.SessionAccount(ctx, h)
	if domain.ErrorCode(err) == domain.ECodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &Customer{Account: acc, CSRFToken: csrf, tokenHash: h}, nil
}

// errFormCSRF refuses a form whose anti-CSRF token is not the session's.
var errFormCSRF = &domain.Error{Code: domain.ECodeForbidden,
	Message: "Ce formulaire n'est plus valide (jeton anti-CSRF manquant ou périmé) : rechargez la page et recommencez."}

// CheckCSRF refuses a form post whose token is not the session's.
func (s *Server) CheckCSRF(me *Customer, token string) error {
	if me == nil || subtle.ConstantTimeCompare([]byte(token), []byte(me.CSRFToken)) != 1 {
		return errFormCSRF
	}
	return nil
}

// ClearSession removes the session cookie from the browser (an expired or
// ended session).
func (s *Server) ClearSession(c *gin.Context) { s.clearSessionCookie(c) }

// Order is the caller's order with everything its owner sees.
func (s *Server) Order(ctx context.Context, me *Customer, ref string) (OrderDetail, error) {
	return s.orderDetail(ctx, ref, me.Account.ID)
}

// Orders lists the caller's orders, newest first.
func (s *Server) Orders(ctx context.Context, me *Customer) ([]OrderView, error) {
	orders, err := s.stores.Orders.ListOrders(ctx, me.Account.ID)
	if err != nil {
		return nil, err
	}
	views := make([]orderView, len(orders))
	for i, o := range orders {
		views[i] = viewOrder(o)
	}
	return views, nil
}

// ownOrderRef loads the caller's order ref (ErrNotFound as the order's 404).
func (s *Server) ownOrderRef(ctx context.Context, me *Customer, ref string) (domain.Order, error) {
	o, err := s.stores.Orders.OrderForAccount(ctx, ref, me.Account.ID)
	if err != nil {
		return domain.Order{}, notFoundAs(err, errOrderNotFound)
	}
	return o, nil
}

// SupportRequests lists the support requests of the caller's order ref.
func (s *Server) SupportRequests(ctx context.Context, me *Customer, ref string) ([]domain.SupportRequest, error) {
	o, err := s.ownOrderRef(ctx, me, ref)
	if err != nil {
		return nil, err
	}
	return s.stores.Support.ListSupportRequests(ctx, o.Ref, o.AccountID)
}

// Balance is the caller's balance, available and pending apart.
func (s *Server) Balance(ctx context.Context, me *Customer) (domain.Balance, error) {
	return s.stores.Balances.Balance(ctx, me.Account.ID)
}

// BalanceHistory is the caller's balance movements, newest first.
func (s *Server) BalanceHistory(ctx context.Context, me *Customer) ([]domain.BalanceMovement, error) {
	return s.stores.BalanceHistory.BalanceHistory(ctx, me.Account.ID, maxBalanceHistory)
}

// TopUps lists the caller's top-ups, newest first.
func (s *Server) TopUps(ctx context.Context, me *Customer) ([]TopUpView, error) {
	ts, err := s.stores.TopUps.ListTopUps(ctx, me.Account.ID)
	if err != nil {
		return nil, err
	}
	views := make([]topUpView, len(ts))
	for i, t := range ts {
		views[i] = viewTopUp(t)
	}
	return views, nil
}

// TopUp is the caller's top-up ref with its timeline and payment requests.
func (s *Server) TopUp(ctx context.Context, me *Customer, ref string) (TopUpDetail, error) {
	t, err := s.stores.TopUps.TopUpForAccount(ctx, ref, me.Account.ID)
	if err != nil {
		return topUpDetail{}, notFoundAs(err, errTopUpNotFound)
	}
	return s.topUpDetail(ctx, t)
}

// PaymentMethods are the payment methods offered now.
func (s *Server) PaymentMethods() []domain.Method {
	methods := []domain.Method{}
	if s.methods != nil {
		methods = append(methods, s.methods.Enabled()...)
	}
	return methods
}

// Sessions lists the caller's open sessions (the current one marked).
func (s *Server) Sessions(ctx context.Context, me *Customer) ([]domain.Session, error) {
	return s.stores.AccountPages.AccountSessions(ctx, me.Account.ID, me.tokenHash)
}

// Activity is the caller's account activity and failed logins.
func (s *Server) Activity(ctx context.Context, me *Customer) (ActivityResponse, error) {
	entries, failures, failed, err := s.stores.AccountPages.AccountActivity(ctx, me.Account.ID, activityShown, s.now().Add(-failedLoginsWindow))
	if err != nil {
		return activityResponse{}, err
	}
	return activityResponse{Activity: entries, LoginFailures: failures, FailedLogins: failed}, nil
}

// KeyRequest is the last key change (lost key) of the caller's order ref.
func (s *Server) KeyRequest(ctx context.Context, me *Customer, ref string) (domain.KeyRequest, error) {
	o, st, err := s.ownKeyRequests(ctx, me, ref)
	if err != nil {
		return domain.KeyRequest{}, err
	}
	kr, err := st.LatestKeyRequest(ctx, o.Ref)
	if err != nil {
		return domain.KeyRequest{}, notFoundAs(err, domain.Errorf(domain.ECodeNotFound, "Aucun changement de clé pour cette commande."))
	}
	return kr, nil
}

// answer encodes a service's result: v with status, or err's answer.
func (s *Server) answer(c *gin.Context, status int, v any, err error) {
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(status, v)
}

// OrderPage is everything an order's page shows: the order as its owner
// sees it, its support requests and its last key change (nil: none).
type OrderPage struct {
	OrderDetail
	SupportRequests []domain.SupportRequest
	KeyRequest      *domain.KeyRequest
}

// SessionOrderPage reads the request's session and its order ref's page
// together (the session and the order in one statement, as GET
// /v1/orders/{ref} does): me nil (no error) when no session is valid.
func (s *Server) SessionOrderPage(ctx context.Context, r *http.Request, ref string) (me *Customer, page OrderPage, err error) {
	token, _ := s.sessionToken(r)
	if token == "" {
		return nil, page, nil
	}
	h := tokenHash(token)
	so, err := s.stores.Orders.SessionOrderPage(ctx, h, ref)
	if domain.ErrorCode(err) == domain.ECodeNotFound {
		// No valid session, or not the account's order: the session read
		// alone says which.
		if me, err = s.CustomerSession(ctx, r); err == nil && me != nil {
			err = errOrderNotFound
		}
		return me, page, err
	}
	if err != nil {
		return nil, page, err
	}
	me = &Customer{Account: so.Account, CSRFToken: so.CSRFToken, tokenHash: h}
	return me, s.pageOf(so.Order, *so.Page), nil
}

// OrderPage is the caller's order ref with what its page shows.
func (s *Server) OrderPage(ctx context.Context, me *Customer, ref string) (OrderPage, error) {
	rec, err := s.stores.Orders.OwnerOrder(ctx, ref, me.Account.ID)
	if err != nil {
		return OrderPage{}, notFoundAs(err, errOrderNotFound)
	}
	return s.orderPage(ctx, me, rec)
}

// orderPage completes the page of an order already read as its owner's.
func (s *Server) orderPage(ctx context.Context, me *Customer, rec domain.OrderRecord) (OrderPage, error) {
	var parts domain.OrderPageParts
	var err error
	if parts.SupportRequests, err = s.stores.Support.ListSupportRequests(ctx, rec.Order.Ref, me.Account.ID); err != nil {
		return OrderPage{}, err
	}
	if s.keyChangeShown(rec) {
		kr, err := s.keyRequests.LatestKeyRequest(ctx, rec.Order.Ref)
		switch {
		case err == nil:
			parts.KeyRequest = &kr
		case domain.ErrorCode(err) != domain.ECodeNotFound:
			return OrderPage{}, err
		}
	}
	return s.pageOf(rec, parts), nil
}

// pageOf is the page of an order with its parts.
func (s *Server) pageOf(rec domain.OrderRecord, parts domain.OrderPageParts) OrderPage {
	p := OrderPage{OrderDetail: s.detail(rec), SupportRequests: parts.SupportRequests}
	if s.keyChangeShown(rec) {
		p.KeyRequest = parts.KeyRequest
	}
	return p
}

// keyChangeShown: the page shows the latest key change while the order's
// access is live (and keys can be changed here).
func (s *Server) keyChangeShown(rec domain.OrderRecord) bool {
	a := rec.Access
	return a != nil && a.RevokedAt == nil && s.keyRequests != nil
}
