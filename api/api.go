// Package api is Kernodeck's customer and support HTTP API (Gin, JSON, under
// /v1). Customers authenticate with a session (cookie __Host-kd_session, or the same
// token as "Authorization: Bearer" for a CLI); support agents with their own
// bearer tokens. Everything that touches a rental or a top-up in progress goes
// through the Workflows interface; the rest reads and writes the Store.
//
// Every error response is {"error": {"code", "message", "field"}} with a
// stable code from package domain and a French message; statusFor maps the
// codes to HTTP statuses.
package api

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/mailverify"
	"github.com/kernodeck/kernodeck/secrets"
	"github.com/kernodeck/kernodeck/workflows"
)

// Defaults for the zero fields of Config.
const (
	DefaultSessionTTL          = 30 * 24 * time.Hour
	DefaultSessionIdle         = 7 * 24 * time.Hour
	DefaultMaxBodyBytes        = 64 << 10
	DefaultLoginWindow         = 15 * time.Minute
	DefaultMaxFailuresPerEmail = 5
	DefaultMaxFailuresPerIP    = 20
	DefaultLoginSlowAfter      = 10
	DefaultLoginDelayBase      = 500 * time.Millisecond
	DefaultLoginDelayMax       = 10 * time.Second
	DefaultVerifyResendEvery   = 5 * time.Minute
	DefaultVerifyResendPerDay  = 5
	DefaultLoginLockout        = 15 * time.Minute
	DefaultRegistrationsPerIP  = 10
	DefaultRegistrationWindow  = time.Hour
	DefaultSSEPoll             = 5 * time.Second
	DefaultSSEHeartbeat        = 15 * time.Second
	DefaultSSESessionCheck     = 10 * time.Second
	DefaultSSEMaxAge           = 30 * time.Minute
	DefaultWorkflowTimeout     = 30 * time.Second
)

