package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/metrics"
)

// `kernodeck version` needs no configuration and prints the build: the
// module version, the revision (marked when the tree was dirty), the
// commit time and the Go version.
func TestVersionCommand(t *testing.T) {
	t.Setenv("KERNODECK_FOUR_EYES_CENTS", "0") // an invalid config is not read
	var out, errb bytes.Buffer
	if rc := run(context.Background(), []string{"version"}, &out, &errb); rc != 0 {
		t.Fatalf("version: rc %d, stderr %s", rc, errb.String())
	}
	cur := metrics.CurrentBuild()
	if !strings.HasPrefix(out.String(), "kernodeck "+cur.Version+"\n") || !strings.Contains(out.String(), "go:       "+runtime.Version()) {
		t.Fatalf("version printed:\n%s", out.String())
	}

	var w bytes.Buffer
	writeVersion(&w, metrics.Build{Version: "v1.4.0", Revision: "0123abcd", Time: "2026-12-06T22:00:00Z", Modified: true, GoVersion: "go1.26.8"})
	want := "kernodeck v1.4.0\nrevision: 0123abcd (with uncommitted changes)\nbuilt:    2026-12-06T22:00:00Z (commit time)\ngo:       go1.26.8\n"
	if w.String() != want {
		t.Fatalf("version of a stamped build:\n%s\nwant:\n%s", w.String(), want)
	}
}
