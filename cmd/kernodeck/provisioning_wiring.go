package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"go.temporal.io/sdk/client"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sync/errgroup"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/codec"
	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/metrics"
	"github.com/kernodeck/kernodeck/notify"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/provision/localpg"
	"github.com/kernodeck/kernodeck/provision/sshhost"
	"github.com/kernodeck/kernodeck/secrets"
)

// provisioning is the keyring and the driver, codec and mail settings, and
// the Temporal connection (see temporalConnection).
type provisioning struct {
	cfg     config.Provisioning
	keyring *secrets.Keyring
	conn    client.Options
	// signer is the hosts' admin key, read at the worker's start.
	signer ssh.Signer
}

// loadProvisioning reads the provisioning configuration and the keyring
// for command. `dev` keeps a generated key in its data directory when none
// is set. The worker reads the SSH driver's admin key at once, so a bad
// one stops it before it connects anywhere; the api and chainwatch run
// the SSH driver's rules without its key (docs/secrets.md).
func loadProvisioning(cfg config.Config, command string, logger *slog.Logger) (provisioning, error) {
	pc, err := config.ProvisioningFromEnv(nil)
	if err != nil {
		return provisioning{}, err
	}
	if command == config.RoleWorker {
		if err := pc.CheckSSHKey(); err != nil {
			return provisioning{}, err
		}
	}
	if command != "dev" {
		k, err := pc.Keyring()
		if err != nil {
			return provisioning{}, err
		}
		p := provisioning{cfg: pc, keyring: k}
		if command == config.RoleWorker && pc.Provisioner == postgres.ProvisionerSSH {
			p.signer, err = readSigner(pc.SSHKeyFile)
		}
		return p, err
	}
	k, generated, err := pc.DevKeyring(cfg.DevDataDir)
	if err != nil {
		return provisioning{}, err
	}
	if generated {
		logger.Warn("no KERNODECK_SECRET_KEYS: generated a development key", "file", cfg.DevDataDir+"/secret-keys")
	}
	return provisioning{cfg: pc, keyring: k}, nil
}

// clientOptions are the Temporal client options: the connection (address,
// namespace, TLS, API key) as app.ClientOptions completes it.
func (p provisioning) clientOptions(m *metrics.Metrics, logger *slog.Logger) client.Options {
	return app.ClientOptions(p.conn, p.keyring, m, logger, codec.UnboundUntil(p.cfg.CodecUnboundUntil))
}

// drivers is the configured machine driver: the local one, or SSH's.
// Without the SSH driver's key (the api, chainwatch) there is no driver:
// the api's host inventory then lists and retires hosts but refuses a
// repair (keylessHosts).
func (p provisioning) drivers(cfg config.Config, db *postgres.DB, logger *slog.Logger) (local activities.Provisioner, ssh *sshhost.Driver, err error) {
	if p.cfg.Provisioner != postgres.ProvisionerSSH {
		return &localpg.Provisioner{Store: postgres.LocalGPUs{DB: db}, Host: cfg.AccessHost, Port: cfg.AccessPort, Keyring: p.keyring}, nil, nil
	}
	if p.signer == nil && p.cfg.SSHKeyFile == "" {
		return nil, nil, nil
	}
	ssh, err = p.sshDriver(db, logger)
	return nil, ssh, err
}

// readSigner reads the hosts' admin key. Its errors name the file, never
// its content.
func readSigner(file string) (ssh.Signer, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("KERNODECK_SSH_KEY_FILE: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("KERNODECK_SSH_KEY_FILE %s: %w", file, err)
	}
	return signer, nil
}

// sshDriver is the SSH machine driver as configured.
func (p provisioning) sshDriver(db *postgres.DB, logger *slog.Logger) (*sshhost.Driver, error) {
	signer := p.signer
	if signer == nil {
		var err error
		if signer, err = readSigner(p.cfg.SSHKeyFile); err != nil {
			return nil, err
		}
	}
	return &sshhost.Driver{
		Store: postgres.Hosts{DB: db}, Keyring: p.keyring, Signer: signer, AdminUser: p.cfg.SSHUser,
		UserPrefix: p.cfg.SSHUserPrefix, ScratchDir: p.cfg.ScratchDir, JupyterPort: p.cfg.JupyterPort,
		ConnectTimeout: p.cfg.SSHTimeout, Logger: logger.With("component", "sshhost"),
	}, nil
}

// dispatcher builds the mail dispatcher; nil when no SMTP server is
// configured (mails then stay queued in the outbox until one is).
func (p provisioning) dispatcher(a *app.App, logger *slog.Logger) (*notify.Dispatcher, error) {
	if p.cfg.SMTPHost == "" {
		logger.Warn("no KERNODECK_SMTP_HOST: customer mails stay queued in mail_outbox")
		return nil, nil
	}
	return a.Dispatcher(app.Mail{PublicURL: p.cfg.PublicURL, From: p.cfg.MailFrom, Poll: p.cfg.MailPoll, MaxAttempts: p.cfg.MailMaxAttempt,
		SMTP: notify.SMTPConfig{Host: p.cfg.SMTPHost, Port: p.cfg.SMTPPort, Username: p.cfg.SMTPUser, Password: p.cfg.SMTPPassword, TLS: p.cfg.SMTPTLS}})
}

// withMail runs fn and, when there is one, the mail dispatcher beside it.
func withMail(ctx context.Context, d *notify.Dispatcher, fn func(context.Context) error) error {
	if d == nil {
		return fn(ctx)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return fn(gctx) })
	g.Go(func() error { return d.Run(gctx) })
	return g.Wait()
}

// codecRoute is the codec endpoint for operators, /codec/ on the operations
// listener and never on the public one (it opens any payload for an agent
// token, and takes token guesses): support agent tokens, counted against
// guessing with the API's, and the API's body limit.
func (p provisioning) codecRoute(cfg config.Config, db *postgres.DB) metrics.Route {
	return metrics.Route{Pattern: "/codec/", Handler: codec.Handler(p.keyring, "/codec", codec.HandlerOptions{
		AgentTokens: cfg.SupportTokens, AllowedOrigins: p.cfg.CodecOrigins,
		CookieSecure: cfg.CookieSecure, Throttle: db, MaxBodyBytes: api.DefaultMaxBodyBytes, Audit: db,
	})}
}
