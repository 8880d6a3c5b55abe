package utxo_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/chainwatch/utxo"
	"github.com/kernodeck/kernodeck/postgres"
)

// childEnv makes the test binary a watcher process instead of running tests:
// the tests re-execute themselves with it to get a watcher they can SIGKILL.
const childEnv = "KERNODECK_UTXO_CHILD_WATCHER"

// childConfig is what the parent passes to a child watcher (as JSON in
// childEnv).
type childConfig struct {
	DatabaseURL   string
	Node          utxo.Config
	RelayURL      string
	Holder        string
	Confirmations int64
	LeaseTTL      time.Duration
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChildWatcher(spec))
	}
	os.Exit(m.Run())
}

// runChildWatcher is the child process: a real Watcher on the real store,
// signalling through the parent's relay, until SIGTERM (or SIGKILL).
func runChildWatcher(spec string) int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var cfg childConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		logger.Error("child config", "err", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		logger.Error("database", "err", err)
		return 1
	}
	defer db.Close()
	chain, err := utxo.New(cfg.Node)
	if err != nil {
		logger.Error("node", "err", err)
		return 1
	}
	defer chain.Close()
	w := &chainwatch.Watcher{
		Chain:    chain,
		Store:    db,
		Signaler: apptest.HTTPSignaler{URL: cfg.RelayURL},
		Policy:   chainwatch.Policy{Confirmations: cfg.Confirmations},
		Holder:   cfg.Holder,
		LeaseTTL: cfg.LeaseTTL,
		Poll:     100 * time.Millisecond,
		Backfill: 10,
		Logger:   logger,
	}
	logger.Info("child watcher starting", "holder", cfg.Holder, "pid", os.Getpid())
	if err := w.Run(ctx); err != nil {
		logger.Error("watcher", "err", err)
		return 1
	}
	return 0
}

// child is a watcher process started by a test.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// startChild re-executes the test binary as a watcher process.
func (f *fixture) startChild(relayURL, holder string, leaseTTL time.Duration) *child {
	f.t.Helper()
	spec, err := json.Marshal(childConfig{
		DatabaseURL: f.e.DB.URL, Node: f.n.cfg(), RelayURL: relayURL, Holder: holder,
		Confirmations: f.n.policy(), LeaseTTL: leaseTTL,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	logPath := filepath.Join(f.t.TempDir(), holder+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		f.t.Fatal(err)
	}
	// -test.run=^$ keeps the child from running tests should childEnv be
	// lost; TestMain never gets there with it set.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(c.done) }()
	t := f.t
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("watcher %s (pid %d) log (tail):\n%s", holder, cmd.Process.Pid, tail(string(b), 4000))
			}
		}
	})
	return c
}

// kill sends SIGKILL: no deferred lease release, no clean shutdown.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		c.kill()
	}
}
