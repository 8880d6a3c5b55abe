package authz

import (
	"context"
	"crypto/x509/pkix"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/api/adminservice/v1"
	"go.temporal.io/server/common/authorization"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

const (
	ws = "/temporal.api.workflowservice.v1.WorkflowService/"
	op = "/temporal.api.operatorservice.v1.OperatorService/"
	ad = "/temporal.server.api.adminservice.v1.AdminService/"
)

// decide maps a certificate of common name cn to claims, as the frontend's
// interceptor does, and asks the authorizer about api.
func decide(t *testing.T, cn, api string) authorization.Decision {
	t.Helper()
	var info *authorization.AuthInfo
	if cn != "" {
		info = &authorization.AuthInfo{TLSSubject: &pkix.Name{CommonName: cn}}
	}
	var claims *authorization.Claims
	if info != nil {
		var err error
		if claims, err = (ClaimMapper{}).GetClaims(info); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Authorizer{}.Authorize(context.Background(), claims,
		&authorization.CallTarget{APIName: api, Namespace: "kernodeck"})
	if err != nil {
		t.Fatal(err)
	}
	return res.Decision
}

func TestTable(t *testing.T) {
	allow, deny := authorization.DecisionAllow, authorization.DecisionDeny
	for _, c := range []struct {
		cn, api string
		want    authorization.Decision
	}{
		{"kernodeck-api", ws + "StartWorkflowExecution", allow},
		{"kernodeck-api", ws + "SignalWorkflowExecution", allow},
		{"kernodeck-api", ws + "UpdateWorkflowExecution", allow},
		{"kernodeck-api", ws + "ExecuteMultiOperation", allow},
		{"kernodeck-api", ws + "QueryWorkflow", allow},
		{"kernodeck-api", ws + "GetSystemInfo", allow},
		{"kernodeck-api", "/grpc.health.v1.Health/Check", allow},
		{"kernodeck-api", ws + "UpdateNamespace", deny},
		{"kernodeck-api", ws + "DeleteNamespace", deny},
		{"kernodeck-api", ws + "TerminateWorkflowExecution", deny},
		{"kernodeck-api", ws + "DeleteWorkflowExecution", deny},
		{"kernodeck-api", ws + "ResetWorkflowExecution", deny},
		{"kernodeck-api", ws + "StartBatchOperation", deny},
		{"kernodeck-api", ws + "PollWorkflowTaskQueue", deny},
		{"kernodeck-api", op + "DeleteNamespace", deny},
		{"kernodeck-api", op + "AddSearchAttributes", deny},
		{"kernodeck-api", ad + "DescribeCluster", deny},
		{"kernodeck-worker", ws + "PollWorkflowTaskQueue", allow},
		{"kernodeck-worker", ws + "RespondActivityTaskCompleted", allow},
		{"kernodeck-worker", ws + "StartWorkflowExecution", allow},
		{"kernodeck-worker", op + "ListSearchAttributes", allow},
		{"kernodeck-worker", op + "AddSearchAttributes", deny},
		{"kernodeck-worker", ws + "SignalWorkflowExecution", deny},
		{"kernodeck-worker", ws + "UpdateNamespace", deny},
		{"kernodeck-chainwatch", ws + "SignalWorkflowExecution", allow},
		{"kernodeck-chainwatch", ws + "StartWorkflowExecution", deny},
		{"kernodeck-chainwatch", ws + "TerminateWorkflowExecution", deny},
		{"kernodeck-recover", ws + "StartWorkflowExecution", allow},
		{"kernodeck-recover", ws + "SignalWorkflowExecution", deny},
		{"kernodeck-recover", ws + "TerminateWorkflowExecution", deny},
		{"kernodeck-operator", ws + "UpdateNamespace", allow},
		{"kernodeck-operator", ws + "TerminateWorkflowExecution", allow},
		{"kernodeck-operator", op + "DeleteNamespace", allow},
		{"kernodeck-operator", ad + "DescribeCluster", allow},
		{"temporal-system-worker", ws + "StartBatchOperation", allow},
		{"temporal-system-worker", op + "DeleteNamespace", allow},
		// Unknown common names, and no certificate: nothing.
		{"kernodeck", ws + "StartWorkflowExecution", deny},
		{"Kernodeck-API", ws + "StartWorkflowExecution", deny},
		{"stranger", "/grpc.health.v1.Health/Check", deny},
		{"stranger", ws + "GetSystemInfo", deny},
		{"", ws + "StartWorkflowExecution", deny},
		{"", ws + "GetSystemInfo", deny},
	} {
		if got := decide(t, c.cn, c.api); got != c.want {
			t.Errorf("%q calling %s: decision %v, want %v", c.cn, Method(c.api), got, c.want)
		}
	}
}

// The server's own noop claim mapper (internal-frontend) gives system admin
// without a role: allowed. Claims with a subject but no role: refused.
func TestClaimsWithoutRole(t *testing.T) {
	ct := &authorization.CallTarget{APIName: ws + "UpdateNamespace"}
	internal, _ := authorization.NewNoopClaimMapper().GetClaims(nil)
	if r, _ := (Authorizer{}).Authorize(context.Background(), internal, ct); r.Decision != authorization.DecisionAllow {
		t.Errorf("the server's own claims refused: %+v", r)
	}
	forged := &authorization.Claims{Subject: "stranger", System: authorization.RoleAdmin}
	if r, _ := (Authorizer{}).Authorize(context.Background(), forged, ct); r.Decision != authorization.DecisionDeny {
		t.Errorf("a subject with no role allowed: %+v", r)
	}
	c, _ := ClaimMapper{}.GetClaims(&authorization.AuthInfo{TLSSubject: &pkix.Name{CommonName: "kernodeck-api"}})
	if c.System != authorization.RoleUndefined {
		t.Errorf("the api's claims carry system role %v", c.System)
	}
	r, _ := (Authorizer{}).Authorize(context.Background(), c, ct)
	if !strings.Contains(r.Reason, "UpdateNamespace") || !strings.Contains(r.Reason, `"api"`) {
		t.Errorf("refusal's reason %q names neither the role nor the API", r.Reason)
	}
}

// Every row names methods that exist, and no role below operator holds a
// namespace or cluster operation.
func TestTableNamesRealMethods(t *testing.T) {
	methods := map[string]bool{}
	for _, d := range []grpc.ServiceDesc{
		workflowservice.WorkflowService_ServiceDesc, operatorservice.OperatorService_ServiceDesc,
		adminservice.AdminService_ServiceDesc, healthpb.Health_ServiceDesc,
	} {
		for _, m := range d.Methods {
			methods[Method("/"+d.ServiceName+"/"+m.MethodName)] = true
		}
	}
	admin := []string{
		"WorkflowService/RegisterNamespace", "WorkflowService/UpdateNamespace", "WorkflowService/DeprecateNamespace",
		"WorkflowService/TerminateWorkflowExecution", "WorkflowService/DeleteWorkflowExecution",
		"WorkflowService/ResetWorkflowExecution", "WorkflowService/RequestCancelWorkflowExecution",
		"WorkflowService/StartBatchOperation", "WorkflowService/CreateSchedule",
		"OperatorService/DeleteNamespace", "OperatorService/AddSearchAttributes", "OperatorService/RemoveSearchAttributes",
	}
	for role, row := range Allowed {
		for _, m := range row {
			if m != Everything && !methods[m] {
				t.Errorf("role %s: no method %s", role, m)
			}
			if role != Operator && role != System && slices.Contains(admin, m) {
				t.Errorf("role %s may call %s", role, m)
			}
		}
	}
	for cn, role := range Roles {
		if _, ok := Allowed[role]; !ok {
			t.Errorf("%s: role %s has no row", cn, role)
		}
	}
}
