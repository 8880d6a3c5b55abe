package api

import (
	"context"
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// AccountStore keeps accounts, sessions and the authentication throttle.
type AccountStore interface {
	CreateAccount(ctx context.Context, a domain.Account, passwordHash string) (domain.Account, error)
	// RegisterAccount creates a customer's account, address unconfirmed,
	// with its confirmation mail queued.
	RegisterAccount(ctx context.Context, a domain.Account, passwordHash string, now time.Time) (domain.Account, error)
	VerifyEmail(ctx context.Context, accountID int64, email string) (already bool, err error)
	ResendVerification(ctx context.Context, accountID int64, now time.Time, every time.Duration, perDay int) (time.Duration, error)
	// LoginFailures and AddLoginFailure count an email's failed logins
	// from one network within a window: they slow its logins from there,
	// never lock them.
	LoginFailures(ctx context.Context, key string, window time.Duration) (int, error)
	AddLoginFailure(ctx context.Context, key string, window time.Duration) error
	AccountByEmail(ctx context.Context, email string) (domain.Account, string, error)
	Account(ctx context.Context, id int64) (domain.Account, error)
	CreateSession(ctx context.Context, tokenHash []byte, accountID int64, csrfToken string, expiresAt time.Time, idle time.Duration, client domain.SessionClient) error
	SessionAccount(ctx context.Context, tokenHash []byte) (domain.Account, string, error)
	// PeekSession is SessionAccount without recording a use (live streams).
	PeekSession(ctx context.Context, tokenHash []byte) (domain.Account, string, error)
	DeleteSession(ctx context.Context, tokenHash []byte) error
	Attempt(ctx context.Context, rules []domain.ThrottleRule) (retryAfter time.Duration, err error)
	Forgive(ctx context.Context, undo, reset []string) error
	ThrottleLocked(ctx context.Context, rules []domain.ThrottleRule) (time.Duration, error)
}

// CatalogStore reads the catalog.
type CatalogStore interface {
	Catalog(ctx context.Context) ([]domain.CatalogItem, error)
	CatalogItem(ctx context.Context, model string) (domain.CatalogItem, error)
}

// OrderStore keeps orders, their timelines and access information.
type OrderStore interface {
	CreateOrder(ctx context.Context, accountID int64, q domain.Quote) (domain.Order, error)
	ListOrders(ctx context.Context, accountID int64) ([]domain.Order, error)
	GetOrder(ctx context.Context, ref string) (domain.Order, error)
	OrderForAccount(ctx context.Context, ref string, accountID int64) (domain.Order, error)
	// OwnerOrder is OrderForAccount with everything the owner sees of the
	// order (timeline, payment requests and payments, access) at once.
	OwnerOrder(ctx context.Context, ref string, accountID int64) (domain.OrderRecord, error)
	// SessionOrder is SessionAccount and OwnerOrder at once; ErrNotFound
	// when either finds nothing.
	SessionOrder(ctx context.Context, tokenHash []byte, ref string) (domain.SessionOrder, error)
	// SessionOrderPage is SessionOrder with the page's parts (Page).
	SessionOrderPage(ctx context.Context, tokenHash []byte, ref string) (domain.SessionOrder, error)
	MarkOrderWorkflowStarted(ctx context.Context, ref string) error
	Timeline(ctx context.Context, ref string, afterID int64) ([]domain.TimelineEvent, error)
	Access(ctx context.Context, ref string) (domain.Access, error)
}

// TopUpStore keeps top-ups.
type TopUpStore interface {
	CreateTopUp(ctx context.Context, accountID, amountCents int64) (domain.TopUp, error)
	GetTopUp(ctx context.Context, ref string) (domain.TopUp, error)
	TopUpForAccount(ctx context.Context, ref string, accountID int64) (domain.TopUp, error)
	ListTopUps(ctx context.Context, accountID int64) ([]domain.TopUp, error)
	MarkTopUpWorkflowStarted(ctx context.Context, ref string) error
}

// BalanceStore reads a customer's balance (available and pending apart).
type BalanceStore interface {
	Balance(ctx context.Context, accountID int64) (domain.Balance, error)
}

// SupportStore keeps the support audit log and customers' support requests.
type SupportStore interface {
	InsertSupportAction(ctx context.Context, a domain.SupportAction) (int64, error)
	KeyedSupportStore
	ListSupportActions(ctx context.Context, targetRef string) ([]domain.SupportAction, error)
	CreateSupportRequest(ctx context.Context, r domain.SupportRequest) (domain.SupportRequest, error)
	ListSupportRequests(ctx context.Context, orderRef string, accountID int64) ([]domain.SupportRequest, error)
	OpenSupportRequests(ctx context.Context, limit int) ([]domain.SupportRequest, error)
	AwaitingApproval(ctx context.Context) ([]domain.SupportAction, error)
	ReviewSupportAction(ctx context.Context, id int64, reviewer string, approve bool, reason string, capCents int64) (domain.SupportAction, error)
	AnswerSupportRequest(ctx context.Context, id int64, agent, message string, now time.Time) (domain.SupportRequest, error)
	// The exception queue: received amounts not settled, oldest first.
	OpenExceptions(ctx context.Context) ([]domain.Exception, error)
	Exception(ctx context.Context, id int64) (domain.Exception, error)
	ExceptionsOf(ctx context.Context, ref string) ([]domain.Exception, error)
	// ValueException states the value of an amount received in another asset.
	ValueException(ctx context.Context, v domain.ExceptionValue) error
	// ValueBound is the range a value of that amount may take (Known
	// false: no rate observed near its reception).
	ValueBound(ctx context.Context, exceptionID int64) (domain.ValueBound, error)
	// Find finds orders and top-ups by reference, email, txid or address.
	Find(ctx context.Context, q string) ([]domain.FoundCase, error)
}

// Stores are what the API persists, by role: each a small interface of
// the methods its services call (app.APIStores gives postgres.Store for
// every one). All are required.
type Stores struct {
	Accounts       AccountStore
	AccountPages   AccountPageStore
	Catalog        CatalogStore
	Orders         OrderStore
	TopUps         TopUpStore
	Balances       BalanceStore
	BalanceHistory BalanceHistoryStore
	Support        SupportStore
	Payments       PaymentStore
	Quotas         QuotaStore
	AgentSessions  AgentSessionStore
	SupportHosts   SupportHostStore
	Cases          CaseListStore
}

// missing names the first store not given.
func (s Stores) missing() string {
	for name, st := range map[string]any{"Accounts": s.Accounts, "AccountPages": s.AccountPages, "Catalog": s.Catalog,
		"Orders": s.Orders, "TopUps": s.TopUps, "Balances": s.Balances, "BalanceHistory": s.BalanceHistory,
		"Support": s.Support, "Payments": s.Payments, "Quotas": s.Quotas, "AgentSessions": s.AgentSessions,
		"SupportHosts": s.SupportHosts, "Cases": s.Cases} {
		if st == nil {
			return name
		}
	}
	return ""
}
