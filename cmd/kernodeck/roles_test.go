package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/secrets"
)

// cleanEnv empties every Kernodeck and Temporal variable of the test's
// environment, the credentials directory included.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "KERNODECK_") || strings.HasPrefix(k, "TEMPORAL_") || k == config.CredentialsDirectoryEnv {
			t.Setenv(k, "")
		}
	}
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "none.toml"))
}

// startCase is a process start with a bad or misplaced secret: secrets
// are what must not appear in what it prints; want, what must (the
// variable it is about).
type startCase struct {
	name    string
	command string
	env     map[string]string
	// creds go to $CREDENTIALS_DIRECTORY instead of the environment.
	creds   map[string]string
	secrets []string
	want    string
}

// The database is never reached: a start that gets past its
// configuration fails there (port 1), its password not printed either.
const unreachableDB = "postgres://kd:Db-Passw0rd-unreached@127.0.0.1:1/kd?sslmode=disable"

func runStart(t *testing.T, c startCase) (int, string) {
	t.Helper()
	cleanEnv(t)
	if _, ok := c.creds["KERNODECK_DATABASE_URL"]; !ok {
		t.Setenv("KERNODECK_DATABASE_URL", unreachableDB)
	}
	if _, ok := c.creds["KERNODECK_SECRET_KEYS"]; !ok && c.command != config.RoleMigrate {
		t.Setenv("KERNODECK_SECRET_KEYS", secrets.Generate("k1"))
	}
	for k, v := range c.env {
		t.Setenv(k, v)
	}
	if len(c.creds) > 0 {
		dir := t.TempDir()
		for k, v := range c.creds {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv(config.CredentialsDirectoryEnv, dir)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	code := run(ctx, []string{c.command}, &out, &out)
	return code, out.String()
}

func checkStart(t *testing.T, c startCase) {
	t.Helper()
	code, out := runStart(t, c)
	if code == 0 {
		t.Errorf("%s: %s started (exit 0)", c.name, c.command)
	}
	for _, s := range append(c.secrets, "Db-Passw0rd-unreached") {
		if strings.Contains(out, s) {
			t.Errorf("%s: the secret %q is in the output of `kernodeck %s`:\n%s", c.name, s, c.command, out)
		}
	}
	if c.want != "" && !strings.Contains(out, c.want) {
		t.Errorf("%s: no %q in the output of `kernodeck %s`:\n%s", c.name, c.want, c.command, out)
	}
}

// Malformed values for every secret variable, at the start of the
// process that holds it: the error names the variable, and the output
// (journald's copy) holds no secret (issue 38, item 3).
func TestSecretsNeverInStartupErrors(t *testing.T) {
	key20 := base64.StdEncoding.EncodeToString([]byte("twenty-secret-bytes!"))
	sshKey := func(body string) string {
		f := filepath.Join(t.TempDir(), "admin_key")
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	const pemBody = "S3cretSshKeyBody0123456789abcdefABCDEF"
	// BIP32's first test vector's master private key: an xprv is refused
	// where an xpub goes, and must not be printed back.
	const xprv = "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi"
	cases := []startCase{
		{name: "keyring, key not base64", command: "api",
			env: map[string]string{"KERNODECK_SECRET_KEYS": "k1:S3cret-Key!Material*not#base64"}, secrets: []string{"S3cret-Key!Material*not#base64"},
			want: "KERNODECK_SECRET_KEYS"},
		{name: "keyring, no colon", command: "worker",
			env: map[string]string{"KERNODECK_SECRET_KEYS": "k1S3cretKeyWithoutItsColon"}, secrets: []string{"S3cretKeyWithoutItsColon"},
			want: "KERNODECK_SECRET_KEYS"},
		{name: "keyring, short key", command: "chainwatch",
			env: map[string]string{"KERNODECK_SECRET_KEYS": "k1:" + key20}, secrets: []string{key20}, want: "KERNODECK_SECRET_KEYS"},
		{name: "keyring, short key, from a credential", command: "mail",
			creds: map[string]string{"KERNODECK_SECRET_KEYS": "k1:" + key20}, secrets: []string{key20}, want: "KERNODECK_SECRET_KEYS"},
		{name: "agent tokens, no colon", command: "api",
			env: map[string]string{"KERNODECK_SUPPORT_TOKENS": "agentS3cretTokenNoColon-123"}, secrets: []string{"S3cretTokenNoColon-123"},
			want: "KERNODECK_SUPPORT_TOKENS"},
		{name: "agent tokens, short token", command: "api",
			env: map[string]string{"KERNODECK_SUPPORT_TOKENS": "alice:Sh0rtTok"}, secrets: []string{"Sh0rtTok"}, want: "KERNODECK_SUPPORT_TOKENS"},
		{name: "agent tokens, second pair bad", command: "worker",
			env:     map[string]string{"KERNODECK_SUPPORT_TOKENS": "alice:0123456789abcdef-alice,bob-S3cretBobToken-xyz"},
			secrets: []string{"0123456789abcdef-alice", "S3cretBobToken-xyz"}, want: "KERNODECK_SUPPORT_TOKENS"},
		{name: "database URL, bad port", command: "migrate",
			env: map[string]string{"KERNODECK_DATABASE_URL": "postgres://kd:S3cretDbPass-1@127.0.0.1:notaport/kd"}, secrets: []string{"S3cretDbPass-1"},
			want: "KERNODECK_DATABASE_URL"},
		{name: "database URL, bad escape", command: "api",
			env: map[string]string{"KERNODECK_DATABASE_URL": "postgres://kd:S3cret%zzDbPass@127.0.0.1/kd"}, secrets: []string{"S3cret%zzDbPass", "%zz"},
			want: "KERNODECK_DATABASE_URL"},
		{name: "database URL, unreachable", command: "migrate",
			env: map[string]string{"KERNODECK_DATABASE_URL": "postgres://kd:S3cretDbPass-2@127.0.0.1:1/kd?sslmode=disable"}, secrets: []string{"S3cretDbPass-2"}},
		{name: "database key=value, bad port", command: "migrate",
			env: map[string]string{"KERNODECK_DATABASE_URL": "host=127.0.0.1 port=notaport user=kd password=S3cretDbPass-3"}, secrets: []string{"S3cretDbPass-3"}},
		{name: "database URL from a credential, bad port", command: "api",
			creds: map[string]string{"KERNODECK_DATABASE_URL": "postgres://kd:S3cretDbPass-4@127.0.0.1:notaport/kd"}, secrets: []string{"S3cretDbPass-4"},
			want: "KERNODECK_DATABASE_URL"},
		{name: "SSH key, not a key", command: "worker",
			env:     map[string]string{"KERNODECK_PROVISIONER": "ssh", "KERNODECK_SSH_KEY_FILE": sshKey("S3cretSshGarbage-not-PEM-0123456789")},
			secrets: []string{"S3cretSshGarbage"}, want: "KERNODECK_SSH_KEY_FILE"},
		{name: "SSH key, PEM with a bad body", command: "worker",
			env: map[string]string{"KERNODECK_PROVISIONER": "ssh",
				"KERNODECK_SSH_KEY_FILE": sshKey("-----BEGIN OPENSSH PRIVATE KEY-----\n" + pemBody + "\n-----END OPENSSH PRIVATE KEY-----\n")},
			secrets: []string{pemBody}, want: "KERNODECK_SSH_KEY_FILE"},
		{name: "SSH key from a credential, bad body", command: "worker",
			env:     map[string]string{"KERNODECK_PROVISIONER": "ssh"},
			creds:   map[string]string{"KERNODECK_SSH_KEY_FILE": "-----BEGIN RSA PRIVATE KEY-----\n" + pemBody + "\n-----END RSA PRIVATE KEY-----"},
			secrets: []string{pemBody}, want: "KERNODECK_SSH_KEY_FILE"},
		{name: "SMTP login, dispatcher past its configuration", command: "mail",
			env: map[string]string{"KERNODECK_SMTP_HOST": "smtp.example", "KERNODECK_SMTP_USER": "S3cretSmtpUser",
				"KERNODECK_SMTP_PASSWORD": "S3cretSmtpPass-1"}, secrets: []string{"S3cretSmtpUser", "S3cretSmtpPass-1"}},
		{name: "SMTP TLS mode bad, password set", command: "mail",
			env: map[string]string{"KERNODECK_SMTP_HOST": "smtp.example", "KERNODECK_SMTP_TLS": "sometimes",
				"KERNODECK_SMTP_PASSWORD": "S3cretSmtpPass-2"}, secrets: []string{"S3cretSmtpPass-2"}, want: "KERNODECK_SMTP_TLS"},
		{name: "ethereum websocket URL", command: "chainwatch",
			env:     map[string]string{"KERNODECK_ETHEREUM_WS_URL": "wss://u:S3cretWsPass-1@eth.example:notaport/ws"},
			secrets: []string{"S3cretWsPass-1"}, want: "KERNODECK_ETHEREUM_WS_URL"},
		{name: "watch-only key: a private key", command: "api",
			env: map[string]string{"KERNODECK_XPUB_BITCOIN": xprv}, secrets: []string{xprv, xprv[4:40]}, want: "KERNODECK_XPUB_BITCOIN"},
		{name: "watch-only key: not a key", command: "worker",
			env:     map[string]string{"KERNODECK_XPUB_ETHEREUM": "xpubS3cretLookingGarbage0123456789"},
			secrets: []string{"S3cretLookingGarbage0123456789"}, want: "KERNODECK_XPUB_ETHEREUM"},
		{name: "Temporal client key, bad PEM", command: "api",
			env: map[string]string{"TEMPORAL_TLS_CLIENT_CERT_DATA": "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----",
				"TEMPORAL_TLS_CLIENT_KEY_DATA": "-----BEGIN PRIVATE KEY-----\nS3cretTemporalKeyBody0123\n-----END PRIVATE KEY-----"},
			secrets: []string{"S3cretTemporalKeyBody0123"}},
		{name: "Temporal API key, past the configuration", command: "api",
			env: map[string]string{"TEMPORAL_API_KEY": "S3cretTemporalApiKey-1"}, secrets: []string{"S3cretTemporalApiKey-1"}},
	}
	for _, n := range []string{"bitcoin", "litecoin", "ethereum", "tron", "solana"} {
		pass := "S3cretRpcPass-" + n
		key := "KERNODECK_" + strings.ToUpper(n) + "_NODE_URL"
		cases = append(cases,
			startCase{name: n + " node URL, bad port", command: "chainwatch",
				env: map[string]string{key: "http://rpc:" + pass + "@127.0.0.1:notaport/"}, secrets: []string{pass}, want: key},
			startCase{name: n + " node URL, API key in the path, bad escape", command: "chainwatch",
				env: map[string]string{key: "https://node.example/v3/" + pass + "%zz"}, secrets: []string{pass}, want: key})
	}
	for _, c := range cases {
		checkStart(t, c)
	}
	// Every secret variable has a case above.
	covered := map[string]bool{}
	for _, c := range cases {
		for k := range c.env {
			covered[k] = true
		}
		for k := range c.creds {
			covered[k] = true
		}
	}
	for _, name := range config.SecretNames() {
		if !covered[name] {
			t.Errorf("no malformed %s tried", name)
		}
	}
}

// A service given another kind's secret does not start: exit 2, naming
// the variable and where it belongs, never its value.
func TestServicesRefuseForeignSecrets(t *testing.T) {
	const value = "Foreign-S3cret-Value-99"
	cases := []startCase{
		{command: "api", env: map[string]string{"KERNODECK_SSH_KEY_FILE": "/etc/kernodeck/" + value}},
		{command: "api", env: map[string]string{"KERNODECK_LITECOIN_NODE_URL": "http://rpc:" + value + "@10.0.0.9:9332"}},
		{command: "api", env: map[string]string{"KERNODECK_SMTP_PASSWORD": value}},
		{command: "api", creds: map[string]string{"KERNODECK_SMTP_PASSWORD": value}},
		{command: "worker", env: map[string]string{"KERNODECK_SMTP_USER": value}},
		{command: "worker", env: map[string]string{"KERNODECK_BITCOIN_NODE_URL": "http://rpc:" + value + "@10.0.0.9:8332"}},
		{command: "chainwatch", env: map[string]string{"KERNODECK_SSH_KEY_FILE": "/etc/kernodeck/" + value}},
		{command: "chainwatch", env: map[string]string{"KERNODECK_SUPPORT_TOKENS": "alice:" + value}},
		{command: "mail", env: map[string]string{"KERNODECK_ETHEREUM_WS_URL": "wss://" + value + "@eth.example/"}},
		{command: "mail", creds: map[string]string{"KERNODECK_SSH_KEY_FILE": "key"}},
		{command: "migrate", env: map[string]string{"KERNODECK_SECRET_KEYS": "k1:" + value}},
	}
	for _, c := range cases {
		var name string
		for k := range c.env {
			name = k
		}
		for k := range c.creds {
			name = k
		}
		c.name, c.want, c.secrets = c.command+" given "+name, name, []string{value}
		code, out := runStart(t, c)
		if code != 2 || !strings.Contains(out, "docs/secrets.md") {
			t.Errorf("%s: exit %d, want 2 and the refusal:\n%s", c.name, code, out)
		}
		checkStart(t, c)
	}
}

// With the SSH driver, the api runs without the hosts' key: no driver, a
// host inventory that refuses a repair (it needs SSH) with where to run
// it; the worker does not start without the key.
func TestSSHDriverWithoutKeyOutsideTheWorker(t *testing.T) {
	p := provisioning{cfg: config.Provisioning{Provisioner: postgres.ProvisionerSSH}}
	local, ssh, err := p.drivers(config.Config{}, nil, nil)
	if local != nil || ssh != nil || err != nil {
		t.Fatalf("api's drivers: %v %v %v, want none", local, ssh, err)
	}
	err = newKeylessHosts(nil).Repair(context.Background(), "gpu-1", "")
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.ECodeConflict || !strings.Contains(de.Message, "kernodeck hosts repair") {
		t.Fatalf("repair from the api: %v", err)
	}
	code, out := runStart(t, startCase{command: "worker", env: map[string]string{"KERNODECK_PROVISIONER": "ssh"}})
	if code != 2 || !strings.Contains(out, "KERNODECK_SSH_KEY_FILE") {
		t.Fatalf("worker with the SSH driver and no key: exit %d\n%s", code, out)
	}
}
