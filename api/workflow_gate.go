package api

import (
	"context"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// WorkflowsHealth tells whether the workflow service answers
// (Deps.Health: wfclient.Client, Temporal's health check). With it, a
// write that needs a workflow is refused before anything is written while
// Temporal does not answer (workflowGate); without it (test fakes) every
// write goes through.
type WorkflowsHealth interface {
	CheckHealth(ctx context.Context) error
}

// errWorkflowsUnavailable refuses a write that needs a workflow while the
// workflow service does not answer: nothing was written, resend later.
var errWorkflowsUnavailable = &domain.Error{Code: domain.ECodeWorkflowsUnavailable,
	Message: "Le service de paiement est momentanément indisponible, réessayez dans quelques minutes. Rien n'a été enregistré."}

// The gate's health answers are reused for a while: a healthy Temporal is
// asked every few seconds at most, one that does not answer is asked again
// soon. A probe is bounded: a request never waits longer than that.
const (
	gateHealthyFor = 5 * time.Second
	gateDownFor    = 2 * time.Second
	gateProbe      = 2 * time.Second
)

// workflowGate remembers the workflow service's last health answer; one
// probe runs at a time, the requests meanwhile wait for its answer.
type workflowGate struct {
	check func(ctx context.Context) error

	mu    sync.Mutex
	until time.Time
	err   error
}

func (g *workflowGate) ready(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	if now.Before(g.until) {
		return g.err
	}
	// The probe's answer serves other requests: a client that goes away
	// does not cut it short.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), gateProbe)
	defer cancel()
	g.err = g.check(pctx)
	if g.err != nil {
		g.until = time.Now().Add(gateDownFor)
	} else {
		g.until = time.Now().Add(gateHealthyFor)
	}
	return g.err
}

// workflowWrites are the routes whose write goes through a workflow:
// starting an order's or a top-up's, a payment request, paying from the
// balance, cancelling, taking back, and support's actions. With Temporal
// down they would write half (an order no workflow runs, an audited action
// never carried out); everything else, reads included, goes on.
var workflowWrites = map[string]bool{
	"POST /v1/orders":                                 true,
	"POST /v1/orders/:ref/cancel":                     true,
	"POST /v1/orders/:ref/pay-from-balance":           true,
	"POST /v1/orders/:ref/take-back":                  true,
	"POST /v1/orders/:ref/extensions":                 true,
	"POST /v1/orders/:ref/payment-intents":            true,
	"POST /v1/topups":                                 true,
	"POST /v1/topups/:ref/payment-intents":            true,
	"POST /v1/support/orders/:ref/attribute-payment":  true,
	"POST /v1/support/orders/:ref/extend":             true,
	"POST /v1/support/orders/:ref/end-early":          true,
	"POST /v1/support/orders/:ref/retry-provisioning": true,
	"POST /v1/support/orders/:ref/cancel":             true,
	"POST /v1/support/orders/:ref/refund":             true,
	"POST /v1/support/topups/:ref/attribute-payment":  true,
	"POST /v1/support/topups/:ref/cancel":             true,
	"POST /v1/support/exceptions/:id/refund":          true,
	"POST /v1/support/exceptions/:id/count":           true,
	"POST /v1/support/exceptions/:id/resolve":         true,
	"POST /v1/support/exceptions/:id/value":           true,
	"POST /v1/support/actions/:id/approve":            true,
}

// WorkflowsReady is nil when the workflow service answers (or cannot be
// asked), else the 503 workflows_unavailable error. The services that
// write through a workflow (CreateOrder, CreateTopUp, CancelOrder,
// PayFromBalance, the payment requests, TakeBack), which the web site
// calls in Go, ask it before they write anything; gateWorkflowWrites asks
// it for the /v1 routes, support's included, before their handlers run.
func (s *Server) WorkflowsReady(ctx context.Context) error {
	if s.gate == nil {
		return nil
	}
	if err := s.gate.ready(ctx); err != nil {
		s.log.Warn("workflow service unreachable: write refused", "err", err)
		return errWorkflowsUnavailable
	}
	return nil
}

// gateWorkflowWrites answers 503 workflows_unavailable (Retry-After: 60)
// to a workflowWrites route while the workflow service does not answer,
// before any handler runs: nothing is written.
func (s *Server) gateWorkflowWrites(c *gin.Context) {
	if !workflowWrites[c.Request.Method+" "+c.FullPath()] {
		c.Next()
		return
	}
	if err := s.WorkflowsReady(c.Request.Context()); err != nil {
		c.Header("Retry-After", "60")
		s.fail(c, err)
		return
	}
	c.Next()
}
