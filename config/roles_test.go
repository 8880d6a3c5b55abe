package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The split issue 38 asks for: the api holds no SSH key, no node and no
// SMTP credentials; only the worker holds the SSH key, only chainwatch the
// node credentials, only the mail dispatcher the SMTP login; migrate only
// the database.
func TestEachRoleHoldsOnlyItsSecrets(t *testing.T) {
	only := map[string][]string{
		"KERNODECK_SSH_KEY_FILE":      {RoleWorker},
		"KERNODECK_SMTP_PASSWORD":     {RoleMail},
		"KERNODECK_SMTP_USER":         {RoleMail},
		"KERNODECK_BITCOIN_NODE_URL":  {RoleChainwatch},
		"KERNODECK_LITECOIN_NODE_URL": {RoleChainwatch},
		"KERNODECK_ETHEREUM_NODE_URL": {RoleChainwatch},
		"KERNODECK_TRON_NODE_URL":     {RoleChainwatch},
		"KERNODECK_SOLANA_NODE_URL":   {RoleChainwatch},
		"KERNODECK_ETHEREUM_WS_URL":   {RoleChainwatch},
		"KERNODECK_SECRET_KEYS":       {RoleAPI, RoleWorker, RoleChainwatch, RoleMail},
		"KERNODECK_SUPPORT_TOKENS":    {RoleAPI, RoleWorker},
		"KERNODECK_DATABASE_URL":      Roles,
	}
	if got, want := len(SecretNames()), len(only); got != want {
		t.Errorf("%d secret variables, the test knows %d: %v", got, want, SecretNames())
	}
	const value = "Sup3r-Secret-Value-42"
	for name, holders := range only {
		for _, role := range Roles {
			err := CheckRole(role, env(map[string]string{name: value}))
			want := slices.Contains(holders, role)
			if Holds(role, name) != want {
				t.Errorf("Holds(%s, %s) = %v", role, name, !want)
			}
			switch {
			case want && err != nil:
				t.Errorf("%s refused its own %s: %v", role, name, err)
			case !want && err == nil:
				t.Errorf("%s started holding %s", role, name)
			case !want && (!errors.Is(err, ErrForeignSecret) || !strings.Contains(err.Error(), name) ||
				strings.Contains(err.Error(), value)):
				t.Errorf("%s given %s: %v (want ErrForeignSecret naming the variable, not its value)", role, name, err)
			}
		}
	}
	// Not a service: dev and the operators' commands hold what they need.
	all := map[string]string{}
	for _, n := range SecretNames() {
		all[n] = value
	}
	for _, cmd := range []string{"dev", "access", "recover"} {
		if err := CheckRole(cmd, env(all)); err != nil {
			t.Errorf("%s: %v", cmd, err)
		}
	}
	if !Holds(RoleAPI, "KERNODECK_HTTP_ADDR") {
		t.Error("a setting that is no secret refused")
	}
}

// A secret comes from $CREDENTIALS_DIRECTORY/<variable> when the
// environment leaves it empty (systemd's LoadCredential=); a _FILE
// variable is the credential file's path; the environment wins.
func TestCredentialsDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("KERNODECK_SMTP_PASSWORD", "from-credential\n")
	write("KERNODECK_SSH_KEY_FILE", "key bytes")
	write("KERNODECK_DATABASE_URL", "postgres://kd:pw@db:5432/kd\n")
	vars := map[string]string{CredentialsDirectoryEnv: dir}
	get := WithCredentials(env(vars))
	if v := get("KERNODECK_SMTP_PASSWORD"); v != "from-credential" {
		t.Errorf("SMTP password %q", v)
	}
	if v := get("KERNODECK_SSH_KEY_FILE"); v != filepath.Join(dir, "KERNODECK_SSH_KEY_FILE") {
		t.Errorf("SSH key file %q, want the credential's path", v)
	}
	if v := get("KERNODECK_SMTP_USER"); v != "" {
		t.Errorf("absent credential %q", v)
	}
	if v := get("../KERNODECK_SMTP_PASSWORD"); v != "" {
		t.Errorf("a name out of the directory read: %q", v)
	}
	vars["KERNODECK_SMTP_PASSWORD"] = "from-env"
	if v := get("KERNODECK_SMTP_PASSWORD"); v != "from-env" {
		t.Errorf("the environment should win: %q", v)
	}
	c, err := FromEnv(get)
	if err != nil || c.DatabaseURL != "postgres://kd:pw@db:5432/kd" {
		t.Fatalf("database URL from a credential: %q %v", c.DatabaseURL, err)
	}
	p, err := ProvisioningFromEnv(get)
	if err != nil || p.SSHKeyFile != filepath.Join(dir, "KERNODECK_SSH_KEY_FILE") {
		t.Fatalf("SSH key file from a credential: %q %v", p.SSHKeyFile, err)
	}
	// A credential given to the wrong role is refused like a variable.
	if err := CheckRole(RoleAPI, get); !errors.Is(err, ErrForeignSecret) || !strings.Contains(err.Error(), "KERNODECK_SSH_KEY_FILE") {
		t.Errorf("api with an SSH key credential: %v", err)
	}
	if err := CheckCredentials(env(vars)); err != nil {
		t.Errorf("known credentials: %v", err)
	}
	write("temporal-client-key", "not ours")
	if err := CheckCredentials(env(vars)); err != nil {
		t.Errorf("a credential a unit names itself: %v", err)
	}
	typo := strings.Replace("KERNODECK_SMTP_PASSWORD", "SS", "S", 1)
	write(typo, "typo")
	if err := CheckCredentials(env(vars)); err == nil || !strings.Contains(err.Error(), typo) {
		t.Errorf("a misspelt credential: %v", err)
	}
}

// A malformed URL that carries credentials is refused naming the
// variable, never quoting the value (url.Error quotes it whole).
func TestMalformedCredentialURLsNotInErrors(t *testing.T) {
	const pass = "Pa55-word-in-url"
	bad := "http://rpc:" + pass + "@127.0.0.1:notaport/"
	for _, key := range []string{"KERNODECK_DATABASE_URL"} {
		_, err := FromEnv(env(map[string]string{key: strings.Replace(bad, "http", "postgres", 1)}))
		if err == nil || !strings.Contains(err.Error(), key) || strings.Contains(err.Error(), pass) {
			t.Errorf("%s: %v", key, err)
		}
	}
	for _, key := range []string{"KERNODECK_BITCOIN_NODE_URL", "KERNODECK_LITECOIN_NODE_URL", "KERNODECK_ETHEREUM_NODE_URL",
		"KERNODECK_TRON_NODE_URL", "KERNODECK_SOLANA_NODE_URL", "KERNODECK_ETHEREUM_WS_URL"} {
		_, err := PaymentsFromEnv(env(map[string]string{key: bad}))
		if err == nil || !strings.Contains(err.Error(), key) || strings.Contains(err.Error(), pass) {
			t.Errorf("%s: %v", key, err)
		}
	}
	// lib/pq's key=value form stays accepted.
	if _, err := FromEnv(env(map[string]string{"KERNODECK_DATABASE_URL": "host=db user=kd password=" + pass})); err != nil {
		t.Errorf("key=value database URL: %v", err)
	}
}
