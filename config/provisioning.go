package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kernodeck/kernodeck/secrets"
)

// Provisioning is the configuration of the machine drivers, the secrets
// keyring, the codec endpoint and the customer emails.
type Provisioning struct {
	Provisioner string // KERNODECK_PROVISIONER: "localpg" or "ssh"
	SecretKeys  string // KERNODECK_SECRET_KEYS: "id:base64key,..." (first seals)
	// SSH driver.
	SSHKeyFile    string        // KERNODECK_SSH_KEY_FILE: admin private key
	SSHUser       string        // KERNODECK_SSH_USER
	SSHUserPrefix string        // KERNODECK_SSH_USER_PREFIX
	ScratchDir    string        // KERNODECK_SCRATCH_DIR
	JupyterPort   int           // KERNODECK_JUPYTER_PORT
	SSHTimeout    time.Duration // KERNODECK_SSH_TIMEOUT
	CodecOrigins  []string      // KERNODECK_CODEC_ORIGINS
	// CodecUnboundUntil (KERNODECK_CODEC_UNBOUND_UNTIL, RFC 3339 or a
	// date): until then payloads sealed for no workflow still open in a
	// workflow (codec.Codec.UnboundUntil); unset: never.
	CodecUnboundUntil time.Time
	PublicURL         string        // KERNODECK_PUBLIC_URL: links in mails
	SMTPHost          string        // KERNODECK_SMTP_HOST ("": mails stay queued)
	SMTPPort          int           // KERNODECK_SMTP_PORT
	SMTPUser          string        // KERNODECK_SMTP_USER
	SMTPPassword      string        // KERNODECK_SMTP_PASSWORD
	SMTPTLS           string        // KERNODECK_SMTP_TLS
	MailFrom          string        // KERNODECK_MAIL_FROM
	MailPoll          time.Duration // KERNODECK_MAIL_POLL
	MailMaxAttempt    int           // KERNODECK_MAIL_MAX_ATTEMPTS
}

// ProvisioningFromEnv reads the provisioning and mail configuration.
func ProvisioningFromEnv(getenv func(string) string) (Provisioning, error) {
	if getenv == nil {
		getenv = Getenv
	}
	p := parser{getenv: getenv}
	c := Provisioning{
		Provisioner:    p.str("KERNODECK_PROVISIONER", "localpg"),
		SecretKeys:     p.str("KERNODECK_SECRET_KEYS", ""),
		SSHKeyFile:     p.str("KERNODECK_SSH_KEY_FILE", ""),
		SSHUser:        p.str("KERNODECK_SSH_USER", "root"),
		SSHUserPrefix:  p.str("KERNODECK_SSH_USER_PREFIX", "kd-"),
		ScratchDir:     p.str("KERNODECK_SCRATCH_DIR", "/var/lib/kernodeck/scratch"),
		JupyterPort:    p.int("KERNODECK_JUPYTER_PORT", 8888),
		SSHTimeout:     p.dur("KERNODECK_SSH_TIMEOUT", 15*time.Second),
		CodecOrigins:   p.list("KERNODECK_CODEC_ORIGINS"),
		PublicURL:      p.str("KERNODECK_PUBLIC_URL", "http://127.0.0.1:8080"),
		SMTPHost:       p.str("KERNODECK_SMTP_HOST", ""),
		SMTPPort:       p.int("KERNODECK_SMTP_PORT", 587),
		SMTPUser:       p.str("KERNODECK_SMTP_USER", ""),
		SMTPPassword:   p.str("KERNODECK_SMTP_PASSWORD", ""),
		SMTPTLS:        p.str("KERNODECK_SMTP_TLS", "mandatory"),
		MailFrom:       p.str("KERNODECK_MAIL_FROM", "Kernodeck <noreply@kernodeck.local>"),
		MailPoll:       p.dur("KERNODECK_MAIL_POLL", 5*time.Second),
		MailMaxAttempt: p.int("KERNODECK_MAIL_MAX_ATTEMPTS", 12),
	}
	if v := getenv("KERNODECK_CODEC_UNBOUND_UNTIL"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			t, err = time.Parse(time.DateOnly, v)
		}
		if err != nil {
			return Provisioning{}, fmt.Errorf("KERNODECK_CODEC_UNBOUND_UNTIL %q: want a date (2027-01-31) or an RFC 3339 time", v)
		}
		c.CodecUnboundUntil = t
	}
	if getenv("KERNODECK_CODEC_ORIGINS") == "" {
		c.CodecOrigins = []string{"http://127.0.0.1:8233", "http://localhost:8233"}
	}
	if p.err != nil {
		return Provisioning{}, p.err
	}
	switch c.Provisioner {
	case "localpg", "ssh":
	default:
		return Provisioning{}, fmt.Errorf("KERNODECK_PROVISIONER %q: want localpg or ssh", c.Provisioner)
	}
	switch c.SMTPTLS {
	case "mandatory", "opportunistic", "none", "tls":
	default:
		return Provisioning{}, fmt.Errorf("KERNODECK_SMTP_TLS %q: want mandatory, opportunistic, none or tls", c.SMTPTLS)
	}
	return c, nil
}

// CheckSSHKey refuses the SSH driver without its admin key, in the
// processes that log in to the hosts (the worker): the api and chainwatch
// run with KERNODECK_PROVISIONER=ssh and no key (docs/secrets.md).
func (c Provisioning) CheckSSHKey() error {
	if c.Provisioner == "ssh" && c.SSHKeyFile == "" {
		return fmt.Errorf("KERNODECK_PROVISIONER=ssh needs KERNODECK_SSH_KEY_FILE (the admin private key) in the worker")
	}
	return nil
}

// Keyring parses KERNODECK_SECRET_KEYS. Without it there is no way to seal
// or open access secrets and Temporal payloads, so the service refuses to
// start (dev makes one, see DevKeyring).
func (c Provisioning) Keyring() (*secrets.Keyring, error) {
	if strings.TrimSpace(c.SecretKeys) == "" {
		return nil, fmt.Errorf("KERNODECK_SECRET_KEYS is not set (generate one: kernodeck keygen)")
	}
	k, err := secrets.Parse(c.SecretKeys)
	if err != nil {
		return nil, fmt.Errorf("KERNODECK_SECRET_KEYS: %w", err)
	}
	return k, nil
}

// DevKeyring returns the configured keyring or, for `dev` only, a key kept
// in dir/secret-keys (made on first use) so local data stays readable
// across restarts. generated reports a new file.
func (c Provisioning) DevKeyring(dir string) (k *secrets.Keyring, generated bool, err error) {
	if strings.TrimSpace(c.SecretKeys) != "" {
		k, err := c.Keyring()
		return k, false, err
	}
	path := filepath.Join(dir, "secret-keys")
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, false, err
		}
		raw = []byte(secrets.Generate("dev1"))
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			return nil, false, err
		}
		generated = true
	} else if err != nil {
		return nil, false, err
	}
	k, err = secrets.Parse(strings.TrimSpace(string(raw)))
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	return k, generated, nil
}
