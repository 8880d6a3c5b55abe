// Package sshhost is the provisioning driver for real GPU hosts, driven over
// SSH (golang.org/x/crypto/ssh) from an inventory in PostgreSQL (gpu_hosts).
//
// An order takes one whole host whose GPU model and count are the order's.
// Every step is an activity that may be retried after a crash at any line:
// database writes are keyed on the order, secrets are generated once and
// stored sealed, and the remote scripts (scripts/*.sh, embedded) are
// idempotent and serialised per account with flock on the host.
//
// Host keys are always checked against the fingerprint in the inventory. A
// host that shows another key, or other GPUs than it should, is marked
// broken and its reservation dropped, and the step fails without retry: the
// workflow's next provisioning attempt reserves another host.
package sshhost

import (
	_ "embed"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/secrets"
)

var (
	//go:embed scripts/common.sh
	commonScript string
	//go:embed scripts/prepare.sh
	prepareScript string
	//go:embed scripts/teardown.sh
	teardownScript string
	//go:embed scripts/setkey.sh
	setkeyScript string
)

// Defaults for the zero fields of Driver.
const (
	DefaultUserPrefix     = "kd-"
	DefaultScratchDir     = "/var/lib/kernodeck/scratch"
	DefaultJupyterPort    = 8888
	DefaultConnectTimeout = 15 * time.Second
)

// ErrTypeHostRefused is the error code of a step refused because the host
// is not trustworthy (host key mismatch): like a verification mismatch, the
// host is set aside and the next attempt takes another one.
const ErrTypeHostRefused = "host_refused"

// Driver implements activities.Provisioner on SSH hosts.
type Driver struct {
	// Store is the inventory and each rental's records (postgres.Hosts).
	Store   Store
	Keyring *secrets.Keyring
	// Signer is the admin key the driver logs in to hosts with.
	Signer ssh.Signer
	// AdminUser is the login on hosts ("root"; another user needs
	// passwordless sudo).
	AdminUser string
	// UserPrefix starts every customer account's name ("kd-").
	UserPrefix string
	// ScratchDir holds one scratch directory per customer, wiped at the end.
	ScratchDir     string
	JupyterPort    int
	ConnectTimeout time.Duration
	Logger         *slog.Logger
	// OnStep, if set, is told each step a remote script reaches (tests use
	// it to kill a worker mid-script).
	OnStep func(orderRef, step string)
}

var _ activities.Provisioner = (*Driver)(nil)

func (d *Driver) adminUser() string {
	if d.AdminUser == "" {
		return "root"
	}
	return d.AdminUser
}

func (d *Driver) connectTimeout() time.Duration {
	if d.ConnectTimeout <= 0 {
		return DefaultConnectTimeout
	}
	return d.ConnectTimeout
}

func (d *Driver) scratchDir() string {
	if d.ScratchDir == "" {
		return DefaultScratchDir
	}
	return d.ScratchDir
}

func (d *Driver) jupyterPort() int {
	if d.JupyterPort <= 0 {
		return DefaultJupyterPort
	}
	return d.JupyterPort
}

func (d *Driver) logger() *slog.Logger {
	if d.Logger == nil {
		return slog.Default()
	}
	return d.Logger
}

var unixUserRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// UnixUser is the account name of an order on its host: derived from the
// reference, so every retry and every teardown names the same account.
func (d *Driver) UnixUser(orderRef string) (string, error) {
	prefix := d.UserPrefix
	if prefix == "" {
		prefix = DefaultUserPrefix
	}
	_, suffix, _ := strings.Cut(orderRef, "-")
	u := prefix + strings.ToLower(suffix)
	if !unixUserRE.MatchString(u) {
		return "", fmt.Errorf("order %s gives no valid account name (%q)", orderRef, u)
	}
	return u, nil
}
