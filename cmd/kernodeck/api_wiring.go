package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/web"
	"github.com/kernodeck/kernodeck/wfclient"
)

// newAPIHandler builds the API, with the customer web site at /, and returns
// it with the function that closes its live streams (before a graceful
// shutdown) and its background loop (the PostgreSQL listener that wakes the
// live order streams).
func newAPIHandler(cfg config.Config, prov provisioning, db *postgres.DB, wf *wfclient.Client, methods api.MethodLister,
	requests api.RequestObserver, logger *slog.Logger) (http.Handler, func(), func(context.Context) error, error) {
	pcfg, err := config.PaymentsFromEnv(nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("config: %w", err)
	}
	quotas, err := config.QuotasFromEnv(nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("config: %w", err)
	}
	site, err := web.New(logger.With("component", "web"))
	if err != nil {
		return nil, nil, nil, err
	}
	explorers, err := config.ExplorersFromEnv(nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("config: %w", err)
	}
	site.SetExplorers(explorers) // the support console's transaction links
	hosts, err := prov.hostOperations(db, logger)
	if err != nil {
		return nil, nil, nil, err
	}
	tl := db.NewTimelineListener(logger.With("component", "timeline"))
	srv := api.New(api.Config{
		CookieSecure:   cfg.CookieSecure,
		AgentTokens:    cfg.SupportTokens,
		Rental:         cfg.RentalConfig(),
		TopUpTimeout:   cfg.TopUpTimeout,
		TrustedProxies: cfg.TrustedProxies,
		Confirmations:  pcfg.Confirmations,
		SSEMaxAge:      cfg.StreamMaxAge,
		SessionIdle:    cfg.SessionIdle,
		// Limits on what accounts and networks create (config/quotas.go).
		Quotas:             quotas.API,
		RegistrationsPerIP: quotas.RegistrationsPerNet,
	}, api.Deps{Store: prov.store(db), Workflows: wf, Timeline: tl, Methods: methods, Site: site, Logger: logger, Requests: requests,
		Keyring: prov.keyring, Hosts: hosts}) // opens the email confirmation links the dispatcher seals
	return srv.Handler(), srv.CloseStreams, tl.Run, nil
}
