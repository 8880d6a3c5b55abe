// Command kernodeck runs Kernodeck's backend: the HTTP API, the Temporal
// worker, the database migrations, the support agent's CLI, and `dev`, which
// runs everything in one process for local use.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jmoiron/sqlx"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"golang.org/x/sync/errgroup"

	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/devserver"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/mailverify"
	"github.com/kernodeck/kernodeck/metrics"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/workers"
)

const usage = `kernodeck: GPU rentals paid in crypto or from a prepaid balance.

Usage:
  kernodeck dev       run everything locally: migrations, API, worker, chain
                      watchers, and a Temporal dev server with its Web UI if
                      none answers; KERNODECK_DEV_NODES=bitcoin,litecoin,ethereum
                      starts local chains
  kernodeck dev pay PI-XXXXXXXXXX
                      pay a payment request on the local chain
  kernodeck api       run the HTTP API
  kernodeck worker    run the Temporal worker (workflows, activities, starter)
  kernodeck chainwatch
                      run the chain watchers of the networks with a node URL
  kernodeck mail      run the mail dispatcher (the only process with the SMTP
                      login; see docs/secrets.md)
  kernodeck versions  open rentals and top-ups per workflow history version
                      (retire a version's code once none is open)
  kernodeck wallet    derivation indexes used per network, and the gap after
                      the last paid one (set the wallet's gap limit above it)
  kernodeck migrate   apply the database migrations
  kernodeck support   act on orders as a support agent (see kernodeck support -h)
  kernodeck hosts     GPU host inventory of the SSH driver (see kernodeck hosts -h)
  kernodeck access    replace or reissue a running rental's SSH key (support)
  kernodeck keygen    print a new key for KERNODECK_SECRET_KEYS
  kernodeck recover   start again, from PostgreSQL, every live order's and
                      top-up's workflow Temporal lost (see docs/recovery.md)
  kernodeck xpub      status | confirm NETWORK: the watch-only keys recorded
  kernodeck version   print the module version, VCS revision and build time

Configuration comes from environment variables (see README.md).
`

func main() {
	gin.SetMode(gin.ReleaseMode)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	switch args[0] {
	case "support":
		return runSupport(ctx, args[1:], stdout, stderr)
	case "hosts":
		return runHosts(ctx, args[1:], stdout, stderr)
	case "keygen":
		return runKeygen(args[1:], stdout, stderr)
	case "xpub":
		return runXPubCommand(ctx, args[1:], stdout, stderr)
	case "version":
		return runVersion(stdout)
	}
	// Node URLs carry API keys and passwords, and client errors quote them:
	// everything this command writes to stderr is masked, its configuration
	// errors included.
	stderr = secretsRedactor().Writer(stderr)
	// Each service holds its own secrets only (docs/secrets.md).
	if err := checkRole(args[0]); err != nil {
		fmt.Fprintln(stderr, "config:", err)
		return 2
	}
	cfg, err := config.FromEnv(nil)
	if err != nil {
		fmt.Fprintln(stderr, "config:", err)
		return 2
	}
	logger := newLogger(stderr, cfg.LogLevel)
	var prov provisioning
	if args[0] != "migrate" {
		if prov, err = loadProvisioning(cfg, args[0], logger); err != nil {
			fmt.Fprintln(stderr, "config:", err)
			return 2
		}
	}
	var m *metrics.Metrics
	if _, serves := defaultMetricsAddr[args[0]]; serves {
		if prov.conn, err = temporalConnection(&cfg); err != nil {
			fmt.Fprintln(stderr, "config:", err)
			return 2
		}
		if err = checkTemporalTransport(args[0] == "dev", cfg.TemporalAllowPlaintext, prov.conn); err != nil {
			fmt.Fprintln(stderr, "config:", err)
			return 2
		}
		if args[0] != "dev" && !temporalTLS(prov.conn) && !localTarget(prov.conn.HostPort) {
			logger.Warn("Temporal frontend reached without TLS, as KERNODECK_TEMPORAL_ALLOW_PLAINTEXT allows", "address", prov.conn.HostPort)
		}
		if m, err = metrics.New(); err != nil {
			fmt.Fprintln(stderr, "metrics:", err)
			return 1
		}
		collectCertificates(m, cfg)
	}
	switch args[0] {
	case "migrate":
		err = runMigrate(ctx, cfg)
	case "api":
		err = runAPI(ctx, cfg, prov, m, logger)
	case "worker":
		err = runWorker(ctx, cfg, prov, m, logger)
	case "chainwatch":
		err = runChainwatch(ctx, cfg, prov, m, logger)
	case "mail":
		err = runMail(ctx, cfg, prov, logger)
	case "wallet":
		err = runWallet(ctx, cfg, stdout)
	case "versions":
		err = runVersions(ctx, cfg, stdout)
	case "access":
		err = runAccess(ctx, cfg, prov, args[1:], stdout, logger)
	case "recover":
		err = runRecover(ctx, cfg, prov, args[1:], stdout, stderr, logger)
	case "dev":
		if len(args) > 1 && args[1] == "pay" {
			err = runDevPay(ctx, cfg, args[2:], stdout)
			break
		}
		err = runDev(ctx, cfg, prov, m, logger)
	default:
		fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		logger.Error("exit", "command", args[0], "err", err)
		return 1
	}
	return 0
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

func runMigrate(ctx context.Context, cfg config.Config) error {
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	return postgres.Migrate(ctx, db.DB.DB)
}

// dialTemporal connects lazily: the API starts and answers (with 503 on
// workflow actions) even while Temporal is down.
func dialTemporal(prov provisioning, m *metrics.Metrics, logger *slog.Logger) (client.Client, error) {
	return client.NewLazyClient(prov.clientOptions(m, logger))
}

func runAPI(ctx context.Context, cfg config.Config, prov provisioning, m *metrics.Metrics, logger *slog.Logger) error {
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	tc, err := dialTemporal(prov, m, logger)
	if err != nil {
		return err
	}
	defer tc.Close()
	a, err := newApp(cfg, prov, db, tc, m, logger)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return serveMetrics(gctx, "api", m, readiness("api", db, tc), logger, prov.codecRoute(cfg, db))
	})
	g.Go(func() error { return serveAPI(gctx, cfg, a, logger) })
	return g.Wait()
}

