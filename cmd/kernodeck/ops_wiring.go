package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

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

// readiness is what /readyz checks: the database and Temporal answer.
func readiness(db *postgres.DB, tc client.Client) []metrics.Check {
	return []metrics.Check{
		{Name: "database", Fn: db.PingContext},
		{Name: "temporal", Fn: func(ctx context.Context) error {
			_, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		}},
	}
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
