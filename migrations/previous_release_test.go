package migrations_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/apptest/apicheck"
	"github.com/kernodeck/kernodeck/migrations"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/secrets"
)

// TestPreviousReleaseOnTheNewSchema runs the previous release's api on a
// database migrated by this tree: during a rollout, and after a rollback,
// the previous binaries run on the new schema (docs/UPGRADING.md, expand
// then contract). The previous release is the commit before the one that
// added the newest migration (HEAD while that migration is not committed
// yet), built from `git archive` into a temporary directory and kept
// there per commit (os.TempDir()/kernodeck-previous-release/<commit>), so
// it is built once per release: about a minute with a warm module cache.
//
// The old api must start and serve (apicheck.Serves: /readyz with
// Temporal unreachable, the catalog, a registration read back with its
// session, support's view of an order written by this tree's code).
func TestPreviousReleaseOnTheNewSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release")
	}
	root := strings.TrimSpace(gitOut(t, "", "rev-parse", "--show-toplevel"))
	newest := newestMigration(t)
	added := strings.TrimSpace(gitOut(t, root, "log", "-1", "--format=%H", "--diff-filter=A", "--", "migrations/"+newest))
	previous := strings.TrimSpace(gitOut(t, root, "rev-parse", "HEAD"))
	if added != "" {
		previous = strings.TrimSpace(gitOut(t, root, "rev-parse", added+"^"))
	}
	t.Logf("newest migration %s (added by %.12s); previous release %.12s", newest, added, previous)
	bin := previousBinary(t, root, previous)

	ctx := context.Background()
	url := pgtest.EmptyDB(t)
	db, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := postgres.Migrate(ctx, db.DB.DB); err != nil {
		t.Fatal(err)
	}
	_, ref := pgtest.AccountWithOrder(t, db, "previous-release@example.com")

	httpAddr, opsAddr := apicheck.FreeAddr(t), apicheck.FreeAddr(t)
	const agentToken = "previous-release-agent-token-0123"
	cmd := exec.Command(bin, "api")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"KERNODECK_DATABASE_URL=" + url,
		"KERNODECK_SECRET_KEYS=" + secrets.Generate("p1"),
		"KERNODECK_SUPPORT_TOKENS=agent:" + agentToken,
		"KERNODECK_HTTP_ADDR=" + httpAddr,
		"KERNODECK_METRICS_ADDR=" + opsAddr,
		"KERNODECK_COOKIE_SECURE=false",
		"KERNODECK_RATES=static",
		"KERNODECK_STATIC_RATES=LTC=90",
		"KERNODECK_LOG_LEVEL=info",
		// Temporal unreachable: the api's readiness is PostgreSQL's.
		"TEMPORAL_ADDRESS=" + apicheck.FreeAddr(t),
		"TEMPORAL_CONFIG_FILE=" + filepath.Join(t.TempDir(), "none.toml"),
	}
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		exitErr error
	)
	waited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		mu.Lock()
		exitErr = fmt.Errorf("exit: %v", err)
		mu.Unlock()
		close(waited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-waited
	})
	apicheck.Serves(t, apicheck.API{HTTP: httpAddr, Ops: opsAddr, AgentToken: agentToken, OrderRef: ref,
		Exited: func() error {
			mu.Lock()
			defer mu.Unlock()
			return exitErr
		},
		Output: out.String})
}

// newestMigration is the name of this tree's newest migration.
func newestMigration(t *testing.T) string {
	t.Helper()
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("migrations: %v %v", names, err)
	}
	slices.Sort(names)
	return names[len(names)-1]
}

// previousBinary builds commit's cmd/kernodeck once, and returns its path.
func previousBinary(t *testing.T, root, commit string) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "kernodeck-previous-release", commit)
	bin := filepath.Join(dir, "kernodeck")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	archive := exec.Command("git", "archive", "--format=tar", commit)
	archive.Dir = root
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	var archiveErr bytes.Buffer
	archive.Stderr = &archiveErr
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", commit, err, archiveErr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("tar: %v", err)
	}
	began := time.Now()
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	build := exec.Command("go", "build", "-o", tmp, "./cmd/kernodeck")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the previous release %.12s: %v\n%s", commit, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built the previous release %.12s in %v", commit, time.Since(began).Round(time.Second))
	return bin
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
