package authz

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/kernodeck/kernodeck/devnodes"
)

// TestAuthorizerOnRealServer runs the Temporal server Kernodeck deploys
// (its authorizer and claim mapper, scripts/temporal-tools/kdtemporal) with
// SQLite in memory and its frontend behind mutual TLS on loopback, the
// certificates made here, then:
//   - the api's certificate is refused a namespace update (the SDK's
//     UpdateNamespace and `temporal operator namespace update`), a
//     termination, a namespace deletion; it starts, updates, queries and
//     signals a workflow that the worker's certificate runs to completion;
//   - the frontend's HTTP API refuses the api's certificate the same;
//   - chainwatch's may signal but not start;
//   - a certificate of the same CA with an unknown name gets nothing;
//   - the operator's may update the namespace, terminate a workflow and
//     delete a namespace, which the server's own system worker carries out
//     through the frontend (with its temporal-system-worker certificate).
//
// Built with the noop authorizer and claim mapper instead (every
// certificate an administrator, as before), it fails at the first refusal.
func TestAuthorizerOnRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	// Built once and cached (again when kdtemporal's sources change).
	if out, err := exec.Command(filepath.Join(root, "scripts/prodlike.sh"), "build-tools").CombinedOutput(); err != nil {
		t.Fatalf("scripts/prodlike.sh build-tools: %v\n%s", err, out)
	}
	bin := filepath.Join(toolsDir(t), "temporal-server")

	dir := t.TempDir()
	ca := newCA(t)
	certs := map[string]tls.Certificate{}
	for _, cn := range []string{"kernodeck-api", "kernodeck-worker", "kernodeck-chainwatch",
		"kernodeck-operator", "temporal-system-worker", "kernodeck"} {
		certs[cn] = ca.issue(t, dir, cn, false)
	}
	ca.issue(t, dir, "frontend", true)

	ports := map[string]int{}
	for _, p := range []string{"frontend", "http", "history", "matching", "worker",
		"m_frontend", "m_history", "m_matching", "m_worker", "metrics"} {
		if ports[p], err = devnodes.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	frontend := fmt.Sprintf("127.0.0.1:%d", ports["frontend"])
	cfgDir := filepath.Join(dir, "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cfgDir, "test.yaml"), []byte(serverConfig(dir, ports)))

	logPath := filepath.Join(dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(bin, "--root", "/", "--config", cfgDir, "--env", "test", "start")
	srv.Stdout, srv.Stderr = logFile, logFile
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait(); logFile.Close() }()
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = srv.Process.Kill()
			<-exited
		}
	})
	serverLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "kernodeck"
	dial := func(cn, namespace string) client.Client {
		t.Helper()
		c, err := client.NewLazyClient(client.Options{
			HostPort: frontend, Namespace: namespace, Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
			ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{
				Certificates: []tls.Certificate{certs[cn]}, RootCAs: ca.pool, ServerName: "temporal.kernodeck.internal",
				MinVersion: tls.VersionTLS12,
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	operator := dial("kernodeck-operator", ns)
	waitFor(ctx, t, "the frontend answering the operator", exited, serverLog, func() error {
		_, err := operator.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err
	})
	for _, name := range []string{ns, "scratch"} {
		if _, err := operator.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: name, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
		}); err != nil {
			t.Fatalf("the operator registers namespace %s: %v", name, err)
		}
	}

	api := dial("kernodeck-api", ns)
	waitFor(ctx, t, "namespace kernodeck known to the api", exited, serverLog, func() error {
		_, err := api.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
		return err
	})

	// The worker's certificate runs the workflows.
	w := worker.New(dial("kernodeck-worker", ns), "authz", worker.Options{})
	w.RegisterWorkflowWithOptions(testWorkflow, workflow.RegisterOptions{Name: "AuthzWorkflow"})
	w.RegisterActivityWithOptions(func(ctx context.Context, s string) (string, error) { return s + "!", nil },
		activity.RegisterOptions{Name: "Shout"})
	if err := w.Start(); err != nil {
		t.Fatalf("the worker's certificate starts a worker: %v", err)
	}
	t.Cleanup(w.Stop)

	// The api: refused the namespace, cluster and destructive operations.
	denied := func(what string, err error) {
		t.Helper()
		var pd *serviceerror.PermissionDenied
		if !errors.As(err, &pd) {
			t.Errorf("%s: %v, want PermissionDenied", what, err)
		}
	}
	_, err = api.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
		Namespace:  ns,
		UpdateInfo: &namespacepb.UpdateNamespaceInfo{Description: "changed by the api"},
	})
	denied("the api updates the namespace", err)
	_, err = api.OperatorService().DeleteNamespace(ctx, &operatorservice.DeleteNamespaceRequest{Namespace: "scratch"})
	denied("the api deletes a namespace", err)
	_, err = api.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: ns, SearchAttributes: map[string]enumspb.IndexedValueType{"KdEvil": enumspb.INDEXED_VALUE_TYPE_KEYWORD},
	})
	denied("the api adds a search attribute", err)

	// The api: starts, updates, queries and signals; the worker completes.
	run, err := api.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "authz-1", TaskQueue: "authz"}, "AuthzWorkflow")
	if err != nil {
		t.Fatalf("the api starts a workflow: %v", err)
	}
	upd, err := api.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: "authz-1", UpdateName: "set",
		Args: []any{"paid"}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		t.Fatalf("the api updates a workflow: %v", err)
	}
	var updated string
	if err := upd.Get(ctx, &updated); err != nil || updated != "paid" {
		t.Fatalf("the update's result: %q, %v", updated, err)
	}
	q, err := api.QueryWorkflow(ctx, "authz-1", "", "state")
	var state string
	if err == nil {
		err = q.Get(&state)
	}
	if err != nil || state != "paid" {
		t.Fatalf("the api queries a workflow: %q, %v", state, err)
	}
	_, err = api.WorkflowService().TerminateWorkflowExecution(ctx, &workflowservice.TerminateWorkflowExecutionRequest{
		Namespace: ns, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: "authz-1"}, Reason: "the api terminates",
	})
	denied("the api terminates a workflow", err)
	err = api.TerminateWorkflow(ctx, "authz-1", "", "the api terminates")
	denied("the api terminates a workflow (SDK)", err)
	if err := api.SignalWorkflow(ctx, "authz-1", "", "finish", nil); err != nil {
		t.Fatalf("the api signals a workflow: %v", err)
	}
	var result string
	if err := run.Get(ctx, &result); err != nil || result != "paid!" {
		t.Fatalf("the workflow's result: %q, %v", result, err)
	}

	// chainwatch signals, and nothing more.
	chainwatch := dial("kernodeck-chainwatch", ns)
	_, err = chainwatch.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "authz-cw", TaskQueue: "authz"}, "AuthzWorkflow")
	denied("chainwatch starts a workflow", err)
	if _, err := api.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "authz-2", TaskQueue: "authz"}, "AuthzWorkflow"); err != nil {
		t.Fatal(err)
	}
	if err := chainwatch.SignalWorkflow(ctx, "authz-2", "", "finish", nil); err != nil {
		t.Errorf("chainwatch signals a workflow: %v", err)
	}

	// A certificate of the same CA whose name has no role: nothing, not
	// even the health check.
	stranger := dial("kernodeck", ns)
	_, err = stranger.CheckHealth(ctx, &client.CheckHealthRequest{})
	if err == nil {
		t.Error("a certificate named kernodeck (no role) passed the health check")
	}
	_, err = stranger.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "authz-x", TaskQueue: "authz"}, "AuthzWorkflow")
	denied("a certificate named kernodeck starts a workflow", err)

	// The operator: the namespace, a termination, a deletion.
	if _, err := operator.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
		Namespace: ns, UpdateInfo: &namespacepb.UpdateNamespaceInfo{Description: "by the operator"},
	}); err != nil {
		t.Errorf("the operator updates the namespace: %v", err)
	}
	if _, err := api.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "authz-3", TaskQueue: "authz"}, "AuthzWorkflow"); err != nil {
		t.Fatal(err)
	}
	if err := operator.TerminateWorkflow(ctx, "authz-3", "", "by the operator"); err != nil {
		t.Errorf("the operator terminates a workflow: %v", err)
	}
	if _, err := operator.OperatorService().DeleteNamespace(ctx, &operatorservice.DeleteNamespaceRequest{Namespace: "scratch"}); err != nil {
		t.Fatalf("the operator deletes a namespace: %v", err)
	}
	// The deletion runs as a workflow of the server's own worker service,
	// whose client of the frontend is the temporal-system-worker certificate:
	// the namespace is renamed once its first activity ran.
	waitFor(ctx, t, "namespace scratch deleted by the server's system worker", exited, serverLog, func() error {
		_, err := operator.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "scratch"})
		var nf *serviceerror.NamespaceNotFound
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})

	// The frontend's HTTP API: the same certificates, the same authorizer.
	httpPost := func(cn, path, body string) int {
		t.Helper()
		hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{certs[cn]}, RootCAs: ca.pool, ServerName: "temporal.kernodeck.internal",
			MinVersion: tls.VersionTLS12,
		}}}
		resp, err := hc.Post(fmt.Sprintf("https://127.0.0.1:%d%s", ports["http"], path), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("HTTP %s as %s: %v", path, cn, err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	if code := httpPost("kernodeck-api", "/api/v1/namespaces/kernodeck/update", `{"updateInfo":{"description":"http api"}}`); code != http.StatusForbidden {
		t.Errorf("HTTP namespace update with the api's certificate: status %d, want 403", code)
	}
	if code := httpPost("kernodeck-api", "/api/v1/namespaces/kernodeck/workflows/authz-2/terminate", `{"reason":"http api"}`); code != http.StatusForbidden {
		t.Errorf("HTTP terminate with the api's certificate: status %d, want 403", code)
	}
	if code := httpPost("kernodeck-operator", "/api/v1/namespaces/kernodeck/update", `{"updateInfo":{"description":"http operator"}}`); code != http.StatusOK {
		t.Errorf("HTTP namespace update with the operator's certificate: status %d, want 200", code)
	}

	// The CLI the issue used: `temporal operator namespace update` with the
	// api's certificate refused, with the operator's done.
	if cli, err := exec.LookPath("temporal"); err == nil {
		tcli := func(cn string, args ...string) ([]byte, error) {
			base := []string{"--disable-config-file", "--disable-config-env", "--address", frontend,
				"--tls-ca-path", filepath.Join(dir, "ca.pem"), "--tls-server-name", "temporal.kernodeck.internal",
				"--tls-cert-path", filepath.Join(dir, cn+".pem"), "--tls-key-path", filepath.Join(dir, cn+".key"),
				"--command-timeout", "20s"}
			return exec.CommandContext(ctx, cli, append(args, base...)...).CombinedOutput()
		}
		out, err := tcli("kernodeck-api", "operator", "namespace", "update", "-n", ns, "--description", "cli api")
		if err == nil || !bytes.Contains(out, []byte("PermissionDenied")) && !bytes.Contains(out, []byte("unauthorized")) {
			t.Errorf("temporal operator namespace update with the api's certificate: %v\n%s", err, out)
		}
		out, err = tcli("kernodeck-api", "workflow", "terminate", "-n", ns, "-w", "authz-2", "--reason", "cli api")
		if err == nil {
			t.Errorf("temporal workflow terminate with the api's certificate succeeded\n%s", out)
		}
		if out, err := tcli("kernodeck-operator", "operator", "namespace", "update", "-n", ns, "--description", "cli operator"); err != nil {
			t.Errorf("temporal operator namespace update with the operator's certificate: %v\n%s", err, out)
		}
	} else {
		t.Log("no temporal CLI on PATH: its checks skipped")
	}

	// Every refusal the server logged is one of this test's: none of the
	// server's own calls, nor of the worker's.
	refusals := regexp.MustCompile(`(?m)^.*Temporal call refused.*$`).FindAllString(serverLog(), -1)
	t.Logf("the server's refusals:\n%s", strings.Join(refusals, "\n"))
	for _, line := range refusals {
		if strings.Contains(line, "temporal-system-worker") || strings.Contains(line, "kernodeck-worker") ||
			strings.Contains(line, "kernodeck-operator") {
			t.Errorf("refused: %s", line)
		}
	}
	if len(refusals) == 0 {
		t.Error("the server logged no refusal")
	}
}

// testWorkflow holds a state set by update "set", answers query "state",
// ends on signal "finish" with the state through activity Shout.
func testWorkflow(ctx workflow.Context) (string, error) {
	state := ""
	if err := workflow.SetQueryHandler(ctx, "state", func() (string, error) { return state, nil }); err != nil {
		return "", err
	}
	if err := workflow.SetUpdateHandler(ctx, "set", func(ctx workflow.Context, s string) (string, error) {
		state = s
		return s, nil
	}); err != nil {
		return "", err
	}
	workflow.GetSignalChannel(ctx, "finish").Receive(ctx, nil)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var out string
	err := workflow.ExecuteActivity(ctx, "Shout", state).Get(ctx, &out)
	return out, err
}

// waitFor retries check until it passes, the server exits or ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, exited <-chan error, serverLog func() string, check func() error) {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case e := <-exited:
			t.Fatalf("waiting for %s: the server exited (%v)\n%s", what, e, tail(serverLog()))
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v\n%s", what, err, tail(serverLog()))
		case <-tick.C:
		}
	}
}

