package main

import (
	"fmt"
	"io"

	"github.com/kernodeck/kernodeck/metrics"
)

// runVersion prints the binary's module version, VCS revision and build
// time, as the Go toolchain stamped them (runtime/debug.ReadBuildInfo);
// kernodeck_build_info exports the same on every operations listener.
func runVersion(stdout io.Writer) int {
	writeVersion(stdout, metrics.CurrentBuild())
	return 0
}

func writeVersion(w io.Writer, b metrics.Build) {
	rev, built := b.Revision, b.Time
	if rev == "" {
		rev = "unknown (built without VCS information)"
	} else if b.Modified {
		rev += " (with uncommitted changes)"
	}
	if built == "" {
		built = "unknown"
	}
	fmt.Fprintf(w, "kernodeck %s\nrevision: %s\nbuilt:    %s (commit time)\ngo:       %s\n", b.Version, rev, built, b.GoVersion)
}