// Config is the API's configuration. Zero fields take the defaults above.
type Config struct {
	// CookieSecure sets the Secure flag of the session cookie. Keep it on
	// in production; turn it off only for local plain-http development.
	CookieSecure bool
	// SessionTTL is a session's lifetime (30 days).
	SessionTTL time.Duration
	// SessionIdle ends a session unused that long (7 days); its last use
	// is recorded at most every postgres.SessionTouchEvery (5 minutes).
	SessionIdle time.Duration
	// AgentTokens maps each support agent's bearer token to the agent's
	// name, recorded in the audit log. Tokens shorter than 16 characters
	// are ignored (and logged).
	AgentTokens map[string]string
	// TrustedProxies are the proxies whose X-Forwarded-For is believed for
	// the client IP (login throttling). Empty: none, the peer address is used.
	TrustedProxies []string
	// MaxBodyBytes limits request bodies (64 KiB).
	MaxBodyBytes int64
	// Login throttling, decided atomically in PostgreSQL before the password
	// is checked. Within LoginWindow (15 min): MaxFailuresPerEmail (5)
	// failures for one email from one network (IPv4 address, IPv6 /56),
	// MaxFailuresPerIP (20) from one network whatever the email, and
	// Past a limit: 429 for LoginLockout (15 min), doubled at each further
	// lock up to a day. The account itself is never locked (its owner must
	// get in whatever others try): past LoginSlowAfter (10) failures for one
	// email from all networks together within LoginWindow, every login for
	// that email waits LoginDelayBase (0.5 s), doubled at each further
	// failure up to LoginDelayMax (10 s), before its password is checked.
	LoginWindow         time.Duration
	MaxFailuresPerEmail int
	MaxFailuresPerIP    int
	LoginLockout        time.Duration
	LoginSlowAfter      int
	LoginDelayBase      time.Duration
	LoginDelayMax       time.Duration
	// An unconfirmed account may have its confirmation mail sent again
	// once per VerifyResendEvery (5 min), VerifyResendPerDay times (5) per
	// 24 hours, the registration's mail included.
	VerifyResendEvery  time.Duration
	VerifyResendPerDay int
	// RegistrationsPerIP accounts may be created from one network per
	// RegistrationWindow (10 per hour).
	RegistrationsPerIP int
	RegistrationWindow time.Duration
	// Quotas bound what an account creates or opens (quotas.go).
	Quotas Quotas
	// AllowedOrigins are browser origins, besides the API's own host, whose
	// state-changing requests are accepted (a request with any other Origin
	// header is refused: cross-site request forgery).
	AllowedOrigins []string
	// Argon2 are the password hashing parameters (zero: OWASP's 19 MiB,
	// 2 passes, 1 lane).
	Argon2 Argon2Params
	// Rental is captured into every new rental workflow's input.
	Rental workflows.RentalConfig
	// TopUpTimeout expires an unpaid top-up (0: the workflow's default).
	TopUpTimeout time.Duration
	// Confirmations is the confirmation policy per network, shown with the
	// payments seen for a payment request ("2 of 6").
	Confirmations map[string]int64
	// SSEPoll is the order stream's fallback poll interval (5 s) and
	// SSEHeartbeat its keep-alive comment interval (15 s).
	SSEPoll      time.Duration
	SSEHeartbeat time.Duration
	// SSESessionCheck is how often a live stream reads its session again
	// (10 s): it ends once the session is gone (logout, expiry). SSEMaxAge
	// ends every stream after at most that long (30 min, less up to a
	// tenth so that streams opened together do not all reconnect at once);
	// EventSource reconnects by itself with Last-Event-ID, through the
	// session check of a new request.
	SSESessionCheck time.Duration
	SSEMaxAge       time.Duration
	// WorkflowTimeout bounds each call to the Workflows (30 s).
	WorkflowTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.SessionIdle <= 0 {
		c.SessionIdle = DefaultSessionIdle
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.LoginWindow <= 0 {
		c.LoginWindow = DefaultLoginWindow
	}
	if c.MaxFailuresPerEmail <= 0 {
		c.MaxFailuresPerEmail = DefaultMaxFailuresPerEmail
	}
	if c.MaxFailuresPerIP <= 0 {
		c.MaxFailuresPerIP = DefaultMaxFailuresPerIP
	}
	if c.LoginSlowAfter <= 0 {
		c.LoginSlowAfter = DefaultLoginSlowAfter
	}
	if c.LoginDelayBase <= 0 {
		c.LoginDelayBase = DefaultLoginDelayBase
	}
	if c.LoginDelayMax <= 0 {
		c.LoginDelayMax = DefaultLoginDelayMax
	}
	if c.VerifyResendEvery <= 0 {
		c.VerifyResendEvery = DefaultVerifyResendEvery
	}
	if c.VerifyResendPerDay <= 0 {
		c.VerifyResendPerDay = DefaultVerifyResendPerDay
	}
	if c.LoginLockout <= 0 {
		c.LoginLockout = DefaultLoginLockout
	}
	if c.RegistrationsPerIP <= 0 {
		c.RegistrationsPerIP = DefaultRegistrationsPerIP
	}
	if c.RegistrationWindow <= 0 {
		c.RegistrationWindow = DefaultRegistrationWindow
	}
	c.Quotas.setDefaults()
	if c.Argon2 == (Argon2Params{}) {
		c.Argon2 = defaultArgon2()
	}
	if c.SSEPoll <= 0 {
		c.SSEPoll = DefaultSSEPoll
	}
	if c.SSEHeartbeat <= 0 {
		c.SSEHeartbeat = DefaultSSEHeartbeat
	}
	if c.SSESessionCheck <= 0 {
		c.SSESessionCheck = DefaultSSESessionCheck
	}
	if c.SSEMaxAge <= 0 {
		c.SSEMaxAge = DefaultSSEMaxAge
	}
	if c.WorkflowTimeout <= 0 {
		c.WorkflowTimeout = DefaultWorkflowTimeout
	}
}

// AccountStore keeps accounts, sessions and the authentication throttle.
type AccountStore interface {
	CreateAccount(ctx context.Context, a domain.Account, passwordHash string) (domain.Account, error)
	// RegisterAccount creates a customer's account, address unconfirmed,
	// with its confirmation mail queued.
	RegisterAccount(ctx context.Context, a domain.Account, passwordHash string, now time.Time) (domain.Account, error)
	VerifyEmail(ctx context.Context, accountID int64, email string) (already bool, err error)
	ResendVerification(ctx context.Context, accountID int64, now time.Time, every time.Duration, perDay int) (time.Duration, error)
	// LoginFailures and AddLoginFailure count an email's failed logins
	// (every network) within a window: they slow its logins, never lock them.
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
	CompleteSupportAction(ctx context.Context, id int64, outcome, detail string) (domain.SupportAction, error)
	ListSupportActions(ctx context.Context, targetRef string) ([]domain.SupportAction, error)
	CreateSupportRequest(ctx context.Context, r domain.SupportRequest) (domain.SupportRequest, error)
	ListSupportRequests(ctx context.Context, orderRef string, accountID int64) ([]domain.SupportRequest, error)
	OpenSupportRequests(ctx context.Context, limit int) ([]domain.SupportRequest, error)
	AnswerSupportRequest(ctx context.Context, id int64, agent, message string, now time.Time) (domain.SupportRequest, error)
	// The exception queue: received amounts not settled, oldest first.
	OpenExceptions(ctx context.Context) ([]domain.Exception, error)
	Exception(ctx context.Context, id int64) (domain.Exception, error)
	ExceptionsOf(ctx context.Context, ref string) ([]domain.Exception, error)
	// ValueException states the value of an amount received in another asset.
	ValueException(ctx context.Context, v domain.ExceptionValue) error
	// Find finds orders and top-ups by reference, email, txid or address.
	Find(ctx context.Context, q string) ([]domain.FoundCase, error)
}

// Store is everything the API persists; *postgres.DB implements it.
type Store interface {
	AccountStore
	AccountPageStore
	CatalogStore
	OrderStore
	TopUpStore
	BalanceStore
	BalanceHistoryStore
	SupportStore
	PaymentStore
	QuotaStore
	AgentSessionStore
	SupportHostStore
}

// TimelineNotifier wakes an order's live stream when its timeline grows
// (*postgres.TimelineListener). Optional: without it streams only poll.
type TimelineNotifier interface {
	// Subscribe("") is woken by every reference's notifications.
	Subscribe(ref string) (<-chan struct{}, func())
}

// pinger is optionally implemented by the Store for /healthz.
type pinger interface {
	PingContext(ctx context.Context) error
}

// Site is the customer web site, mounted on the API's engine so that pages
// and /v1 share one origin, the session cookie and its CSRF token.
type Site interface {
	// Mount adds the site's routes to r (everything outside /v1).
	Mount(r *gin.Engine)
	// NotFound answers a path outside /v1 that no route serves.
	NotFound(c *gin.Context)
}

// Deps are the API's dependencies. Store and Workflows are required.
type Deps struct {
	Store     Store
	Workflows Workflows
	Timeline  TimelineNotifier
	// Methods lists the payment methods offered now (optional: none without).
	Methods MethodLister
	// Site, if set, is served at / beside the API (package web).
	Site Site
	// Hosts, if set, is the SSH driver's host inventory that operators see
	// and repair or retire from the support console (none: the console
	// says the machine driver has no inventory).
	Hosts  HostOperator
	Logger *slog.Logger
	// Requests, if set, is told of each answered request (metrics).
	Requests RequestObserver
	// Keyring opens the email confirmation links (sealed by the mail
	// dispatcher with the same ring). Without it a random key is made:
	// only links made by this process would open (tests).
	Keyring *secrets.Keyring
	// Now is the clock of link expiry and resend limits (time.Now when
	// nil); Sleep waits out a login's slow-down (a timer when nil).
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// RequestObserver records answered requests by route template and status.
type RequestObserver interface {
	ObserveRequest(method, route string, status int, d time.Duration)
}

// Server is the HTTP API.
type Server struct {
	cfg      Config
	store    Store
	wf       Workflows
	notifier TimelineNotifier
	methods  MethodLister
	hosts    HostOperator
	site     Site
	log      *slog.Logger
	engine   *gin.Engine
	requests RequestObserver

	links *mailverify.Signer
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	agents    []agentToken
	dummyHash string        // verified when the email is unknown: constant work
	hashSem   chan struct{} // bounds concurrent argon2 work (memory)

	closeOnce sync.Once
	closing   chan struct{} // closed by CloseStreams
	streams   agentStreams  // the console sessions' live streams
}

type agentToken struct {
	hash [sha256.Size]byte
	name string
}

// New builds the API. It panics if Store or Workflows is nil.
func New(cfg Config, deps Deps) *Server {
	if deps.Store == nil || deps.Workflows == nil {
		panic("api.New: Store and Workflows are required")
	}
	cfg.setDefaults()
	logger := deps.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{
		cfg:      cfg,
		store:    deps.Store,
		wf:       deps.Workflows,
		notifier: deps.Timeline,
		methods:  deps.Methods,
		hosts:    deps.Hosts,
		site:     deps.Site,
		log:      logger,
		requests: deps.Requests,
		hashSem:  make(chan struct{}, max(2, runtime.GOMAXPROCS(0))),
		closing:  make(chan struct{}),
		streams:  agentStreams{n: map[string]int{}},
	}
	for token, name := range cfg.AgentTokens {
		if len(token) < 16 || name == "" {
			logger.Error("support agent token ignored: shorter than 16 characters or without a name", "agent", name)
			continue
		}
		s.agents = append(s.agents, agentToken{hash: sha256.Sum256([]byte(token)), name: name})
	}
	dummy, err := hashPassword("kernodeck-dummy-password-for-constant-work", cfg.Argon2)
	if err != nil {
		panic("api.New: " + err.Error()) // crypto/rand failure
	}
	s.dummyHash = dummy
	s.now, s.sleep = deps.Now, deps.Sleep
	if s.now == nil {
		s.now = time.Now
	}
	if s.sleep == nil {
		s.sleep = sleepCtx
	}
	ring := deps.Keyring
	if ring == nil {
		logger.Warn("api: no keyring, email confirmation links made elsewhere will not open")
		ring, err = secrets.Parse(secrets.Generate("ephemeral"))
		if err != nil {
			panic("api.New: " + err.Error())
		}
	}
	s.links = &mailverify.Signer{Keyring: ring, Now: s.now}
	s.engine = s.routes()
	return s
}

// sleepCtx waits d, or less if ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.engine }

// CloseStreams ends every live order stream (call it before
// http.Server.Shutdown, which waits for open requests).
func (s *Server) CloseStreams() {
	s.closeOnce.Do(func() { close(s.closing) })
}

func (s *Server) routes() *gin.Engine {
	r := gin.New()
	if err := r.SetTrustedProxies(s.cfg.TrustedProxies); err != nil {
		s.log.Error("invalid trusted proxies, trusting none", "err", err)
		_ = r.SetTrustedProxies(nil)
	}
	r.Use(gin.CustomRecoveryWithWriter(io.Discard, s.recovered), s.logRequests, securityHeaders, s.refuseControlInURL, s.checkOrigin, s.limitBody)
	r.NoRoute(func(c *gin.Context) {
		if s.site != nil && !strings.HasPrefix(c.Request.URL.Path, "/v1/") {
			s.site.NotFound(c)
			return
		}
		s.fail(c, domain.Errorf(domain.ECodeNotFound, "Cette adresse n'existe pas dans l'API."))
	})

	r.GET("/healthz", s.healthz)

	v1 := r.Group("/v1")
	v1.GET("/openapi.yaml", serveOpenAPI)
	v1.GET("/catalog", s.getCatalog)
	v1.GET("/payment-methods", s.listMethods)
	v1.POST("/quote", s.postQuote)
	v1.POST("/auth/register", s.register)
	v1.POST("/auth/login", s.login)
	v1.POST("/auth/verify-email", s.verifyEmail)

	// The order read checks its session itself, in the statement that reads
	// the order (getOrder).
	v1.GET("/orders/:ref", s.getOrder)
	cust := v1.Group("", s.customerAuth)
	cust.POST("/auth/logout", s.logout)
	cust.GET("/me", s.me)
	cust.GET("/me/sessions", s.listSessions)
	cust.DELETE("/me/sessions/:id", s.endSession)
	cust.POST("/me/sessions/end-others", s.endOtherSessions)
	cust.POST("/me/password", s.changePassword)
	cust.GET("/me/activity", s.accountActivity)
	cust.POST("/auth/verify-email/resend", s.resendVerification)
	cust.GET("/balance", s.getBalance)
	cust.GET("/balance/history", s.getBalanceHistory)
	cust.POST("/orders", s.createOrder)
	cust.GET("/orders", s.listOrders)
	cust.GET("/orders/:ref/events", s.orderEvents)
	cust.POST("/orders/:ref/cancel", s.cancelOrder)
	cust.POST("/orders/:ref/pay-from-balance", s.payFromBalance)
	cust.POST("/orders/:ref/support-requests", s.createSupportRequest)
	cust.POST("/orders/:ref/private-key", s.revealPrivateKey)
	cust.POST("/orders/:ref/ssh-key", s.replaceSSHKey)
	cust.POST("/orders/:ref/ssh-key/reissue", s.reissueSSHKey)
	cust.GET("/orders/:ref/ssh-key/request", s.getKeyRequest)
	cust.GET("/orders/:ref/support-requests", s.listSupportRequests)
	cust.POST("/topups", s.createTopUp)
	cust.GET("/topups", s.listTopUps)
	cust.GET("/topups/:ref", s.getTopUp)
	cust.GET("/topups/:ref/events", s.topUpEvents)
	cust.POST("/orders/:ref/payment-intents", s.createOrderIntent)
	cust.GET("/orders/:ref/payment-intents", s.listOrderIntents)
	cust.POST("/topups/:ref/payment-intents", s.createTopUpIntent)
	cust.GET("/topups/:ref/payment-intents", s.listTopUpIntents)
	cust.GET("/payment-intents/:id", s.getIntent)
	cust.POST("/payment-intents/:id/claim", s.claimPaid)
	cust.GET("/payment-intents/:id/qr.png", s.intentQR)

	// The console's session is opened with the token itself (support_console.go).
	v1.POST("/support/session", s.agentAuth, s.openAgentSession)
	sup := v1.Group("/support", s.supportAuth)
	sup.GET("/session", s.agentWhoAmI)
	sup.DELETE("/session", s.closeAgentSession)
	sup.GET("/orders/:ref", s.supportGetOrder)
	sup.POST("/orders/:ref/attribute-payment", s.supportAttributeOrderPayment)
	sup.POST("/orders/:ref/extend", s.supportExtend)
	sup.POST("/orders/:ref/end-early", s.supportEndEarly)
	sup.POST("/orders/:ref/retry-provisioning", s.supportRetryProvisioning)
	sup.POST("/orders/:ref/cancel", s.supportCancelOrder)
	sup.POST("/orders/:ref/refund", s.supportRefund)
	sup.GET("/topups/:ref", s.supportGetTopUp)
	sup.GET("/support-requests", s.supportOpenRequests)
	sup.POST("/support-requests/:id/answer", s.supportAnswer)
	sup.POST("/topups/:ref/attribute-payment", s.supportAttributeTopUpPayment)
	sup.POST("/topups/:ref/cancel", s.supportCancelTopUp)
	sup.GET("/exceptions", s.supportExceptions)
	sup.GET("/provisioning-failures", s.supportProvisioningFailures)
	sup.GET("/host-flags", s.supportHostFlags)
	sup.POST("/orders/:ref/close-host-flag", s.supportCloseHostFlag)
	sup.GET("/accounts/:id", s.supportGetAccount)
	sup.POST("/exceptions/:id/refund", s.supportRefundException)
	sup.POST("/exceptions/:id/count", s.supportCountException)
	sup.POST("/exceptions/:id/resolve", s.supportResolveException)
	sup.POST("/exceptions/:id/value", s.supportValueException)
	sup.GET("/find", s.supportFind)
	sup.GET("/hosts", s.supportHosts)
	sup.GET("/events", s.supportQueueEvents)
	sup.GET("/orders/:ref/events", s.supportOrderEvents)
	sup.GET("/topups/:ref/events", s.supportTopUpEvents)
	sup.POST("/hosts/:name/repair", s.supportRepairHost)
	sup.POST("/hosts/:name/retire", s.supportRetireHost)
	if s.site != nil {
		s.site.Mount(r)
	}
	return r
}

func (s *Server) healthz(c *gin.Context) {
	if p, ok := s.store.(pinger); ok {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		defer cancel()
		if err := p.PingContext(ctx); err != nil {
			s.log.Warn("healthz: database unreachable", "err", err)
			s.fail(c, errUnavailable)
			return
		}
	}
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// logRequests logs each request once it is done: route, status, duration.
// Tokens, cookies and bodies are never logged.
func (s *Server) logRequests(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "(no route)"
	}
	took := time.Since(start)
	s.log.LogAttrs(c.Request.Context(), slog.LevelInfo, "http request",
		slog.String("method", c.Request.Method),
		slog.String("route", route),
		slog.Int("status", c.Writer.Status()),
		slog.Duration("duration", took),
		slog.String("client_ip", c.ClientIP()),
	)
	if s.requests != nil {
		s.requests.ObserveRequest(c.Request.Method, route, c.Writer.Status(), took)
	}
}

func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	c.Next()
}

func (s *Server) recovered(c *gin.Context, rec any) {
	s.log.Error("panic in handler", "route", c.FullPath(), "panic", rec)
	if !c.Writer.Written() {
		writeError(c, http.StatusInternalServerError, domain.ECodeInternal, domain.ErrorMessage(nil), "")
	}
	c.Abort()
}