// serveAPI runs the HTTP server until ctx ends, then shuts it down gracefully.
func serveAPI(ctx context.Context, cfg config.Config, a *app.App, logger *slog.Logger) error {
	h, err := newAPIHandler(cfg, a, logger)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Addr:              cfg.HTTPAddr,
		Handler:           h.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		// No WriteTimeout: the order tracking is a long-lived SSE stream.
	}
	srv.RegisterOnShutdown(h.CloseStreams)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return h.Run(gctx) })
	g.Go(func() error {
		logger.Info("api listening", "addr", "http://"+cfg.HTTPAddr)
		logger.Info("web site: open http://" + cfg.HTTPAddr + "/ in a browser")
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return g.Wait()
}

func runWorker(ctx context.Context, cfg config.Config, prov provisioning, m *metrics.Metrics, logger *slog.Logger) error {
	// The SDK keeps this cache per process (a global of the SDK's).
	worker.SetStickyWorkflowCacheSize(cfg.WorkflowCacheSize)
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	tc, err := client.Dial(prov.clientOptions(m, logger))
	if err != nil {
		return fmt.Errorf("temporal at %s: %w", cfg.TemporalAddress, err)
	}
	defer tc.Close()
	a, err := newApp(cfg, prov, db, tc, m, logger)
	if err != nil {
		return err
	}
	m.CollectOrders(db)
	m.CollectSupportAgents(db, cfg.AgentDailyCapCents, slices.Collect(maps.Values(cfg.SupportTokens)))
	if err := collectMachineQueue(m, db); err != nil {
		return err
	}
	if err := collectOperations(m, db, a, prov.cfg.Provisioner); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveMetrics(gctx, "worker", m, readiness("worker", db, tc), logger) })
	g.Go(func() error { return serveWorker(gctx, cfg, prov, a, tc, logger) })
	return g.Wait()
}

// serveWorker registers search attributes, then runs the worker, the
// workflow starter, the rate sampler, and beside them the mail dispatcher
// and the SSH driver's key requests when configured, until ctx ends.
func serveWorker(ctx context.Context, cfg config.Config, prov provisioning, a *app.App, tc client.Client, logger *slog.Logger) error {
	if err := workers.RegisterSearchAttributes(ctx, tc, cfg.TemporalNamespace, logger); err != nil {
		return err
	}
	mail, err := prov.dispatcher(a, logger)
	if err != nil {
		return err
	}
	if kr := a.KeyRequests(); kr != nil {
		// Customers' key changes, written by the API, applied on the hosts.
		go func() { _ = kr.Run(ctx) }()
	}
	go expireRegistrations(ctx, a.Store().DB, 10*time.Minute, logger)
	if s := a.RateSampler(); s != nil {
		// Every priced asset's rate, kept: it bounds support's value of a
		// payment received in another asset.
		go func() { _ = s.Run(ctx) }()
	}
	w := a.Worker()
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()
	logger.Info("worker started", "task_queue", "kernodeck", "provisioner", prov.cfg.Provisioner, "mail", mail != nil)
	starter := a.Starter(cfg.RentalConfig(), cfg.TopUpTimeout, cfg.StarterInterval)
	return withMail(ctx, mail, starter.Run)
}

