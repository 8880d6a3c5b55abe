package apptest

import (
	"net/http/httptest"

	"github.com/kernodeck/kernodeck/api"
)

// AgentToken is the support agent token the harness's API accepts.
const AgentToken = "watchtest-agent-token-0123456789"

// API serves the real HTTP API over the harness (stopped with the test).
func (e *Env) API() *httptest.Server { return e.ServeAPI(api.Config{}, nil) }

// ServeAPI is API with cfg (AgentToken is added to it) and a web site
// mounted at / (site may be nil).
func (e *Env) ServeAPI(cfg api.Config, site api.Site) *httptest.Server {
	cfg.AgentTokens = map[string]string{AgentToken: "watchtest-agent"}
	a := e.App.API(cfg, site)
	go func() { _ = a.Run(e.Ctx) }()
	hs := httptest.NewServer(a.Handler)
	e.T.Cleanup(hs.Close)
	// Before Close, which waits for the live streams, as a graceful
	// shutdown of `kernodeck api` ends them first.
	e.T.Cleanup(a.CloseStreams)
	return hs
}
