package sshhost_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/provision/sshhost"
	"github.com/kernodeck/kernodeck/provision/sshhost/sshtest"
)

// mountSSHFS mounts, on the host, a FUSE filesystem as sshfs's mount table
// line shows it (fstype fuse.sshfs, source user@host:path): sshfs is not
// installed on the test machines, so the mount is made with /dev/fuse
// directly, and answers nothing (its daemon is the mount command, gone at
// once: ENOTCONN). The kernel's mount table, which prepare reads, is the
// real one.
func mountSSHFS(t *testing.T, h *sshtest.Host, dir, opts string) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse on this machine")
	}
	if _, err := h.AdminRun(fmt.Sprintf("set -e; mkdir -p %[1]s; [ -e /run/kd-fuse ] || mknod -m 0600 /run/kd-fuse c 10 229; "+
		"mount -t fuse.sshfs -o fd=3,rootmode=40000,user_id=0,group_id=0,%[2]s kd@192.0.2.7:/srv/share %[1]s 3<>/run/kd-fuse",
		dir, opts)); err != nil {
		t.Fatalf("mount %s: %v", dir, err)
	}
}

// A host where customers could write to a network mount is refused by
// prepare, like a host with the wrong key: set aside (broken, its note
// naming the mount), its reservation failed, no account made, and a
// non-retryable host_refused error, repeated by a retry. Accepted: a
// read-only one, one under a directory closed to others (/root), a FUSE
// mount without allow_other (only its owner may enter), and a nosuid one
// in the customer's own home.
func TestPrepareRefusesAWritableNetworkMount(t *testing.T) {
	sshtest.RequireRoot(t)
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000)
	f.addHost("gpu-mounts", h, h.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, h, t)
	mountSSHFS(t, h, "/opt/kd-datasets", "ro,allow_other")
	mountSSHFS(t, h, "/root/kd-backup", "allow_other")
	mountSSHFS(t, h, "/opt/kd-own", "nosuid")

	_, ref, user := f.rental(d, "rtx-a5000", 1, "python")
	t.Run("the customer's own nosuid mount", func(t *testing.T) {
		mountSSHFS(t, h, "/home/"+user+"/data", "nosuid,nodev,allow_other")
		if err := d.Prepare(ctx, activities.PrepareInput{OrderRef: ref, Preset: "python"}); err != nil {
			t.Errorf("prepare again: %v", err)
		}
		if _, err := h.AdminRun("umount -l /home/" + user + "/data && rmdir /home/" + user + "/data"); err != nil {
			t.Fatal(err)
		}
	})
	if err := d.RevokeAccess(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if st := f.hostState("gpu-mounts"); st != sshhost.StateAvailable {
		t.Fatalf("host %s after the first rental", st)
	}

	// Shared, writable and reachable: nosuid alone is not enough.
	mountSSHFS(t, h, "/opt/kd-share", "nosuid,nodev,allow_other")
	ref2 := f.order("rtx-a5000", 1, "python", "")
	user2, _ := d.UnixUser(ref2)
	if err := d.Reserve(ctx, activities.ReserveInput{OrderRef: ref2, GPUModel: "rtx-a5000", GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the retry says it again
		err := d.Prepare(ctx, activities.PrepareInput{OrderRef: ref2, Preset: "python"})
		var de *domain.Error
		if !errors.As(err, &de) || de.Code != sshhost.ErrTypeHostRefused || !strings.Contains(de.Message, "/opt/kd-share (fuse.sshfs kd@192.0.2.7:/srv/share)") {
			t.Fatalf("prepare on a host with a shared writable mount: %v", err)
		}
		for _, accepted := range []string{"kd-datasets", "kd-backup", "kd-own"} {
			if strings.Contains(de.Message, accepted) {
				t.Errorf("accepted mount %s named: %s", accepted, de.Message)
			}
		}
		if i == 0 {
			t.Logf("refused: %s", de.Message)
		}
	}
	var state, note, rstate string
	_ = f.db.QueryRow(`SELECT h.state, h.note, r.state FROM gpu_hosts h JOIN host_reservations r ON r.host_id = h.id
		WHERE r.order_ref = $1`, ref2).Scan(&state, &note, &rstate)
	if state != sshhost.StateBroken || rstate != "failed" || !strings.Contains(note, "/opt/kd-share") {
		t.Errorf("host %s (note %q), reservation %s: want broken, failed", state, note, rstate)
	}
	if lines := h.PasswdLines(t, user2+":"); len(lines) != 0 {
		t.Errorf("account made on a refused host: %v", lines)
	}
}

// The classifier prepare runs (kd_unfit_mounts, scripts/common.sh) on mount
// tables recorded with network filesystems the test machines cannot mount
// (testdata/mountinfo/README.md says where each comes from). It runs on a
// stand-in host, where the tables' mount points do not exist: every one
// counts as reachable there (kd_reachable is the real mounts' test, above).
func TestUnfitMountsOfRecordedTables(t *testing.T) {
	sshtest.RequireRoot(t)
	h := sshtest.Start(t, sshtest.RTXA5000)
	for _, tc := range []struct {
		table string
		unfit []string
	}{
		// The gvfs FUSE mount in a home has no allow_other: its owner's only.
		{"util-linux-workstation-cifs", []string{"/mnt/sounds (cifs //foo.home/bar/)"}},
		// The read-only ext4 bind on /opt is local anyway.
		{"kubernetes-pod-nfs4", []string{"/kaiwudb/certs (nfs4 20.20.20.43:/data/k8s/nfs_share/pvc-2108ee90-b185-43f7-a95c-21d9a4d84a67)"}},
	} {
		t.Run(tc.table, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/mountinfo/" + tc.table)
			if err != nil {
				t.Fatal(err)
			}
			table := "/root/" + tc.table
			if err := os.WriteFile(h.Path(table), raw, 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := h.AdminRun("KD_USER=kdt-none KD_SCRATCH=/var/lib/kernodeck/scratch bash -s <<'KD_EOF'\n" +
				sshhost.CommonScript + "\nkd_reachable() { return 0; }\nkd_unfit_mounts " + table + "\nKD_EOF\n")
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSpace(out), "\n")
			if !slices.Equal(got, tc.unfit) {
				t.Errorf("unfit mounts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.unfit, "\n"))
			}
		})
	}
}
