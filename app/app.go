// Package app assembles Kernodeck from its parts: the store, the activities
// and the worker's registrations, the API with its dependencies, the chain
// watchers' common settings, the mail dispatcher and the workflow starter.
// cmd/kernodeck calls it with what the environment configures; apptest and
// the e2e harness call it with test values, so the tests run the
// application exactly as production assembles it. Adding an activity
// dependency, a route dependency or a watcher option is done here.
//
// It takes its dependencies as values and reads no environment: turning
// configuration into values (node URLs, SSH keys, rate feeds) stays in
// cmd/kernodeck. It imports no network-specific watcher package either
// (chainwatch/tron and chainwatch/solana test through apptest, which
// imports this package): the caller dials the chain and hands it over.
package app

import (
	"context"
	"log/slog"
	"math/big"
	"net/http"
	"slices"
	"time"

	"github.com/shopspring/decimal"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/codec"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/mailverify"
	"github.com/kernodeck/kernodeck/metrics"
	"github.com/kernodeck/kernodeck/notify"
	"github.com/kernodeck/kernodeck/payments"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/provision/sshhost"
	"github.com/kernodeck/kernodeck/rates"
	"github.com/kernodeck/kernodeck/secrets"
	"github.com/kernodeck/kernodeck/wfclient"
	"github.com/kernodeck/kernodeck/workers"
	"github.com/kernodeck/kernodeck/workflows"
)

// WatcherLeaseTTL is how long a watcher that is alive but stuck keeps its
// network's lease: its successor waits that long before it follows the
// chain. A watcher whose process died loses the lease sooner, at the
// standby's next poll (its beacon is gone: postgres.AcquireLease). The
// lease is renewed at every poll (2 s) and every third of the TTL during a
// long step. The chaos run measured 30 s stalls after each chainwatch kill
// with the 30 s default.
const WatcherLeaseTTL = 10 * time.Second

// Config are the application's dependencies.
type Config struct {
	DB       *postgres.DB
	Temporal client.Client
	// Keyring seals access secrets and mail links, and opens them in the API.
	Keyring *secrets.Keyring
	// Payments serves payment requests (nil: no method offered). New wraps
	// its rate source in a rates.Recorder writing to DB (asset_rates).
	Payments *payments.Service
	// Provisioner is the machine driver (provision/localpg; SSH's when
	// SSH is set and this is nil).
	Provisioner activities.Provisioner
	// SSH is the SSH machine driver when it is the one: its host operations
	// (Hosts) and the customers' key changes (KeyRequests) come with it.
	SSH *sshhost.Driver
	// ProvisionerName is the availability rule of quotes and capacity
	// (postgres.ProvisionerLocal or postgres.ProvisionerSSH).
	ProvisionerName string
	// Hosts is the host inventory shown in the support console (nil: the
	// SSH driver's when Provisioner is one, else none).
	Hosts api.HostOperator
	// Holds, when set, holds capacity before an order's payment request.
	Holds *Holds
	// Metrics, when set, measures HTTP requests, provisioning steps, chain
	// watchers and the Temporal SDK.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// WorkflowVersion caps the command version of the workflows the API
	// and the starter start (wfclient.Client.MaxVersion; 0: the newest).
	WorkflowVersion int
	// ValueTolerance bounds support's value of a payment received in
	// another asset (KERNODECK_VALUE_TOLERANCE, a fraction; zero:
	// rates.DefaultValueTolerance).
	ValueTolerance decimal.Decimal
	// RateSampleInterval is how often RateSampler records every priced
	// asset (KERNODECK_RATE_SAMPLE_INTERVAL; 0: rates.DefaultSampleInterval).
	RateSampleInterval time.Duration
	// PayoutChain is the payouts' chain side (payout.Shop; nil: the API
	// offers no payout), with their limits.
	PayoutChain  api.PayoutChain
	PayoutLimits domain.PayoutLimits
	// WorkerStopTimeout is how long the worker's Stop waits for running
	// activities (KERNODECK_WORKER_STOP_TIMEOUT; 0: cancelled at once).
	WorkerStopTimeout time.Duration
}

