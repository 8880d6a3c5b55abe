package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/metrics"
	"github.com/kernodeck/kernodeck/postgres"
)

// temporalConnection loads how to reach Temporal the SDK's way
// (go.temporal.io/sdk/contrib/envconfig): the profile TEMPORAL_PROFILE
// (default "default") of the TOML file TEMPORAL_CONFIG_FILE (default
// ~/.config/temporalio/temporal.toml; none is fine), overridden by
// TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*
// and TEMPORAL_GRPC_META_*. What stays unset takes Kernodeck's defaults;
// cfg is updated so `dev` and the search attributes use the same address
// and namespace as the client.
func temporalConnection(cfg *config.Config) (client.Options, error) {
	opts, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{})
	if err != nil {
		return client.Options{}, fmt.Errorf("temporal client configuration: %w", err)
	}
	if opts.HostPort == "" {
		opts.HostPort = cfg.TemporalAddress
	}
	if opts.Namespace == "" {
		opts.Namespace = cfg.TemporalNamespace
	}
	cfg.TemporalAddress, cfg.TemporalNamespace = opts.HostPort, opts.Namespace
	return opts, nil
}

// checkTemporalTransport refuses, outside dev, a Temporal frontend off this
// machine reached without TLS, unless allowed (KERNODECK_TEMPORAL_ALLOW_PLAINTEXT):
// whoever is on the path would read the API key, workflow IDs and search
// attributes, and could answer as the frontend. Payloads stay sealed, but
// that is not the only thing on the wire.
func checkTemporalTransport(dev, allowPlaintext bool, opts client.Options) error {
	if dev || allowPlaintext || temporalTLS(opts) || localTarget(opts.HostPort) {
		return nil
	}
	return fmt.Errorf("the Temporal frontend %s is not on this machine and TLS is off: set TEMPORAL_TLS=true "+
		"(with TEMPORAL_TLS_SERVER_CA_CERT_PATH, a client certificate or TEMPORAL_API_KEY as needed), "+
		"or KERNODECK_TEMPORAL_ALLOW_PLAINTEXT=true to accept plaintext on a network you trust", opts.HostPort)
}

// temporalTLS tells whether opts speak TLS to the frontend.
func temporalTLS(opts client.Options) bool {
	return opts.ConnectionOptions.TLS != nil && !opts.ConnectionOptions.TLSDisabled
}

// localTarget tells whether a gRPC target stays on this machine: a unix
// socket, or a loopback address or "localhost" (host:port, or a scheme's
// "dns:///host:port"). Other names are not resolved: a name is remote.
func localTarget(target string) bool {
	if strings.HasPrefix(target, "unix:") || strings.HasPrefix(target, "unix-abstract:") {
		return true
	}
	if _, rest, ok := strings.Cut(target, "://"); ok {
		target = rest[strings.LastIndex(rest, "/")+1:]
	}
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		host = strings.Trim(target, "[]")
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Default operations listeners (metrics, readiness) per command, so the
// processes of one machine do not collide; KERNODECK_METRICS_ADDR overrides,
// "off" disables.
var defaultMetricsAddr = map[string]string{
	"dev":        "127.0.0.1:9090",
	"api":        "127.0.0.1:9091",
	"worker":     "127.0.0.1:9092",
	"chainwatch": "127.0.0.1:9093",
}

func metricsAddr(command string) string {
	if a := os.Getenv("KERNODECK_METRICS_ADDR"); a != "" {
		return a
	}
	return defaultMetricsAddr[command]
}

// collectMachineQueue exports the line of paid orders waiting for a
// machine, with its overdue count past KERNODECK_QUEUE_ALERT_AFTER (the
// processes that export the order gauges do).
func collectMachineQueue(m *metrics.Metrics, db *postgres.DB) error {
	after, err := config.QueueAlertAfterFromEnv(nil)
	if err != nil {
		return err
	}
	m.CollectMachineQueue(db, after)
	return nil
}

// readiness is what command's /readyz checks: the database, and Temporal
// but for the api. The api answers reads from PostgreSQL alone and refuses
// the writes that need a workflow with 503 workflows_unavailable while
// Temporal is away (api.workflowGate): were Temporal in its readiness, a
// Temporal outage would take every api replica out of the load balancer,
// reads included. The worker and the watchers cannot work without it.
func readiness(command string, db *postgres.DB, tc client.Client) []metrics.Check {
	checks := []metrics.Check{{Name: "database", Fn: db.PingContext}}
	if command == "api" {
		return checks
	}
	return append(checks, metrics.Check{Name: "temporal", Fn: func(ctx context.Context) error {
		_, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err
	}})
}

// serveMetrics runs the operations listener of command, with the extra
// routes (the codec endpoint), unless it is "off".
func serveMetrics(ctx context.Context, command string, m *metrics.Metrics, checks []metrics.Check, logger *slog.Logger, extra ...metrics.Route) error {
	addr := metricsAddr(command)
	if addr == "off" {
		if len(extra) > 0 {
			logger.Warn("KERNODECK_METRICS_ADDR=off: no codec endpoint either (the Temporal Web UI shows payloads encrypted)")
		}
		<-ctx.Done()
		return nil
	}
	for _, r := range extra {
		logger.Info("operators' endpoint", "url", "http://"+addr+r.Pattern)
	}
	return m.Serve(ctx, addr, checks, logger, extra...)
}
