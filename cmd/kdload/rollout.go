package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/kernodeck/kernodeck/codec"
	"github.com/kernodeck/kernodeck/secrets"
	"github.com/kernodeck/kernodeck/workflows"
)

// rollWorkers is a rolling restart of prodlike's two workers onto the
// binary b.rollout, 2 s after the block, under the burst: the binary
// replaces prodlike's (the supervisor starts the new one), then worker-1
// is stopped by SIGTERM, as systemd stops a unit; once the new worker-1 is
// ready, old worker-2 and new worker-1 run side by side for 15 s, then
// worker-2 goes the same way.
func (b *burst) rollWorkers(ctx context.Context, tBlock time.Time, rep *killReport) {
	if !sleepCtx(ctx, time.Until(tBlock.Add(2*time.Second))) {
		return
	}
	bin := b.dir + "/bin/kernodeck"
	if err := copyExecutable(b.rollout, bin+".rollout"); err != nil {
		rep.add("rollout: %v", err)
		return
	}
	if err := os.Rename(bin+".rollout", bin); err != nil {
		rep.add("rollout: %v", err)
		return
	}
	for i, name := range []string{"worker-1", "worker-2"} {
		if i > 0 && !sleepCtx(ctx, 15*time.Second) {
			return
		}
		old, err := b.prodlikePID(name)
		if err != nil {
			rep.add("rollout: %s: %v", name, err)
			return
		}
		tStop := time.Now()
		_ = syscall.Kill(old, syscall.SIGTERM)
		if p, ok := b.waitRestarted(ctx, name, old); ok {
			rep.add("rollout: %s (pid %d) stopped by SIGTERM %.1f s after the block; the new build (pid %d) ready %.1f s later",
				name, old, tStop.Sub(tBlock).Seconds(), p, time.Since(tStop).Seconds())
		}
	}
}

// waitRestarted waits until prodlike has started name again (a PID other
// than old) and the new process says it is ready.
func (b *burst) waitRestarted(ctx context.Context, name string, old int) (int, bool) {
	for ctx.Err() == nil {
		if p, err := b.prodlikePID(name); err == nil && p != old && ready(ctx, metricsAddr(name)) {
			return p, true
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	return 0, false
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func copyExecutable(from, to string) error {
	raw, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, raw, 0o755)
}

// metricsAddr is a prodlike process's operations listener
// (KD_PRODLIKE_METRICS: "name=host:port ...").
func metricsAddr(name string) string {
	for _, kv := range strings.Fields(os.Getenv("KD_PRODLIKE_METRICS")) {
		if n, addr, ok := strings.Cut(kv, "="); ok && n == name {
			return addr
		}
	}
	return ""
}

// ready reports whether the process at the operations listener addr says
// it is ready.
func ready(ctx context.Context, addr string) bool {
	if addr == "" {
		return false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// reportVersions reads every order's workflow history and counts the
// history versions recorded (change ID kernodeck-history), the workflows
// that took the kdrollout build's step, and workflow tasks that failed.
func (b *burst) reportVersions(ctx context.Context, out io.Writer, refs []string) error {
	tc, err := b.dialTemporal()
	if err != nil {
		return err
	}
	defer tc.Close()
	versions := map[int]int{}
	stepped, taskFailures := 0, map[string]int{} // by cause
	// Markers are sealed as every payload: opened with the deployment's keyring.
	kr, err := secrets.Parse(os.Getenv("KERNODECK_SECRET_KEYS"))
	if err != nil {
		return fmt.Errorf("-versions needs the deployment's KERNODECK_SECRET_KEYS: %w", err)
	}
	dc := codec.DataConverter(kr)
	for _, ref := range refs {
		it := tc.GetWorkflowHistory(ctx, workflows.RentalWorkflowID(ref), "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		version := 0 // DefaultVersion: no marker
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return fmt.Errorf("history of %s: %w", ref, err)
			}
			if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil {
				taskFailures[f.GetCause().String()]++
			}
			if v, ok := workflows.RecordedVersion(ev, dc); ok {
				version = v
			}
			if m := ev.GetMarkerRecordedEventAttributes(); m.GetMarkerName() == "SideEffect" {
				var s string
				if dc.FromPayloads(m.GetDetails()["data"], &s) == nil && s == "kdrollout" {
					stepped++
				}
			}
		}
		versions[version]++
	}
	fmt.Fprintf(out, "history versions recorded (version: workflows): %v; workflows that took the kdrollout step: %d; failed workflow tasks by cause: %v\n",
		versions, stepped, taskFailures)
	return nil
}