// Holds are the capacity hold rules (postgres.Capacity): at most
// PerAccount and PerNetwork unpaid holds at once (0: no limit), each lasting
// First until a payment is seen (0: domain.DefaultHoldFirst); holds of
// unpaid orders take at most Share percent of a model's capacity (0: none
// at all; nil: no limit), and at most Budget of unpaid hold time per
// account and per network in 24 hours (0: no limit).
type Holds struct {
	PerAccount, PerNetwork int
	First                  time.Duration
	Share                  *int
	Budget                 time.Duration
}

// App is the assembled application.
type App struct {
	cfg        Config
	Workflows  *wfclient.Client
	Activities *activities.Activities
	// rates is the payments' rate source as given, before its recorder.
	rates payments.RateSource
}

// New assembles the application from its dependencies.
func New(c Config) *App {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.SSH != nil {
		if c.Provisioner == nil {
			c.Provisioner = c.SSH
		}
		if c.Hosts == nil {
			c.Hosts = sshhost.NewOperations(postgres.Hosts{DB: c.DB}, c.SSH)
		}
	}
	if c.DB != nil && c.ValueTolerance.Sign() > 0 {
		c.DB.SetValueTolerance(c.ValueTolerance)
	}
	a := &App{cfg: c, Workflows: &wfclient.Client{Temporal: c.Temporal, MaxVersion: c.WorkflowVersion}}
	if p := c.Payments; p != nil && p.Rates != nil && c.DB != nil {
		// Every rate a quote fetches is kept (asset_rates): support's value
		// of a payment in another asset is checked against it later.
		if rec, ok := p.Rates.(*rates.Recorder); ok {
			a.rates = rec.Source
		} else {
			a.rates = p.Rates
			p.Rates = &rates.Recorder{Source: p.Rates, History: c.DB, Logger: c.Logger.With("component", "rates")}
		}
	}
	a.Activities = &activities.Activities{
		Store:       c.DB,
		Provisioner: c.Provisioner,
		Payouts:     c.DB,
		Logger:      c.Logger,
	}
	if c.Metrics != nil && c.Provisioner != nil {
		a.Activities.Provisioner = c.Metrics.Steps.Provisioner(c.Provisioner)
	}
	if c.DB != nil {
		a.Activities.Extensions = postgres.Extensions{DB: c.DB, Provisioner: c.ProvisionerName}
	}
	if c.Temporal != nil {
		a.Activities.Rentals = a.Workflows // a top-up paying an extension asks its rental to apply it
	}
	if c.Payments != nil {
		a.Activities.Payments = c.Payments // never a nil *Service inside the interface
	}
	if c.Holds != nil {
		a.Activities.Capacity = postgres.Capacity{DB: c.DB, Provisioner: c.ProvisionerName,
			MaxUnpaidPerAccount: c.Holds.PerAccount, MaxUnpaidPerNetwork: c.Holds.PerNetwork,
			UnpaidShare: c.Holds.Share, UnpaidHoldBudget: c.Holds.Budget}
		a.Activities.HoldFirst = c.Holds.First
	}
	return a
}

// ClientOptions are the Temporal client options on top of conn (address,
// namespace, TLS, API key): every payload and failure message sealed with
// keyring before it reaches the server (codecOpts: codec.UnboundUntil), the
// SDK's metrics in m's registry (m may be nil), its logs in logger.
func ClientOptions(conn client.Options, keyring *secrets.Keyring, m *metrics.Metrics, logger *slog.Logger, codecOpts ...codec.Option) client.Options {
	conn.Logger = tlog.NewStructuredLogger(logger.With("component", "temporal"))
	conn.DataConverter = codec.DataConverter(keyring, codecOpts...)
	conn.FailureConverter = codec.FailureConverter(keyring)
	// No gzip on the wire (the SDK's default): the payloads are sealed, so
	// they do not compress, and gzip costs CPU on both ends of every call,
	// the Temporal server's included.
	conn.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	if m != nil {
		conn.MetricsHandler = m.Temporal()
		workflows.ExportMetrics(conn.MetricsHandler)
	}
	return conn
}

