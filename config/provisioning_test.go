package config

import (
	"testing"

	"github.com/kernodeck/kernodeck/secrets"
)

func TestProvisioningFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c, err := ProvisioningFromEnv(env(nil))
	if err != nil || c.Provisioner != "localpg" || c.SMTPTLS != "mandatory" || len(c.CodecOrigins) != 2 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	if _, err := c.Keyring(); err == nil {
		t.Fatal("no keyring accepted outside dev")
	}
	for _, bad := range []map[string]string{
		{"KERNODECK_PROVISIONER": "docker"},
		{"KERNODECK_SMTP_TLS": "sometimes"},
		{"KERNODECK_SMTP_PORT": "x"},
	} {
		if _, err := ProvisioningFromEnv(env(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	// The SSH driver without its key: the api's and chainwatch's case
	// (docs/secrets.md); the worker refuses it.
	c, err = ProvisioningFromEnv(env(map[string]string{"KERNODECK_PROVISIONER": "ssh"}))
	if err != nil || c.CheckSSHKey() == nil {
		t.Fatalf("ssh without a key: %v, the worker's check %v", err, c.CheckSSHKey())
	}
	spec := secrets.Generate("k9")
	c, err = ProvisioningFromEnv(env(map[string]string{"KERNODECK_PROVISIONER": "ssh", "KERNODECK_SSH_KEY_FILE": "/etc/kd/admin",
		"KERNODECK_SECRET_KEYS": spec, "KERNODECK_SMTP_TLS": "none"}))
	if err != nil {
		t.Fatal(err)
	}
	if k, err := c.Keyring(); err != nil || k.PrimaryID() != "k9" {
		t.Fatalf("keyring %v", err)
	}
	// dev keeps its generated key across restarts.
	dir := t.TempDir()
	k1, gen1, err := Provisioning{}.DevKeyring(dir)
	if err != nil || !gen1 {
		t.Fatalf("first dev key: %v %v", gen1, err)
	}
	k2, gen2, err := Provisioning{}.DevKeyring(dir)
	if err != nil || gen2 {
		t.Fatalf("second dev key: %v %v", gen2, err)
	}
	if v, err := k2.Open(k1.Seal("x", "a"), "a"); err != nil || v != "x" {
		t.Fatal("dev key changed between runs")
	}
}
