package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/provision/sshhost/sshtest"
)

// `kernodeck hosts repair` logs in to the host with the worker's admin key
// and runs the release check again for the host's past accounts: a file of
// a past customer's uid left on the host makes it refuse (exit 1, the file
// named, the host stays broken); once the file is gone it passes and the
// host is available. Without the admin key it refuses to skip the check.
func TestHostsRepairChecksTheHost(t *testing.T) {
	sshtest.RequireRoot(t)
	ctx := context.Background()
	db := pgtest.NewDB(t)
	keyPEM := sshtest.NewKeyPEM(t)
	h := sshtest.Start(t, sshtest.RTXA5000, sshtest.Options{AdminKeyPEM: keyPEM})
	keyFile := filepath.Join(t.TempDir(), "admin_key")
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KERNODECK_DATABASE_URL", db.URL)
	t.Setenv("KERNODECK_SSH_KEY_FILE", "")
	run := func(args ...string) (int, string) {
		var out bytes.Buffer
		code := runHosts(ctx, args, &out, &out)
		return code, out.String()
	}
	if code, out := run("add", "gpu-cli", "--address", h.Addr, "--port", fmt.Sprint(h.Port), "--host-key", h.Fingerprint,
		"--gpu-model", "rtx-a5000", "--gpus", "1"); code != 0 {
		t.Fatalf("hosts add: %d %s", code, out)
	}
	// A past rental whose account (uid UIDMin+40, gone) left a file.
	uid := h.UIDMin + 40
	if _, err := db.Exec(`
		WITH a AS (INSERT INTO accounts (first_name, last_name, email, password_hash)
			VALUES ('Ada', 'L', 'ada@example.com', 'h') RETURNING id),
		o AS (INSERT INTO orders (ref, account_id, gpu_model, lots, gpus_per_lot, total_gpus, duration_days, preset,
			lot_cents, total_cents, status, workflow_id)
			SELECT 'KD-CLIREPAIR1', id, 'rtx-a5000', 1, 1, 1, 3, 'python', 100, 100, 'ended', 'rental-KD-CLIREPAIR1' FROM a
			RETURNING ref)
		INSERT INTO host_reservations (order_ref, host_id, host_name, unix_user, state, unix_uid, released_at)
		SELECT o.ref, h.id, h.name, 'kd-clirepair1', 'released', $1, now() FROM o, gpu_hosts h WHERE h.name = 'gpu-cli'`,
		uid); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE gpu_hosts SET state = 'broken', note = 'nettoyage incomplet' WHERE name = 'gpu-cli'`); err != nil {
		t.Fatal(err)
	}
	if _, err := h.AdminRun(fmt.Sprintf("install -d -m 755 /var/tmp/kd-daemon && touch /var/tmp/kd-daemon/core && chown %d /var/tmp/kd-daemon/core", uid)); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		var s string
		if err := db.Get(&s, `SELECT state FROM gpu_hosts WHERE name = 'gpu-cli'`); err != nil {
			t.Fatal(err)
		}
		return s
	}

	if code, out := run("repair", "gpu-cli"); code != 2 || !strings.Contains(out, "KERNODECK_SSH_KEY_FILE") || state() != "broken" {
		t.Fatalf("repair without the admin key: %d %s (host %s)", code, out, state())
	}
	t.Setenv("KERNODECK_SSH_KEY_FILE", keyFile)
	code, out := run("repair", "gpu-cli", "--note", "checked")
	if code != 1 || !strings.Contains(out, "/var/tmp/kd-daemon/core") || state() != "broken" {
		t.Fatalf("repair of a dirty host: %d %s (host %s)", code, out, state())
	}
	t.Logf("refused: %s", strings.TrimSpace(out))
	if _, err := h.AdminRun("rm -r /var/tmp/kd-daemon"); err != nil {
		t.Fatal(err)
	}
	if code, out := run("repair", "gpu-cli", "--note", "core removed"); code != 0 || state() != "available" {
		t.Fatalf("repair of a clean host: %d %s (host %s)", code, out, state())
	}
	if code, out := run("list"); code != 0 || !strings.Contains(out, "available") || !strings.Contains(out, "core removed") {
		t.Fatalf("hosts list: %d %s", code, out)
	}
}
