// Package devserver runs the Temporal CLI's development server (with its Web
// UI) as a child process, for `kernodeck dev` and the end-to-end tests.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/kernodeck/kernodeck/workflows"
)

// CLIVersion is the Temporal CLI the project installs (scripts/ensure-tools.sh).
const CLIVersion = "v1.5.1"

// FindCLI returns the temporal binary: the configured path, else one on
// PATH, else the one `go install` puts in $GOBIN or $GOPATH/bin.
func FindCLI(configured string) (string, error) {
	if configured != "" {
		if _, err := os.Stat(configured); err != nil {
			return "", fmt.Errorf("temporal CLI %s: %w", configured, err)
		}
		return configured, nil
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	if d := os.Getenv("GOPATH"); d != "" {
		dirs = append(dirs, filepath.Join(d, "bin"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "temporal")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("temporal CLI not found: run scripts/ensure-tools.sh (go install github.com/temporalio/cli/cmd/temporal@%s)", CLIVersion)
}

// Answering reports whether something accepts TCP connections at addr.
func Answering(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// Options configure the dev server.
type Options struct {
	CLI    string
	Addr   string // host:port of the frontend (gRPC)
	UIPort int    // 0 disables the Web UI
	// DBFile persists the server's state across restarts; "" keeps it in memory.
	DBFile string
	Logger *slog.Logger
	// Log receives the server's output; nil discards it.
	Log *os.File
}

// Server is a running dev server.
type Server struct {
	cmd  *exec.Cmd
	done chan error
	Addr string
}

// Start launches the dev server and waits until it accepts connections.
func Start(ctx context.Context, o Options) (*Server, error) {
	host, port, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("temporal address %q: %w", o.Addr, err)
	}
	args := []string{"server", "start-dev", "--ip", host, "--port", port, "--log-level", "warn"}
	if o.UIPort > 0 {
		args = append(args, "--ui-port", strconv.Itoa(o.UIPort), "--ui-ip", host)
	} else {
		args = append(args, "--headless")
	}
	if o.DBFile != "" {
		args = append(args, "--db-filename", o.DBFile)
	}
	for _, name := range workflows.SearchAttributeNames {
		args = append(args, "--search-attribute", name+"=Keyword")
	}
	cmd := exec.Command(o.CLI, args...)
	cmd.Stdout, cmd.Stderr = o.Log, o.Log
	// Own process group, so stopping it stops its children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start temporal dev server: %w", err)
	}
	s := &Server{cmd: cmd, done: make(chan error, 1), Addr: o.Addr}
	go func() { s.done <- cmd.Wait() }()
	deadline := time.Now().Add(90 * time.Second)
	for !Answering(o.Addr) {
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("temporal dev server exited early: %v", err)
		case <-ctx.Done():
			s.Stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, errors.New("temporal dev server did not answer within 90s")
		}
	}
	if o.Logger != nil {
		o.Logger.Info("temporal dev server started", "address", o.Addr, "ui", o.UIPort, "pid", cmd.Process.Pid)
	}
	return s, nil
}

// Stop terminates the server (SIGTERM, then SIGKILL after 10s) and waits.
func (s *Server) Stop() {
	pgid := -s.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-s.done
	}
}
