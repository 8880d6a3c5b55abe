package apptest

import (
	"net/http/httptest"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/provision/sshhost"
)

// AgentToken is the support agent token the harness's API accepts.
const AgentToken = "watchtest-agent-token-0123456789"

// API serves the real HTTP API over the harness (stopped with the test).
func (e *Env) API() *httptest.Server { return e.ServeAPI(api.Config{}, nil) }

// ServeAPI is API with cfg (AgentToken is added to it) and a web site
// mounted at / (site may be nil).
func (e *Env) ServeAPI(cfg api.Config, site api.Site) *httptest.Server {
	tl := e.DB.NewTimelineListener(e.Logger)
	go func() { _ = tl.Run(e.Ctx) }()
	cfg.AgentTokens = map[string]string{AgentToken: "watchtest-agent"}
	// The store as `kernodeck api` wires it: access secrets opened for their
	// owner, availability on quotes (local driver: GPUs counted).
	st := postgres.NewStore(e.DB, e.Keyring, postgres.ProvisionerLocal)
	// The operators' host inventory is the SSH driver's on this database
	// (no SSH key: a repair that must log in to a host fails).
	hosts := sshhost.NewOperations(&sshhost.Driver{DB: e.DB.DB, Logger: e.Logger})
	a := api.New(cfg, api.Deps{Store: st, Workflows: e.Workflows, Timeline: tl, Methods: e.Payments, Site: site, Logger: e.Logger,
		Hosts: hosts})
	hs := httptest.NewServer(a.Handler())
	e.T.Cleanup(hs.Close)
	return hs
}
