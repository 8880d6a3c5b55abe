package main

import (
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/metrics"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/web"
)

// newApp assembles the application (package app) as the environment
// configures it: the payment methods and rates, the machine driver, the
// capacity holds.
func newApp(cfg config.Config, prov provisioning, db *postgres.DB, tc client.Client, m *metrics.Metrics, logger *slog.Logger) (*app.App, error) {
	pay, pcfg, err := paymentsFromEnv(db, logger)
	if err != nil {
		return nil, err
	}
	quotas, err := config.QuotasFromEnv(nil)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	shop, payouts, err := payoutShop(pay, pcfg, db)
	if err != nil {
		return nil, err
	}
	local, ssh, err := prov.drivers(cfg, db, logger)
	if err != nil {
		return nil, err
	}
	var hosts api.HostOperator
	if ssh == nil && prov.cfg.Provisioner == postgres.ProvisionerSSH {
		hosts = newKeylessHosts(db) // the api holds no SSH key (docs/secrets.md)
	}
	return app.New(app.Config{
		DB: db, Temporal: tc, Keyring: prov.keyring, Payments: pay,
		Provisioner: local, SSH: ssh, ProvisionerName: prov.cfg.Provisioner, Hosts: hosts,
		Holds: &app.Holds{PerAccount: quotas.HoldsPerAccount, PerNetwork: quotas.HoldsPerNetwork, First: quotas.HoldFirst,
			Share: &quotas.HoldShare, Budget: quotas.HoldBudget},
		Metrics: m, Logger: logger, WorkflowVersion: cfg.WorkflowVersion, WorkerStopTimeout: cfg.WorkerStopTimeout,
		ValueTolerance: pcfg.ValueTolerance, RateSampleInterval: pcfg.RateSampleInterval,
		PayoutChain: shop, PayoutLimits: payouts.Limits,
	}), nil
}

// newAPIHandler builds the API as configured, with the customer web site
// at /.
func newAPIHandler(cfg config.Config, a *app.App, logger *slog.Logger) (app.API, error) {
	pcfg, err := config.PaymentsFromEnv(nil)
	if err != nil {
		return app.API{}, fmt.Errorf("config: %w", err)
	}
	quotas, err := config.QuotasFromEnv(nil)
	if err != nil {
		return app.API{}, fmt.Errorf("config: %w", err)
	}
	site, err := web.New(logger.With("component", "web"))
	if err != nil {
		return app.API{}, err
	}
	explorers, err := config.ExplorersFromEnv(nil)
	if err != nil {
		return app.API{}, fmt.Errorf("config: %w", err)
	}
	site.SetExplorers(explorers) // the support console's transaction links
	return a.API(api.Config{
		CookieSecure:   cfg.CookieSecure,
		AgentTokens:    cfg.SupportTokens,
		AgentRoles:     cfg.SupportRoles,
		Rental:         cfg.RentalConfig(),
		TopUpTimeout:   cfg.TopUpTimeout,
		TrustedProxies: cfg.TrustedProxies,
		Confirmations:  pcfg.Confirmations,
		SSEMaxAge:      cfg.StreamMaxAge,
		SessionIdle:    cfg.SessionIdle,
		SupportLimits:  domain.SupportLimits{FourEyesCents: cfg.FourEyesCents, AgentDailyCapCents: cfg.AgentDailyCapCents},
		// Limits on what accounts and networks create (config/quotas.go).
		Quotas:             quotas.API,
		RegistrationsPerIP: quotas.RegistrationsPerNet,
	}, site), nil
}
