package metrics

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// Every process's registry exports kernodeck_build_info at 1, labelled with
// the binary's module version, revision and Go version.
func TestBuildInfoGauge(t *testing.T) {
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := CurrentBuild()
	for _, f := range fams {
		if f.GetName() != FamBuildInfo {
			continue
		}
		if len(f.GetMetric()) != 1 {
			t.Fatalf("%s: %d series, want 1", FamBuildInfo, len(f.GetMetric()))
		}
		s := f.GetMetric()[0]
		got := map[string]string{}
		for _, l := range s.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if got["version"] != want.Version || got["revision"] != want.revisionLabel() || got["goversion"] != runtime.Version() || len(got) != 3 {
			t.Fatalf("%s labels %v, want version=%s revision=%s goversion=%s", FamBuildInfo, got, want.Version, want.revisionLabel(), runtime.Version())
		}
		if v := s.GetGauge().GetValue(); v != 1 {
			t.Fatalf("%s = %v, want 1", FamBuildInfo, v)
		}
		return
	}
	t.Fatalf("no %s in the registry", FamBuildInfo)
}

// The build is read from the toolchain's stamps: version, revision, time
// and the dirty flag; without stamps the revision reads "unknown".
func TestBuildOf(t *testing.T) {
	b := BuildOf(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-12-06T22:00:00Z"},
			{Key: "vcs.modified", Value: "true"}}})
	if b.Version != "v1.4.0" || b.Revision != "0123abcd" || b.Time != "2026-12-06T22:00:00Z" || !b.Modified || b.GoVersion != "go1.26.8" {
		t.Fatalf("BuildOf: %+v", b)
	}
	if b.revisionLabel() != "0123abcd-dirty" {
		t.Fatalf("revision label %q", b.revisionLabel())
	}
	if u := BuildOf(nil); u.Version != "unknown" || u.revisionLabel() != "unknown" || u.GoVersion != runtime.Version() {
		t.Fatalf("BuildOf(nil): %+v", u)
	}
}
