package metrics

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// FamBuildInfo is the build of the running binary, always 1 (every process
// exports it: a rollout shows as revisions changing per instance).
const FamBuildInfo = "kernodeck_build_info"

// Build is what the Go toolchain stamped into the binary: the main
// module's version ("(devel)" for a build from a checkout), the VCS
// revision and commit time and whether the tree had uncommitted changes
// (empty when built without VCS information, e.g. `go run` or tests).
type Build struct {
	Version   string
	Revision  string
	Time      string // vcs.time, RFC 3339
	Modified  bool
	GoVersion string
}

// BuildOf reads a build from the toolchain's information (nil: unknown).
func BuildOf(info *debug.BuildInfo) Build {
	b := Build{Version: "unknown", GoVersion: runtime.Version()}
	if info == nil {
		return b
	}
	if info.Main.Version != "" {
		b.Version = info.Main.Version
	}
	if info.GoVersion != "" {
		b.GoVersion = info.GoVersion
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// CurrentBuild is this binary's build (runtime/debug.ReadBuildInfo).
func CurrentBuild() Build {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return BuildOf(nil)
	}
	return BuildOf(info)
}

// revisionLabel is the revision as exported: "-dirty" marks a build from
// a tree with uncommitted changes, "unknown" a build without VCS stamps.
func (b Build) revisionLabel() string {
	switch {
	case b.Revision == "":
		return "unknown"
	case b.Modified:
		return b.Revision + "-dirty"
	}
	return b.Revision
}

func registerBuildInfo(reg prometheus.Registerer, b Build) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: FamBuildInfo,
		Help: "The running binary's build: module version, VCS revision and Go version (always 1).",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(b.Version, b.revisionLabel(), b.GoVersion).Set(1)
	reg.MustRegister(g)
}
