package sshhost

import (
	"strings"
	"testing"
)

// The driver reads a teardown's verdict only from lines carrying the run's
// tag, and a dirty verdict must count the KD_DIRTY lines it follows: an
// untagged or foreign-tagged "clean" is no verdict (the step is retried), a
// miscounted report stays dirty, and a reboot request is said.
func TestParseTeardownVerdict(t *testing.T) {
	const tag = "0123abcd"
	cases := []struct {
		name, out  string
		nilResult  bool
		dirty      int
		wantReason string
	}{
		{name: "clean", out: "KD_STEP locked\nKD_GPU_RESET none x\nKD_TEARDOWN_OK " + tag + "\n"},
		{name: "untagged clean", out: "KD_TEARDOWN_OK\n", nilResult: true},
		{name: "other tag", out: "KD_TEARDOWN_OK ffff\n", nilResult: true},
		{name: "clean line with more", out: "KD_TEARDOWN_OK " + tag + " x\n", nilResult: true},
		{name: "dirty", out: "KD_DIRTY a\nKD_DIRTY b\nKD_TEARDOWN_DIRTY " + tag + " 2\n", dirty: 2, wantReason: "a ; b"},
		{name: "dirty, a reason lost", out: "xKD_DIRTY a\nKD_DIRTY b\nKD_TEARDOWN_DIRTY " + tag + " 2\n", dirty: 2,
			wantReason: "illisible"},
		{name: "dirty, none readable", out: "KD_TEARDOWN_DIRTY " + tag + " 1\n", dirty: 1, wantReason: "illisible"},
		{name: "clean and dirty", out: "KD_DIRTY a\nKD_TEARDOWN_OK " + tag + "\n", dirty: 2, wantReason: "incohérent"},
		{name: "reboot", out: "KD_DIRTY p\nKD_REBOOT état D\nKD_CUSTOMER chown\nKD_TEARDOWN_DIRTY " + tag + " 1\n", dirty: 1,
			wantReason: "redémarrage nécessaire : état D ; du fait du client : chown"},
	}
	for _, c := range cases {
		got := parseTeardown(scriptResult{Stdout: c.out, Tag: tag})
		if c.nilResult {
			if got != nil {
				t.Errorf("%s: %+v, want no verdict", c.name, got)
			}
			continue
		}
		if got == nil {
			t.Errorf("%s: no verdict", c.name)
			continue
		}
		if len(got.Dirty) != c.dirty || !strings.Contains(got.reason(), c.wantReason) {
			t.Errorf("%s: dirty %v, reason %q", c.name, got.Dirty, got.reason())
		}
	}
}
