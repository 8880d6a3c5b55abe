// Package metrics exports Kernodeck's Prometheus metrics. Each process builds
// one Metrics (one registry) and hands its parts to what it runs: the HTTP
// observer to the API, the chain decorators to the watchers, the step
// decorator to the machine driver, the Temporal handler to the SDK client and
// the database collector to the worker. Nothing is registered globally.
//
// Every family name is listed in Families; the alert rules and the dashboard
// in deploy/monitoring use those names.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// Family names exported by Kernodeck's own code (the Temporal SDK's come
// with the prefix temporal_).
const (
	FamHTTPRequests       = "kernodeck_http_requests_total"
	FamHTTPDuration       = "kernodeck_http_request_duration_seconds"
	FamChainNodeHeight    = "kernodeck_chain_node_height"
	FamChainProcessed     = "kernodeck_chain_processed_height"
	FamChainSinceBlock    = "kernodeck_chain_seconds_since_last_block"
	FamChainPayments      = "kernodeck_chain_payments"
	FamChainUndelivered   = "kernodeck_chain_payments_undelivered"
	FamChainUndelivOldest = "kernodeck_chain_payments_undelivered_oldest_seconds"
	FamMailOutbox         = "kernodeck_mail_outbox"
	FamProvisioningSteps  = "kernodeck_provisioning_step_duration_seconds"
	FamOrders             = "kernodeck_orders"
	FamExceptionsOpen     = "kernodeck_payment_exceptions_open"
	FamExceptionsOldest   = "kernodeck_payment_exceptions_open_oldest_seconds"
	FamScrapeErrors       = "kernodeck_db_scrape_errors_total"
	FamQuotaRefusals      = "kernodeck_quota_refusals_total"
	// The line of paid orders waiting for a machine (machine_queue.go).
	FamMachineQueueWaiting = "kernodeck_machine_queue_waiting"
	FamMachineQueueOldest  = "kernodeck_machine_queue_oldest_wait_seconds"
	FamMachineQueueOverdue = "kernodeck_machine_queue_overdue"
	// What each support agent's money actions moved in 24 hours, and the
	// cap it is held to (issue 36, item 3).
	FamSupportAgentMoved    = "kernodeck_support_agent_moved_cents"
	FamSupportAgentCap      = "kernodeck_support_agent_daily_cap_cents"
	FamSupportAwaitingOwner = "kernodeck_support_actions_awaiting_approval"
)

// latencyBuckets cover 1 ms to 2 min: HTTP requests, workflow tasks and
// machine steps alike.
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// Metrics is one process's registry and the instruments its parts record to.
type Metrics struct {
	Registry *prometheus.Registry
	HTTP     *HTTP
	Chains   *Chains
	Steps    *Steps
	temporal client.MetricsHandler
	dbErrors *prometheus.CounterVec
}

// New builds the registry with the Go runtime and process collectors, the
// build's information (kernodeck_build_info), the HTTP, chain and
// provisioning instruments, and the Temporal SDK's metrics (OpenTelemetry's
// Prometheus exporter writing into the same registry).
func New() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{Registry: reg, HTTP: newHTTP(reg), Chains: newChains(reg), Steps: newSteps(reg)}
	registerBuildInfo(reg, CurrentBuild())
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("temporal metrics exporter: %w", err)
	}
	// The SDK's timers are histograms in seconds: OpenTelemetry's default
	// buckets (0, 5, 10, 25 ...) would put every task in the first one.
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(sdkmetric.NewView(
		sdkmetric.Instrument{Name: "*", Unit: "s"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: latencyBuckets}},
	)))
	m.temporal = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                provider.Meter("temporal-sdk-go"),
		UseMonotonicCounters: true,
		// A metric the SDK cannot record must not take the worker down.
		OnError: func(error) {},
	})
	return m, nil
}

// Temporal is the handler to put in the SDK client's options.
func (m *Metrics) Temporal() client.MetricsHandler { return m.temporal }

// Check is one readiness condition (database reachable, Temporal reachable).
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Route is one more handler on the operations listener (the codec
// endpoint of the processes that serve it), for operators only as well.
type Route struct {
	Pattern string // http.ServeMux pattern, e.g. "/codec/"
	Handler http.Handler
}

// Handler serves /metrics, /readyz (every check passes, each bounded to 2 s)
// and /healthz (the process answers), the Go profiler under /debug/pprof/
// (where a busy process spends its time: only on this listener, never the
// public one), and the extra routes.
func (m *Metrics) Handler(checks []Check, logger *slog.Logger, extra ...Route) http.Handler {
	mux := http.NewServeMux()
	for _, r := range extra {
		mux.Handle(r.Pattern, r.Handler)
	}
	// Registered by hand: importing net/http/pprof for its side effect
	// would put it on http.DefaultServeMux, which this mux is not.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status, body := http.StatusOK, ""
		for _, c := range checks {
			if err := c.Fn(ctx); err != nil {
				logger.Warn("readyz: not ready", "check", c.Name, "err", err)
				status = http.StatusServiceUnavailable
				body += c.Name + ": unreachable\n"
				continue
			}
			body += c.Name + ": ok\n"
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})
	return mux
}

// Serve runs the operations listener on addr until ctx ends. It is a
// listener of its own, apart from the public API: metrics, readiness and
// the extra routes are for the operators' network only.
func (m *Metrics) Serve(ctx context.Context, addr string, checks []Check, logger *slog.Logger, extra ...Route) error {
	srv := &http.Server{Addr: addr, Handler: m.Handler(checks, logger, extra...),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	logger.Info("metrics listening", "addr", "http://"+addr+"/metrics")
	select {
	case err := <-errc:
		return fmt.Errorf("metrics listener %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