// Store is the database as the API uses it: with the keyring that opens
// access secrets, and availability counted the way the driver reserves.
func (a *App) Store() *postgres.Store {
	return postgres.NewStore(a.cfg.DB, a.cfg.Keyring, a.cfg.ProvisionerName)
}

// Register registers the workflows and the activities on any registry (a
// worker, a test environment, a replayer).
func (a *App) Register(r worker.Registry) { workers.Register(r, a.Activities) }

// Worker is the Temporal worker on Kernodeck's task queue (not started).
func (a *App) Worker() worker.Worker {
	return workers.New(a.cfg.Temporal, a.Activities, a.cfg.WorkflowVersion, a.cfg.WorkerStopTimeout)
}

// Starter makes sure every stored order and top-up has its workflow,
// every interval.
func (a *App) Starter(rental workflows.RentalConfig, topUpTimeout, interval time.Duration) *workers.Starter {
	return &workers.Starter{
		Store:        a.cfg.DB,
		Workflows:    a.Workflows,
		RentalConfig: rental,
		TopUpTimeout: topUpTimeout,
		Interval:     interval,
		Grace:        interval,
		Logger:       a.cfg.Logger.With("component", "starter"),
	}
}

// RateSampler records, every RateSampleInterval, the rate of every asset
// the shop can receive that the payments' rate source prices, so that a
// payment in an asset nobody quoted still has a rate near its reception;
// nil without payments. The worker runs it.
func (a *App) RateSampler() *rates.Sampler {
	if a.rates == nil {
		return nil
	}
	var assets []string
	for _, m := range domain.Methods {
		if !slices.Contains(assets, m.Asset) {
			assets = append(assets, m.Asset)
		}
	}
	return &rates.Sampler{Source: a.rates, History: a.cfg.DB, Assets: assets, Interval: a.cfg.RateSampleInterval,
		Logger: a.cfg.Logger.With("component", "rate-sampler")}
}

// KeyRequests applies on the hosts the customers' key changes the API
// records; nil unless the machine driver is SSH's.
func (a *App) KeyRequests() *sshhost.KeyRequests {
	if a.cfg.SSH == nil {
		return nil
	}
	return &sshhost.KeyRequests{Store: a.cfg.DB, Driver: a.cfg.SSH, Logger: a.cfg.Logger.With("component", "key-requests")}
}

// Mail are the mail dispatcher's settings.
type Mail struct {
	PublicURL   string // the site's address, in the mails' links
	SMTP        notify.SMTPConfig
	From        string
	Poll        time.Duration // 0: notify.DefaultPoll
	MaxAttempts int           // 0: notify's default
}

// Dispatcher sends the mail outbox over SMTP, with confirmation links
// sealed with the keyring the API opens them with.
func (a *App) Dispatcher(m Mail) (*notify.Dispatcher, error) {
	r, err := notify.NewRenderer(m.PublicURL)
	if err != nil {
		return nil, err
	}
	sender, err := notify.NewSMTPSender(m.SMTP)
	if err != nil {
		return nil, err
	}
	return &notify.Dispatcher{DB: a.cfg.DB.DB, Sender: sender, Renderer: r, From: m.From,
		Poll: m.Poll, MaxAttempts: m.MaxAttempts, Logger: a.cfg.Logger.With("component", "mail"),
		Links: &mailverify.Signer{Keyring: a.cfg.Keyring}}, nil
}

// API is the HTTP API with what its server needs around it.
type API struct {
	Handler http.Handler
	// CloseStreams ends the live streams (before a graceful shutdown).
	CloseStreams func()
	// Run is the background loop the live order streams wait on (the
	// PostgreSQL listener of timeline events); it runs until ctx ends.
	Run func(ctx context.Context) error
}