// expireRegistrations deletes, every interval until ctx ends, the
// unconfirmed accounts that hold nothing once their link has expired.
func expireRegistrations(ctx context.Context, db *postgres.DB, every time.Duration, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n, err := db.DeleteExpiredRegistrations(ctx, mailverify.DefaultTTL)
		if err != nil && ctx.Err() == nil {
			logger.Warn("expire unconfirmed accounts", "err", err)
		} else if n > 0 {
			logger.Info("unconfirmed accounts expired", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// devStaticRates are sample rates for local use only.
const devStaticRates = "BTC=65000,ETH=3000,USDT=1,USDC=1,TRX=0.25,SOL=150,LTC=90"

// runDev runs the whole service in one process on local defaults.
func runDev(ctx context.Context, cfg config.Config, prov provisioning, m *metrics.Metrics, logger *slog.Logger) error {
	if os.Getenv("KERNODECK_COOKIE_SECURE") == "" {
		cfg.CookieSecure = false // plain http on localhost
	}
	if len(cfg.SupportTokens) == 0 {
		const devToken = "dev-support-token-change-me"
		cfg.SupportTokens = map[string]string{devToken: "dev-agent"}
		if _, ok := cfg.SupportRoles["dev-agent"]; !ok {
			// Every page of the console to try (approving still takes a
			// second agent).
			cfg.SupportRoles = map[string]domain.SupportRoles{"dev-agent": {domain.RoleSenior, domain.RoleOperator}}
		}
		logger.Warn("no KERNODECK_SUPPORT_TOKENS: using a development agent token", "agent", "dev-agent", "token", devToken,
			"roles", cfg.SupportRoles["dev-agent"].String())
	}
	if os.Getenv("KERNODECK_RATES") == "" {
		// No rate feed on a developer machine: sample rates, said loudly.
		_ = os.Setenv("KERNODECK_RATES", "static")
		if os.Getenv("KERNODECK_STATIC_RATES") == "" {
			_ = os.Setenv("KERNODECK_STATIC_RATES", devStaticRates)
		}
		logger.Warn("using sample static rates (set KERNODECK_RATES=kraken for real ones)", "rates", os.Getenv("KERNODECK_STATIC_RATES"))
	}
	stopNodes, err := startDevNodes(ctx, cfg.DevDataDir, logger)
	if err != nil {
		return err
	}
	defer stopNodes()
	if err := ensureDatabase(ctx, cfg.DatabaseURL, logger); err != nil {
		return err
	}
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := postgres.Migrate(ctx, db.DB.DB); err != nil {
		return err
	}
	logger.Info("migrations applied")

	if !devserver.Answering(cfg.TemporalAddress) {
		cli, err := devserver.FindCLI(cfg.TemporalCLI)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(cfg.DevDataDir, 0o755); err != nil {
			return err
		}
		logf, err := os.Create(filepath.Join(cfg.DevDataDir, "temporal.log"))
		if err != nil {
			return err
		}
		defer logf.Close()
		srv, err := devserver.Start(ctx, devserver.Options{
			CLI: cli, Addr: cfg.TemporalAddress, UIPort: cfg.TemporalUIPort,
			DBFile: filepath.Join(cfg.DevDataDir, "temporal.db"), Logger: logger, Log: logf,
		})
		if err != nil {
			return err
		}
		defer srv.Stop()
		host, _, _ := strings.Cut(cfg.TemporalAddress, ":")
		logger.Info("temporal web ui", "url", fmt.Sprintf("http://%s:%d", host, cfg.TemporalUIPort))
	} else {
		logger.Info("using the Temporal server already answering", "address", cfg.TemporalAddress)
	}

	tc, err := client.Dial(prov.clientOptions(m, logger))
	if err != nil {
		return fmt.Errorf("temporal at %s: %w", cfg.TemporalAddress, err)
	}
	defer tc.Close()
	a, err := newApp(cfg, prov, db, tc, m, logger)
	if err != nil {
		return err
	}
	m.CollectOrders(db)
	m.CollectSupportAgents(db, cfg.AgentDailyCapCents, slices.Collect(maps.Values(cfg.SupportTokens)))
	if err := collectMachineQueue(m, db); err != nil {
		return err
	}
	if err := collectOperations(m, db, a, prov.cfg.Provisioner); err != nil {
		return err
	}
	m.CollectChainPayments(db)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return serveMetrics(gctx, "dev", m, readiness("dev", db, tc), logger, prov.codecRoute(cfg, db))
	})
	g.Go(func() error { return serveWorker(gctx, cfg, prov, a, tc, logger) })
	g.Go(func() error { return serveAPI(gctx, cfg, a, logger) })
	g.Go(func() error { return serveChainwatch(gctx, a, db, logger) })
	return g.Wait()
}

// ensureDatabase creates the configured database if the server lacks it,
// so `dev` works on a fresh PostgreSQL.
func ensureDatabase(ctx context.Context, dbURL string, logger *slog.Logger) error {
	u, err := url.Parse(dbURL)
	if err != nil {
		return fmt.Errorf("KERNODECK_DATABASE_URL: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" || name == "postgres" {
		return nil
	}
	admin := *u
	admin.Path = "/postgres"
	db, err := sqlx.Open("postgres", admin.String())
	if err != nil {
		return err
	}
	defer db.Close()
	var exists bool
	if err := db.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name); err != nil {
		return fmt.Errorf("check database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := db.ExecContext(ctx, `CREATE DATABASE "`+strings.ReplaceAll(name, `"`, `""`)+`"`); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	logger.Info("created database", "name", name)
	return nil
}
