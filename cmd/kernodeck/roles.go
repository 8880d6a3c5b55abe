package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/provision/sshhost"
	"github.com/kernodeck/kernodeck/redact"
)

// checkRole refuses to start a service (api, worker, chainwatch, mail,
// migrate) given a secret of another process kind, in its environment or
// its credentials ($CREDENTIALS_DIRECTORY), or a credential that is not a
// secret Kernodeck reads (docs/secrets.md). Other commands pass.
func checkRole(command string) error {
	if err := config.CheckCredentials(config.Getenv); err != nil {
		return err
	}
	if err := config.CheckRole(command, config.Getenv); err != nil {
		return err
	}
	switch command {
	case config.RoleAPI, config.RoleWorker, config.RoleChainwatch:
		// The payments' settings and watch-only keys, read before anything
		// connects: a bad node URL or key stops the unit at once.
		pcfg, err := config.PaymentsFromEnv(nil)
		if err != nil {
			return err
		}
		for network, xpub := range pcfg.AccountKeys {
			if _, err := hdwallet.ParseAccountKey(hdwallet.Network(pcfg.KeyNetworks[network]), xpub); err != nil {
				return fmt.Errorf("KERNODECK_XPUB_%s: %w", strings.ToUpper(network), err)
			}
		}
	}
	return nil
}

// secretsRedactor masks every secret the environment and the credentials
// hold, whether it parses or not: the database and node URLs' credentials
// (client errors quote the URL, a parse error the whole string), the
// keyring, the agents' tokens, the SMTP login and the Temporal API key.
func secretsRedactor() *redact.Redactor {
	var urls, plain []string
	for _, name := range config.SecretNames() {
		v := config.Getenv(name)
		switch {
		case v == "" || strings.HasSuffix(name, "_FILE"):
			continue
		case strings.HasSuffix(name, "_URL"):
			urls = append(urls, v)
			plain = append(plain, v)
			plain = append(plain, userinfo(v)...)
		case name == "KERNODECK_SECRET_KEYS":
			plain = append(plain, v)
			for _, entry := range strings.Split(v, ",") {
				_, key, _ := strings.Cut(entry, ":")
				plain = append(plain, strings.TrimSpace(key))
			}
		case name == "KERNODECK_SUPPORT_TOKENS":
			plain = append(plain, v)
			for _, pair := range strings.Split(v, ",") {
				_, token, _ := strings.Cut(pair, ":")
				plain = append(plain, strings.TrimSpace(token))
			}
		default:
			plain = append(plain, v)
		}
	}
	plain = append(plain, config.Getenv("TEMPORAL_API_KEY"), config.Getenv("TEMPORAL_TLS_CLIENT_KEY_DATA"))
	return redact.New(urls, plain...)
}

// userinfo is the user and password of a URL that may not parse: what
// lies between its "://" and its last "@"; for lib/pq's "key=value" form,
// its password.
func userinfo(raw string) []string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		var out []string
		for _, f := range strings.Fields(raw) {
			if v, ok := strings.CutPrefix(f, "password="); ok {
				out = append(out, strings.Trim(v, "'"))
			}
		}
		return out
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return nil
	}
	user, pass, _ := strings.Cut(rest[:at], ":")
	return []string{user, pass}
}

// runMail runs the mail dispatcher alone (`kernodeck mail`): the only
// process kind given the SMTP credentials (docs/secrets.md). It needs the
// database and the keyring (the mails' confirmation links), not Temporal.
func runMail(ctx context.Context, cfg config.Config, prov provisioning, logger *slog.Logger) error {
	if prov.cfg.SMTPHost == "" {
		return errors.New("kernodeck mail needs KERNODECK_SMTP_HOST (and KERNODECK_SMTP_USER, KERNODECK_SMTP_PASSWORD for a login)")
	}
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	a := app.New(app.Config{DB: db, Keyring: prov.keyring, Logger: logger, ProvisionerName: prov.cfg.Provisioner})
	d, err := prov.dispatcher(a, logger)
	if err != nil {
		return err
	}
	logger.Info("mail dispatcher started", "smtp", prov.cfg.SMTPHost)
	return d.Run(ctx)
}

// keylessHosts is the host inventory of a process without the hosts' SSH
// key (the api): listing and retiring are database work; a repair runs its
// checks on the host over SSH, so it is refused with where to run it.
type keylessHosts struct{ inv *sshhost.Inventory }

var _ api.HostOperator = keylessHosts{}

func newKeylessHosts(db *postgres.DB) keylessHosts {
	return keylessHosts{inv: &sshhost.Inventory{Store: postgres.Hosts{DB: db}}}
}

func (h keylessHosts) List(ctx context.Context) ([]sshhost.Host, error) { return h.inv.List(ctx) }

func (h keylessHosts) Retire(ctx context.Context, name, note string) error {
	return h.inv.Retire(ctx, name, note)
}

// ErrRepairNeedsKey is keylessHosts' refusal of a repair.
var ErrRepairNeedsKey = domain.Errorf(domain.ECodeConflict,
	"La réparation vérifie l'hôte en SSH, et l'API n'a pas la clé des hôtes : lancez `kernodeck hosts repair` avec la clé du worker (docs/secrets.md).")

func (h keylessHosts) Repair(ctx context.Context, name, note string) error {
	return ErrRepairNeedsKey
}