// APIStores are the API's stores by role, every one st (tests build the
// API on their own database with it).
func APIStores(st *postgres.Store) api.Stores {
	return api.Stores{Accounts: st, AccountPages: st, Catalog: st, Orders: st, TopUps: st, Balances: st,
		BalanceHistory: st, Support: st, Payments: st, Quotas: st, AgentSessions: st, SupportHosts: st, Cases: st}
}

// API builds the HTTP API with cfg, and site (optional, package web) at /.
func (a *App) API(cfg api.Config, site api.Site) API {
	tl := a.cfg.DB.NewTimelineListener(a.cfg.Logger.With("component", "timeline"))
	st := a.Store()
	deps := api.Deps{Stores: APIStores(st), Workflows: a.Workflows, Timeline: tl, Site: site, Logger: a.cfg.Logger,
		Hosts: a.cfg.Hosts, Keyring: a.cfg.Keyring, OrderViews: a.cfg.DB,
		Availability: st, Models: st, OwnerAccess: st, KeyRequests: st, Pinger: st, Health: a.Workflows,
		TwoFactor: st, Extensions: postgres.Extensions{DB: a.cfg.DB, Provisioner: a.cfg.ProvisionerName}}
	if a.cfg.Payments != nil {
		deps.Methods = a.cfg.Payments
		if a.cfg.PayoutChain != nil {
			deps.Payouts = &api.PayoutDeps{Store: a.cfg.DB, Rates: a.cfg.Payments.Rates, Workflows: a.Workflows,
				Chain: a.cfg.PayoutChain, Limits: a.cfg.PayoutLimits, FourEyesCents: cfg.SupportLimits.FourEyesCents}
		}
	}
	if a.cfg.Metrics != nil {
		deps.Requests, deps.Quotas = a.cfg.Metrics.HTTP, a.cfg.Metrics.HTTP
	}
	srv := api.New(cfg, deps)
	return API{Handler: srv.Handler(), CloseStreams: srv.CloseStreams, Run: tl.Run}
}

// Signaler delivers the watchers' signals to the workflows.
func (a *App) Signaler() chainwatch.Signaler {
	return chainwatch.TemporalSignaler{Client: a.cfg.Temporal}
}

// WatcherOptions are what differs between watchers.
type WatcherOptions struct {
	Confirmations int64
	// Holder names the lease holder ("": no lease taken).
	Holder string
	Poll   time.Duration // 0: chainwatch's default
	// Backfill is how many blocks below the tip a first start begins at.
	Backfill int64
	// Dust are the amounts per asset (base units) below which a payment is
	// recorded but not counted.
	Dust map[string]int64
	// Mempool is the node's mempool, where the chain has one.
	Mempool chainwatch.Mempool
	// Broadcaster, where payouts are signed transactions (Bitcoin,
	// Litecoin), is the node the watcher sends them to once caught up.
	Broadcaster chainwatch.Broadcaster
}

// Watcher builds the watcher of chain, measured when the application is.
func (a *App) Watcher(chain chainwatch.Chain, o WatcherOptions) *chainwatch.Watcher {
	w := &chainwatch.Watcher{
		Chain:    chain,
		Store:    a.cfg.DB,
		Signaler: a.Signaler(),
		Policy:   chainwatch.Policy{Confirmations: o.Confirmations},
		Holder:   o.Holder,
		LeaseTTL: WatcherLeaseTTL,
		Poll:     o.Poll,
		Backfill: o.Backfill,
		Mempool:  o.Mempool,
		Logger:   a.cfg.Logger.With("component", "chainwatch"),
		Dust:     map[string]*big.Int{},
	}
	if o.Broadcaster != nil {
		w.PayoutTxs, w.Broadcaster = a.cfg.DB, o.Broadcaster
	}
	for asset, units := range o.Dust {
		w.Dust[asset] = big.NewInt(units)
	}
	if m := a.cfg.Metrics; m != nil {
		w.Store = m.Chains.Store(w.Store)
		w.Chain = m.Chains.Chain(w.Chain)
	}
	return w
}