func tail(s string) string {
	if len(s) > 6000 {
		return s[len(s)-6000:]
	}
	return s
}

// toolsDir is where scripts/prodlike.sh build-tools puts the server.
func toolsDir(t *testing.T) string {
	if d := os.Getenv("KD_TOOLS_DIR"); d != "" {
		return d
	}
	if out, err := exec.Command("go", "env", "GOBIN").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		return strings.TrimSpace(string(out))
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(home, ".cache/kernodeck-tools")
}

func serverConfig(dir string, p map[string]int) string {
	sqlite := `
      sql:
        pluginName: "sqlite"
        databaseName: "%s"
        connectAddr: "localhost"
        connectProtocol: "tcp"
        connectAttributes:
          mode: "memory"
          cache: "private"
        maxConns: 1
        maxIdleConns: 1
        maxConnLifetime: "1h"`
	svc := func(name string, port, membership int) string {
		return fmt.Sprintf("  %s:\n    rpc:\n      grpcPort: %d\n      membershipPort: %d\n      bindOnIP: \"127.0.0.1\"\n", name, port, membership)
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	return `log:
  stdout: true
  level: warn
persistence:
  defaultStore: sqlite-default
  visibilityStore: sqlite-visibility
  numHistoryShards: 1
  datastores:
    sqlite-default:` + fmt.Sprintf(sqlite, "default") + `
    sqlite-visibility:` + fmt.Sprintf(sqlite, "visibility") + `
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "127.0.0.1"
  metrics:
    prometheus:
      framework: "tally"
      listenAddress: "127.0.0.1:` + fmt.Sprint(p["metrics"]) + `"
  # As deploy/temporal/production.yaml.
  authorization:
    authorizer: "kernodeck"
    claimMapper: "kernodeck"
  tls:
    frontend:
      server:
        certFile: "` + f("frontend.pem") + `"
        keyFile: "` + f("frontend.key") + `"
        requireClientAuth: true
        clientCaFiles: ["` + f("ca.pem") + `"]
    systemWorker:
      certFile: "` + f("temporal-system-worker.pem") + `"
      keyFile: "` + f("temporal-system-worker.key") + `"
      client:
        serverName: "temporal.kernodeck.internal"
        rootCaFiles: ["` + f("ca.pem") + `"]
services:
` + svc("frontend", p["frontend"], p["m_frontend"]) + fmt.Sprintf("      httpPort: %d\n", p["http"]) +
		svc("matching", p["matching"], p["m_matching"]) + svc("history", p["history"], p["m_history"]) +
		svc("worker", p["worker"], p["m_worker"]) + `
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: "active"
  currentClusterName: "active"
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: "frontend"
      rpcAddress: "127.0.0.1:` + fmt.Sprint(p["frontend"]) + `"
dcRedirectionPolicy:
  policy: "noop"
`
}

type testCA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	pool *x509.CertPool
}

func newCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "authz test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{key: key, cert: cert, pool: pool}
}

// issue writes NAME.pem and NAME.key (and ca.pem) in dir: a client
// certificate with common name name, or the frontend's server certificate.
func (ca *testCA) issue(t *testing.T, dir, name string, server bool) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.Subject.CommonName = "temporal.kernodeck.internal"
		tmpl.DNSNames = []string{"temporal.kernodeck.internal", "localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	writeFile(t, filepath.Join(dir, name+".pem"), certPEM)
	writeFile(t, filepath.Join(dir, name+".key"), keyPEM)
	writeFile(t, filepath.Join(dir, "ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

func writeFile(t *testing.T, path string, b []byte) {
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
