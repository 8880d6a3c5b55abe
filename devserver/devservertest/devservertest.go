// Package devservertest starts a Temporal dev server for a test: headless, in
// memory, on a free loopback port, stopped when the test ends.
package devservertest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/kernodeck/kernodeck/devserver"
)

// Start returns the address of a fresh dev server. Its log is kept in the
// test's temporary directory.
func Start(t testing.TB) string {
	t.Helper()
	cli, err := devserver.FindCLI(os.Getenv("KERNODECK_TEMPORAL_CLI"))
	if err != nil {
		t.Fatalf("%v (scripts/test.sh installs it)", err)
	}
	// The dev server also listens on ports derived from this one (HTTP,
	// cluster membership) that another process may hold: a server that
	// exits early is started again on another free port.
	var (
		addr string
		srv  *devserver.Server
	)
	for attempt := 1; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = l.Addr().String()
		_ = l.Close()
		logf, err := os.Create(filepath.Join(t.TempDir(), "temporal.log"))
		if err != nil {
			t.Fatal(err)
		}
		srv, err = devserver.Start(context.Background(), devserver.Options{CLI: cli, Addr: addr, Log: logf})
		if err == nil {
			break
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("dev server on %s: %v; starting another", addr, err)
	}
	t.Cleanup(srv.Stop)
	return addr
}
