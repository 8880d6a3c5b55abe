package deploy

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/config"
)

// The worker unit gives a stopping worker more time than the worker gives
// its running activities (KERNODECK_WORKER_STOP_TIMEOUT's default), with a
// margin for the process's own shutdown: otherwise systemd's SIGKILL cuts
// the activities the stop timeout lets finish.
func TestWorkerUnitOutlastsTheStopTimeout(t *testing.T) {
	raw, err := os.ReadFile("systemd/kernodeck-worker@.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^TimeoutStopSec=(\d+)$`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("kernodeck-worker@.service: no TimeoutStopSec=<seconds>")
	}
	secs, _ := strconv.Atoi(string(m[1]))
	if stop := time.Duration(secs) * time.Second; stop < config.DefaultWorkerStopTimeout+15*time.Second {
		t.Fatalf("TimeoutStopSec=%d: want at least KERNODECK_WORKER_STOP_TIMEOUT's default (%s) + 15 s", secs, config.DefaultWorkerStopTimeout)
	}
}
