package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/postgres"
)

const accessUsage = `kernodeck access: give a customer their access back (support, SSH driver).

Usage:
  kernodeck access replace-key ORDER 'ssh-ed25519 AAAA...'
      the customer's new public key becomes the only one on the running
      rental's host; the old key is refused from now on
  kernodeck access reissue-key ORDER
      a new key pair is generated, its public key becomes the only one on
      the host and its private key is shown again, once, on the order

It uses the worker's configuration (KERNODECK_DATABASE_URL,
KERNODECK_SECRET_KEYS, KERNODECK_SSH_KEY_FILE, ...).
`

// runAccess changes the SSH key of a running rental.
func runAccess(ctx context.Context, cfg config.Config, prov provisioning, args []string, stdout io.Writer, logger *slog.Logger) error {
	if len(args) < 2 || (args[0] == "replace-key" && len(args) != 3) {
		fmt.Fprint(stdout, accessUsage)
		return errors.New("usage: kernodeck access replace-key ORDER KEY | reissue-key ORDER")
	}
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if prov.cfg.Provisioner != postgres.ProvisionerSSH {
		return errors.New("access keys are managed by the SSH driver only (KERNODECK_PROVISIONER=ssh)")
	}
	d, err := prov.sshDriver(db, logger)
	if err != nil {
		return err
	}
	switch args[0] {
	case "replace-key":
		err = d.ReplaceKey(ctx, args[1], args[2])
	case "reissue-key":
		err = d.ReissueKey(ctx, args[1])
	default:
		fmt.Fprint(stdout, accessUsage)
		return fmt.Errorf("unknown access action %q", args[0])
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %s done\n", args[1], args[0])
	return nil
}
