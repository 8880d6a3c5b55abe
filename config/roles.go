package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// The process kinds that run as services, each under its own system user
// with its own credentials (deploy/systemd, docs/secrets.md).
const (
	RoleAPI        = "api"
	RoleWorker     = "worker"
	RoleChainwatch = "chainwatch"
	RoleMail       = "mail"
	RoleMigrate    = "migrate"
)

// Roles are the process kinds CheckRole knows; other commands (dev, the
// operators' commands) hold whatever they are given.
var Roles = []string{RoleAPI, RoleWorker, RoleChainwatch, RoleMail, RoleMigrate}

// Secret is a variable whose value is (or, for a _FILE variable, names) a
// credential, with the process kinds that may hold it.
type Secret struct {
	Name    string
	What    string   // what it opens, for the refusal
	Holders []string // the roles that may hold it
}

// Secrets are every secret variable a service reads. Only chainwatch
// talks to the nodes, only the worker logs in to the GPU hosts, only the
// mail dispatcher to the SMTP server; the internet-facing api holds none
// of those.
var Secrets = func() []Secret {
	all := []string{RoleAPI, RoleWorker, RoleChainwatch, RoleMail, RoleMigrate}
	out := []Secret{
		{"KERNODECK_DATABASE_URL", "the database password", all},
		{"KERNODECK_SECRET_KEYS", "the keyring (access secrets, Temporal payloads, mail links)",
			[]string{RoleAPI, RoleWorker, RoleChainwatch, RoleMail}},
		// The worker names the agents in its metrics (kernodeck_support_agent_moved_cents).
		{"KERNODECK_SUPPORT_TOKENS", "the support agents' tokens", []string{RoleAPI, RoleWorker}},
		{"KERNODECK_SSH_KEY_FILE", "the GPU hosts' root SSH key", []string{RoleWorker}},
		{"KERNODECK_SMTP_USER", "the SMTP login", []string{RoleMail}},
		{"KERNODECK_SMTP_PASSWORD", "the SMTP password", []string{RoleMail}},
		{"KERNODECK_ETHEREUM_WS_URL", "a node endpoint (its credentials)", []string{RoleChainwatch}},
	}
	for _, n := range watchedNetworks {
		out = append(out, Secret{"KERNODECK_" + strings.ToUpper(n) + "_NODE_URL", "a node endpoint (its credentials)",
			[]string{RoleChainwatch}})
	}
	return out
}()

// SecretNames are the names of Secrets.
func SecretNames() []string {
	var out []string
	for _, s := range Secrets {
		out = append(out, s.Name)
	}
	return out
}

// Holds tells whether role may be given the variable name: any variable
// that is not a secret, or a secret of its own.
func Holds(role, name string) bool {
	for _, s := range Secrets {
		if s.Name == name {
			return slices.Contains(s.Holders, role)
		}
	}
	return true
}

// ErrForeignSecret is CheckRole's refusal.
var ErrForeignSecret = errors.New("holds a secret of another process kind")

// CheckRole refuses to let a process of kind role start with a secret it
// must not hold, in its environment or its credentials (getenv as
// Getenv reads them): a unit given the wrong credentials fails at once,
// naming the variables (never their values). A role CheckRole does not
// know (dev, the operators' commands) passes.
func CheckRole(role string, getenv func(string) string) error {
	if !slices.Contains(Roles, role) {
		return nil
	}
	var held []string
	for _, s := range Secrets {
		if getenv(s.Name) != "" && !slices.Contains(s.Holders, role) {
			held = append(held, fmt.Sprintf("%s (%s: only %s)", s.Name, s.What, strings.Join(s.Holders, ", ")))
		}
	}
	if len(held) == 0 {
		return nil
	}
	return fmt.Errorf("kernodeck %s %w: %s; remove them from its environment and credentials (docs/secrets.md)",
		role, ErrForeignSecret, strings.Join(held, "; "))
}

// CredentialsDirectoryEnv is the variable systemd sets to the directory of
// a unit's credentials (LoadCredential=, LoadCredentialEncrypted=).
const CredentialsDirectoryEnv = "CREDENTIALS_DIRECTORY"

// variableName is what a credential may be named after.
var variableName = regexp.MustCompile(`^(KERNODECK|TEMPORAL)_[A-Z0-9_]+$`)

// Getenv is os.Getenv with the unit's credentials behind it (see
// WithCredentials); the configuration readers use it when given no getenv.
func Getenv(key string) string { return WithCredentials(os.Getenv)(key) }

// WithCredentials returns getenv with, for a KERNODECK_ variable it leaves
// empty, the credential of the same name in $CREDENTIALS_DIRECTORY (as
// getenv reads that): a file holding the value (its trailing newline
// dropped) or, for a variable naming a file (…_FILE), the credential file
// itself, whose path is the value. A secret then needs no environment file
// and no command line: `LoadCredential=KERNODECK_SMTP_PASSWORD:/etc/...`.
// The environment wins over a credential.
func WithCredentials(getenv func(string) string) func(string) string {
	return func(key string) string {
		if v := getenv(key); v != "" {
			return v
		}
		dir := getenv(CredentialsDirectoryEnv)
		if dir == "" || !variableName.MatchString(key) || !strings.HasPrefix(key, "KERNODECK_") {
			return ""
		}
		path := filepath.Join(dir, key)
		if strings.HasSuffix(key, "_FILE") {
			if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
				return path
			}
			return ""
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return "" // CheckCredentials reports an unreadable one
		}
		return strings.TrimRight(string(raw), "\r\n")
	}
}

// CheckCredentials checks the credentials directory getenv names, if any:
// every KERNODECK_ credential in it must be one of Secrets (a misspelt
// name would be ignored silently; settings that are not secret belong in
// the environment file) and be readable. Credentials named otherwise (a
// Temporal client key a unit points TEMPORAL_TLS_CLIENT_KEY_PATH at with
// %d) are left alone.
func CheckCredentials(getenv func(string) string) error {
	dir := getenv(CredentialsDirectoryEnv)
	if dir == "" {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", CredentialsDirectoryEnv, err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "KERNODECK_") {
			continue
		}
		if !slices.Contains(SecretNames(), name) {
			return fmt.Errorf("credential %s: not a secret variable (docs/secrets.md lists them; other settings go in the environment file)", name)
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("credential %s: %w", name, err)
		}
		_ = f.Close()
	}
	return nil
}
