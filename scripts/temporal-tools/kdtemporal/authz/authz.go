// Package authz is Kernodeck's authorization on the Temporal server: a claim
// mapper that names the role of a client by its mTLS certificate's subject
// common name, and an authorizer that lets each role call only the APIs of
// its table (Allowed). Deny by default: a name not in Roles, a call with no
// certificate, an API not in the role's row are refused.
//
// The frontend checks the certificate against its client CA before any of
// this (production.yaml, requireClientAuth): the common name is trusted
// because only that CA issues it.
package authz

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// Role is what a client certificate may do, named after who holds it.
type Role string

const (
	API        Role = "api"        // kernodeck api
	Worker     Role = "worker"     // kernodeck worker
	Chainwatch Role = "chainwatch" // kernodeck chainwatch
	Recover    Role = "recover"    // kernodeck recover
	Operator   Role = "operator"   // people: temporal operator ..., kernodeck versions, kdload
	System     Role = "system"     // the Temporal server's own clients of its frontend
)

// Roles maps a client certificate's subject common name to its role.
var Roles = map[string]Role{
	"kernodeck-api":        API,
	"kernodeck-worker":     Worker,
	"kernodeck-chainwatch": Chainwatch,
	"kernodeck-recover":    Recover,
	"kernodeck-operator":   Operator,
	// production.yaml's global.tls.systemWorker certificate: the server's
	// worker service (schedules, batch operations, namespace deletion...)
	// and its history and matching services call the frontend with it.
	"temporal-system-worker": System,
}

// Everything in a role's row: every API, namespace and cluster operations
// included.
const Everything = "*"

// Allowed is each role's table: the APIs it may call, as Service/Method
// (the gRPC method's full name without its package).
var Allowed = map[Role][]string{
	API: slices.Concat(dial, []string{
		// wfclient: orders' and top-ups' workflows started, their updates
		// (payment intents, cancellations, support's actions), the
		// settlement's update-with-start, the refundable amount's query.
		"WorkflowService/StartWorkflowExecution",
		"WorkflowService/ExecuteMultiOperation",
		"WorkflowService/SignalWorkflowExecution",
		"WorkflowService/UpdateWorkflowExecution",
		"WorkflowService/PollWorkflowExecutionUpdate",
		"WorkflowService/QueryWorkflow",
		"WorkflowService/DescribeWorkflowExecution",
		"WorkflowService/GetWorkflowExecutionHistory",
	}),
	Worker: slices.Concat(dial, poll, []string{
		// The starter: workflows of orders and top-ups that have none.
		"WorkflowService/StartWorkflowExecution",
		// RegisterSearchAttributes lists them (an operator adds them).
		"OperatorService/ListSearchAttributes",
	}),
	Chainwatch: slices.Concat(dial, []string{
		// Payments seen on the chains, to their workflows.
		"WorkflowService/SignalWorkflowExecution",
	}),
	Recover: slices.Concat(dial, []string{
		// Workflows started again from PostgreSQL, unless they exist.
		"WorkflowService/StartWorkflowExecution",
		"WorkflowService/DescribeWorkflowExecution",
		"OperatorService/ListSearchAttributes",
	}),
	Operator: {Everything},
	System:   {Everything},
}

// dial is what every Kernodeck process calls to connect and to check its
// connection (the SDK's Dial, CheckHealth, a worker's start).
var dial = []string{
	"Health/Check",
	"WorkflowService/GetSystemInfo",
	"WorkflowService/DescribeNamespace",
}

// poll is what the SDK's worker calls: tasks polled and completed, a
// workflow's history read on a sticky cache miss, heartbeats, shutdown.
var poll = []string{
	"WorkflowService/PollWorkflowTaskQueue",
	"WorkflowService/RespondWorkflowTaskCompleted",
	"WorkflowService/RespondWorkflowTaskFailed",
	"WorkflowService/RespondQueryTaskCompleted",
	"WorkflowService/PollActivityTaskQueue",
	"WorkflowService/RespondActivityTaskCompleted",
	"WorkflowService/RespondActivityTaskFailed",
	"WorkflowService/RespondActivityTaskCanceled",
	"WorkflowService/RecordActivityTaskHeartbeat",
	"WorkflowService/GetWorkflowExecutionHistory",
	"WorkflowService/ResetStickyTaskQueue",
	"WorkflowService/ShutdownWorker",
	"WorkflowService/RecordWorkerHeartbeat",
}

// Method is the table's name of a gRPC method's full name:
// "/temporal.api.workflowservice.v1.WorkflowService/StartWorkflowExecution"
// is "WorkflowService/StartWorkflowExecution".
func Method(fullName string) string {
	svc, method, ok := strings.Cut(strings.TrimPrefix(fullName, "/"), "/")
	if !ok {
		return fullName
	}
	return svc[strings.LastIndex(svc, ".")+1:] + "/" + method
}

// May tells whether role may call the method of that full gRPC name.
func May(role Role, fullName string) bool {
	row := Allowed[role]
	return slices.Contains(row, Everything) || slices.Contains(row, Method(fullName))
}

// ClaimMapper names the caller's role by its certificate's common name.
type ClaimMapper struct{}

var (
	_ authorization.ClaimMapper                     = ClaimMapper{}
	_ authorization.ClaimMapperWithAuthInfoRequired = ClaimMapper{}
)

// GetClaims: the subject is the certificate's common name; Extensions is
// its Role, none for a name not in Roles. The operator and the server
// itself also get the system admin role (for the server's own checks).
func (ClaimMapper) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	c := &authorization.Claims{}
	if info == nil || info.TLSSubject == nil {
		return c, nil
	}
	c.Subject = info.TLSSubject.CommonName
	if role, ok := Roles[c.Subject]; ok {
		c.Extensions = role
		if slices.Contains(Allowed[role], Everything) {
			c.System = authorization.RoleAdmin
		}
	}
	return c, nil
}

// AuthInfoRequired: a call without a certificate gets no claims (refused).
func (ClaimMapper) AuthInfoRequired() bool { return true }

// Authorizer allows a call when the caller's role may make it (May).
type Authorizer struct {
	Logger log.Logger // denials, at warn; nil: none logged
}

var _ authorization.Authorizer = Authorizer{}

// Authorize: refused unless the claims carry a role whose row holds the
// API. Claims of system admin without a role are the server's own
// (internal-frontend, were it configured, maps every caller so).
func (a Authorizer) Authorize(_ context.Context, c *authorization.Claims, t *authorization.CallTarget) (authorization.Result, error) {
	role, who := roleOf(c)
	if role != "" && May(role, t.APIName) {
		return authorization.Result{Decision: authorization.DecisionAllow}, nil
	}
	reason := fmt.Sprintf("%s (role %q) may not call %s", who, role, Method(t.APIName))
	if role == "" {
		reason = fmt.Sprintf("%s has no role", who)
	}
	if a.Logger != nil {
		a.Logger.Warn("Temporal call refused",
			tag.NewStringTag("caller", who), tag.NewStringTag("role", string(role)),
			tag.NewStringTag("api", t.APIName), tag.NewStringTag("namespace", t.Namespace))
	}
	return authorization.Result{Decision: authorization.DecisionDeny, Reason: reason}, nil
}

func roleOf(c *authorization.Claims) (Role, string) {
	if c == nil {
		return "", "a client without a certificate"
	}
	who := fmt.Sprintf("certificate %q", c.Subject)
	if r, ok := c.Extensions.(Role); ok {
		return r, who
	}
	if c.Subject == "" && c.System&authorization.RoleAdmin != 0 {
		return System, "the server"
	}
	return "", who
}
