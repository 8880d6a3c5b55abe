package apptest

import (
	"net/http/httptest"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// Alone are support limits no test's amounts reach: one agent moves them
// without a second (the four-eyes tests set their own).
var Alone = domain.SupportLimits{FourEyesCents: 1 << 50, AgentDailyCapCents: 1 << 51}

// AgentToken is the support agent token the harness's API accepts, of
// agent AgentName (an agent only, unless cfg.AgentRoles says more).
const (
	AgentToken = "watchtest-agent-token-0123456789"
	AgentName  = "watchtest-agent"
)

// API serves the real HTTP API over the harness (stopped with the test).
func (e *Env) API() *httptest.Server { return e.ServeAPI(api.Config{}, nil) }

// ServeAPI is API with cfg (AgentToken is added to its agents) and a web
// site mounted at / (site may be nil). With no SupportLimits, the
// harness's agent moves any amount alone: tests of four-eyes set them.
func (e *Env) ServeAPI(cfg api.Config, site api.Site) *httptest.Server {
	tokens := map[string]string{AgentToken: AgentName}
	for t, name := range cfg.AgentTokens {
		tokens[t] = name
	}
	cfg.AgentTokens = tokens
	if cfg.SupportLimits == (domain.SupportLimits{}) {
		cfg.SupportLimits = Alone
	}
	a := e.App.API(cfg, site)
	go func() { _ = a.Run(e.Ctx) }()
	hs := httptest.NewServer(a.Handler)
	e.T.Cleanup(hs.Close)
	// Before Close, which waits for the live streams, as a graceful
	// shutdown of `kernodeck api` ends them first.
	e.T.Cleanup(a.CloseStreams)
	return hs
}
