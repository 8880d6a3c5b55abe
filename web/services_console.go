package web

import (
	"context"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// console is what the support console asks of the application: package
// api's support services, called in Go with the agent acting.
type console interface {
	agentSessions
	supportReader
	supportActions
	consolePayouts
}

// agentSessions find the signed-in agent, check a console form's CSRF
// token, and sign agents in and out.
type agentSessions interface {
	AgentSession(ctx context.Context, r *http.Request) (*api.Agent, error)
	CheckAgentCSRF(a *api.Agent, token string) error
	ClearAgentSession(c *gin.Context)
	OpenAgentSession(c *gin.Context, token string) (*api.Agent, error)
	CloseAgentSession(ctx context.Context, a *api.Agent) error
}

// supportReader reads the console's queues, search and files.
type supportReader interface {
	SupportExceptions(ctx context.Context, a *api.Agent) ([]api.ExceptionView, error)
	OpenSupportRequests(ctx context.Context, a *api.Agent) ([]domain.SupportRequest, error)
	ProvisioningFailures(ctx context.Context, a *api.Agent) ([]domain.StuckOrder, error)
	TeardownsStuck(ctx context.Context, a *api.Agent) ([]domain.StuckTeardown, error)
	HostFlags(ctx context.Context, a *api.Agent) ([]domain.HostFlag, error)
	MachineQueue(ctx context.Context, a *api.Agent) ([]domain.WaitingOrder, error)
	AwaitingApproval(ctx context.Context, a *api.Agent) (api.Approvals, error)
	FindCases(ctx context.Context, a *api.Agent, q string) ([]domain.FoundCase, error)
	ListCases(ctx context.Context, a *api.Agent, q domain.CaseQuery) (api.CaseList, error)
	ExportCases(ctx context.Context, a *api.Agent, q domain.CaseQuery, start func() io.Writer) error
	SupportOrder(ctx context.Context, a *api.Agent, ref string) (api.SupportOrderDetail, error)
	SupportTopUp(ctx context.Context, a *api.Agent, ref string) (api.SupportTopUpDetail, error)
	SupportCustomer(ctx context.Context, a *api.Agent, id int64) (api.SupportCustomerDetail, error)
	SupportHosts(ctx context.Context, a *api.Agent) (api.SupportHostList, error)
	AnswerSupportRequest(ctx context.Context, a *api.Agent, id int64, message string) (domain.SupportRequest, error)
}

// supportActions carry support's actions out: each records its audit row
// under the confirmation page's key (an approval or a refusal needs none),
// then runs it; a money action above the four-eyes threshold waits for a
// second agent.
type supportActions interface {
	AttributePayment(ctx context.Context, a *api.Agent, key, kind, ref string, in api.ActionInput) (api.ActionOutcome, error)
	SupportCancel(ctx context.Context, a *api.Agent, key, kind, ref string, in api.ActionInput) (api.ActionOutcome, error)
	Extend(ctx context.Context, a *api.Agent, key, ref string, in api.ActionInput) (api.ActionOutcome, error)
	EndEarly(ctx context.Context, a *api.Agent, key, ref string, in api.ActionInput) (api.ActionOutcome, error)
	RetryProvisioning(ctx context.Context, a *api.Agent, key, ref string, in api.ActionInput) (api.ActionOutcome, error)
	CloseHostFlag(ctx context.Context, a *api.Agent, key, ref string, in api.ActionInput) (api.ActionOutcome, error)
	Refund(ctx context.Context, a *api.Agent, key, ref string, in api.ActionInput) (api.ActionOutcome, error)
	RefundException(ctx context.Context, a *api.Agent, key string, id int64, in api.ActionInput) (api.ActionOutcome, error)
	CountException(ctx context.Context, a *api.Agent, key string, id int64, in api.ActionInput) (api.ActionOutcome, error)
	ResolveException(ctx context.Context, a *api.Agent, key string, id int64, in api.ActionInput) (api.ActionOutcome, error)
	ValueException(ctx context.Context, a *api.Agent, key string, id int64, in api.ActionInput) (api.ActionOutcome, error)
	RepairHost(ctx context.Context, a *api.Agent, key, name string, in api.ActionInput) (api.ActionOutcome, error)
	RetireHost(ctx context.Context, a *api.Agent, key, name string, in api.ActionInput) (api.ActionOutcome, error)
	ReviewAction(ctx context.Context, a *api.Agent, id int64, approve bool, reason string) (api.ActionOutcome, error)
}

// The shapes of the support actions' services.
type (
	// refAction acts on an order (or a host) named by ref.
	refAction = func(ctx context.Context, a *api.Agent, key, ref string, in api.ActionInput) (api.ActionOutcome, error)
	// kindRefAction acts on an order or a top-up (kind).
	kindRefAction = func(ctx context.Context, a *api.Agent, key, kind, ref string, in api.ActionInput) (api.ActionOutcome, error)
	// exceptionAction acts on a queued amount.
	exceptionAction = func(ctx context.Context, a *api.Agent, key string, id int64, in api.ActionInput) (api.ActionOutcome, error)
)
