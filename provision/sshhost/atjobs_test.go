package sshhost_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/provision/sshhost"
	"github.com/kernodeck/kernodeck/provision/sshhost/sshtest"
)

// A customer's at job is removed by the teardown through at's own tools
// (atrm), wherever at keeps its jobs. The teardown's other sweep deletes
// the uid's files in Debian's spool, /var/spool/cron/atjobs, read without
// following links: it hides a missing atrm on a stock host
// (TestHostileCustomerGetsNothingFromRoot), not on this one, whose spool
// is a link to another directory, as on hosts that keep it elsewhere.
func TestAtJobRemovedWhereverTheSpoolIs(t *testing.T) {
	sshtest.RequireRoot(t)
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000)
	if out, err := h.AdminRun(`command -v at && command -v atq && command -v atrm &&
		mv /var/spool/cron/atjobs /var/spool/kd-atjobs && ln -s ../kd-atjobs /var/spool/cron/atjobs`); err != nil {
		t.Fatalf("at spool moved behind a link (at from Debian's packages, or scripts/ensure-tools.sh): %v %s", err, out)
	}
	f.addHost("gpu-atjobs", h, h.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, h, t)
	signer, ref, user := f.rental(d, "rtx-a5000", 1, "python")
	uid := h.UID(t, user)

	if out, err := h.Run(user, signer, "echo 'touch /tmp/kd-at-ran' | at now + 1 hour"); err != nil {
		t.Fatalf("customer's at job: %v %s", err, out)
	}
	if out, err := h.AdminRun("atq"); err != nil || !strings.Contains(out, user) {
		t.Fatalf("the customer's at job is not queued: %v %q", err, out)
	}
	if jobs := filesOf(t, uid, h.Path("/var/spool/kd-atjobs")); len(jobs) != 1 {
		t.Fatalf("the customer's job file in the moved spool: %v", jobs)
	}

	if err := d.RevokeAccess(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if out, err := h.AdminRun("atq"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("at jobs after the teardown: %v %q, want none", err, out)
	}
	if left := filesOf(t, uid, h.Path("/var/spool")); len(left) != 0 {
		t.Errorf("files of uid %d left in /var/spool: %v", uid, left)
	}
	if st := f.hostState("gpu-atjobs"); st != sshhost.StateAvailable {
		t.Errorf("host %s after the teardown, want available", st)
	}
}
