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
	"log/slog"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/mailverify"
	"github.com/kernodeck/kernodeck/memo"
	"github.com/kernodeck/kernodeck/secrets"
)

// TimelineNotifier wakes an order's live stream when its timeline grows
// (*postgres.TimelineListener). Optional: without it streams only poll.
type TimelineNotifier interface {
	// Subscribe("") is woken by every reference's notifications.
	Subscribe(ref string) (<-chan struct{}, func())
}

// Site is the customer web site, mounted on the API's engine so that pages
// and /v1 share one origin, the session cookie and its CSRF token.
type Site interface {
	// Mount adds the site's routes to r (everything outside /v1); the
	// site's handlers call svc's services in Go.
	Mount(r *gin.Engine, svc *Server)
	// NotFound answers a path outside /v1 that no route serves.
	NotFound(c *gin.Context)
}

// Deps are the API's dependencies. Stores and Workflows are required.
type Deps struct {
	Stores    Stores
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
	// Quotas, if set, counts the requests a quota refused (metrics).
	Quotas QuotaObserver
	// The store's optional abilities: each one the API goes without while
	// nil (app.API gives it postgres.Store for all of them, as it does the
	// Stores).
	// Availability tells a quote whether it could be served now, and
	// refuses an order of a size no host has.
	Availability availabilityStore
	// Models tells the catalog which models a host could serve now.
	Models modelAvailability
	// OwnerAccess hands the owner the private key generated for the order.
	OwnerAccess ownerAccessStore
	// KeyRequests records the customers' key changes, for the worker.
	KeyRequests keyRequestStore
	// TwoFactor keeps the customers' second factor (totp.go); without it
	// no account has one.
	TwoFactor TwoFactorStore
	// Extensions lets customers extend their own rentals (extensions.go;
	// postgres.Extensions); nil: only support extends.
	Extensions ExtensionStore
	// Payouts, if set, offers payouts (service_payouts.go).
	Payouts *PayoutDeps
	// Pinger is what /healthz checks (nil: nothing).
	Pinger pinger
	// OrderViews, if set, is the cache of the orders' views
	// (postgres.DB.ForgetOrderViews), forgotten after every write this API
	// answers: a customer reads what they just did at once, without
	// waiting for PostgreSQL's notification.
	OrderViews ViewCache
	// Health tells whether the workflow service answers (wfclient.Client):
	// with it, a write that needs a workflow is refused before anything is
	// written while it does not; nil: every write goes through.
	Health WorkflowsHealth
	// Keyring opens the email confirmation links (sealed by the mail
	// dispatcher with the same ring). Without it a random key is made:
	// only links made by this process would open (tests).
	Keyring *secrets.Keyring
	// Now is the clock of link expiry and resend limits (time.Now when
	// nil); Sleep waits out a login's slow-down (a timer when nil).
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// ViewCache is a cache of what customers read, forgotten on demand.
type ViewCache interface {
	ForgetOrderViews()
}

// RequestObserver records answered requests by route template and status.
type RequestObserver interface {
	ObserveRequest(method, route string, status int, d time.Duration)
}

// Server is the HTTP API.
type Server struct {
	cfg      Config
	stores   Stores
	wf       Workflows
	notifier TimelineNotifier
	methods  MethodLister
	hosts    HostOperator
	site     Site
	log      *slog.Logger
	engine   *gin.Engine
	requests RequestObserver
	quotas   QuotaObserver

	// The store's optional abilities (Deps): nil when it has none.
	availability availabilityStore
	models       modelAvailability
	ownerAccess  ownerAccessStore
	keyRequests  keyRequestStore
	twoFactor    TwoFactorStore
	extensions   ExtensionStore
	payouts      *PayoutDeps
	pinger       pinger
	views        ViewCache
	// answers are the JSON answers encoded lately, by their value's
	// digest (answerMemo).
	answers *memo.Memo[[]byte]

	links *mailverify.Signer
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	agents    []agentToken
	dummyHash string        // verified when the email is unknown: constant work
	hashSem   chan struct{} // bounds concurrent argon2 work (memory)

	// gate refuses writes through a workflow while Temporal does not
	// answer (nil: no Deps.Health; workflow_gate.go).
	gate *workflowGate

	closeOnce sync.Once
	closing   chan struct{} // closed by CloseStreams
	streams   agentStreams  // the console sessions' live streams
}

type agentToken struct {
	hash [sha256.Size]byte
	name string
}

// New builds the API. It panics if a store or Workflows is nil.
func New(cfg Config, deps Deps) *Server {
	if m := deps.Stores.missing(); m != "" || deps.Workflows == nil {
		panic("api.New: every store and Workflows are required (missing: Stores." + m + " or Workflows)")
	}
	cfg.setDefaults()
	logger := deps.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{
		cfg:      cfg,
		stores:   deps.Stores,
		wf:       deps.Workflows,
		notifier: deps.Timeline,
		methods:  deps.Methods,
		hosts:    deps.Hosts,
		site:     deps.Site,
		log:      logger,
		requests: deps.Requests,
		quotas:   deps.Quotas,
		hashSem:  make(chan struct{}, max(2, runtime.GOMAXPROCS(0))),
		closing:  make(chan struct{}),
		streams:  agentStreams{n: map[string]int{}},
		answers:  memo.New[[]byte](memoAnswers),
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
	s.availability, s.models, s.ownerAccess = deps.Availability, deps.Models, deps.OwnerAccess
	s.keyRequests, s.pinger, s.views = deps.KeyRequests, deps.Pinger, deps.OrderViews
	s.twoFactor, s.extensions = deps.TwoFactor, deps.Extensions
	s.payouts = deps.Payouts
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
	if deps.Health != nil {
		s.gate = &workflowGate{check: deps.Health.CheckHealth}
	}
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
