package web

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// services is what the site asks of the application: package api's
// services, called in Go (typed values, *domain.Error with its French
// message), never through the JSON API.
type services interface {
	sessions
	orderReader
	balanceReader
	accountReader
	orderActions
	accountActions
	signIn
	catalog
	console
	twoFactor
	extensions
	payoutServices
}

// signIn registers and signs customers in and out.
type signIn interface {
	Register(ctx context.Context, in api.RegisterInput, cl domain.SessionClient) (domain.Account, error)
	Login(ctx context.Context, email, password string, cl domain.SessionClient) (domain.Account, error)
	OpenSession(c *gin.Context, acc domain.Account) (*api.Customer, error)
	Logout(ctx context.Context, me *api.Customer) error
	VerifyEmail(ctx context.Context, token string) (already bool, err error)
	ResendVerification(ctx context.Context, me *api.Customer) error
}

// catalog reads the catalog and prices configurations.
type catalog interface {
	Catalog(ctx context.Context) (api.CatalogResponse, error)
	Quote(ctx context.Context, cfg domain.Configuration) (api.QuoteResponse, error)
}

// accountActions change a customer's account: sessions and password.
type accountActions interface {
	EndSession(ctx context.Context, me *api.Customer, id int64, cl domain.SessionClient) (bool, error)
	EndOtherSessions(ctx context.Context, me *api.Customer, cl domain.SessionClient) (int64, error)
	ChangePassword(ctx context.Context, me *api.Customer, current, next, code string, cl domain.SessionClient) (int64, error)
}

// customerClient is the client a session change is recorded with (the
// account's activity shows it).
func customerClient(c *gin.Context) domain.SessionClient {
	return domain.NewSessionClient(c.GetHeader("User-Agent"), c.ClientIP())
}

// orderActions are a customer's actions on their orders and payments.
type orderActions interface {
	CancelOrder(ctx context.Context, me *api.Customer, ref, reason string) (api.OrderDetail, error)
	PayFromBalance(ctx context.Context, me *api.Customer, ref string) (api.OrderDetail, error)
	CreateSupportRequest(ctx context.Context, me *api.Customer, ref string, in api.SupportRequestInput) (domain.SupportRequest, error)
	RevealPrivateKey(ctx context.Context, me *api.Customer, ref string) (string, time.Time, error)
	RequestKeyChange(ctx context.Context, me *api.Customer, ref, kind, publicKey string) (domain.KeyRequest, error)
	CreateOrderPaymentRequest(ctx context.Context, me *api.Customer, ref string, req api.PaymentRequest, clientNetwork string) (api.IntentView, bool, error)
	CreateTopUpPaymentRequest(ctx context.Context, me *api.Customer, ref string, req api.PaymentRequest) (api.IntentView, bool, error)
	ClaimPaid(ctx context.Context, me *api.Customer, id string) (api.IntentView, error)
	TakeBack(ctx context.Context, me *api.Customer, ref string) (api.OrderDetail, error)
	CreateOrder(ctx context.Context, me *api.Customer, req api.OrderRequest) (api.OrderDetail, error)
	CreateTopUp(ctx context.Context, me *api.Customer, amountCents int64) (api.TopUpDetail, error)
}

// sessions finds the signed-in customer and checks a form's CSRF token.
type sessions interface {
	CustomerSession(ctx context.Context, r *http.Request) (*api.Customer, error)
	CheckCSRF(me *api.Customer, token string) error
	ClearSession(c *gin.Context)
}

// orderReader reads a customer's orders and what their pages show.
type orderReader interface {
	Order(ctx context.Context, me *api.Customer, ref string) (api.OrderDetail, error)
	OrderPage(ctx context.Context, me *api.Customer, ref string) (api.OrderPage, error)
	SessionOrderPage(ctx context.Context, r *http.Request, ref string) (*api.Customer, api.OrderPage, error)
	Orders(ctx context.Context, me *api.Customer) ([]api.OrderView, error)
	PaymentMethods() []domain.Method
}

// balanceReader reads a customer's balance and top-ups.
type balanceReader interface {
	Balance(ctx context.Context, me *api.Customer) (domain.Balance, error)
	BalanceHistory(ctx context.Context, me *api.Customer) ([]domain.BalanceMovement, error)
	TopUps(ctx context.Context, me *api.Customer) ([]api.TopUpView, error)
	TopUp(ctx context.Context, me *api.Customer, ref string) (api.TopUpDetail, error)
}

// accountReader reads a customer's sessions and account activity.
type accountReader interface {
	Sessions(ctx context.Context, me *api.Customer) ([]domain.Session, error)
	Activity(ctx context.Context, me *api.Customer) (api.ActivityResponse, error)
}
