package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/recovery"
	"github.com/kernodeck/kernodeck/wfclient"
	"github.com/kernodeck/kernodeck/workers"
)

const recoverUsage = `kernodeck recover [--index-gap N]

Starts again, from PostgreSQL, the workflow of every live order and top-up
that Temporal does not have (its database was lost), each at its phase:
awaiting payment with its payment requests, paid or provisioning resumes
provisioning, active keeps its end date and reminders; ended does nothing.
A workflow that exists is left alone: running it twice starts nothing twice.
Every payment to a recovered target is delivered again by the chain
watchers' reconciler (counted once). First, each network's next address
index moves past every address handed out, then N further (after a
point-in-time restore: the addresses handed out after the restore point are
not in the restored database; see docs/recovery.md).
`

// runRecover rebuilds the lost workflows (recovery.Recoverer).
func runRecover(ctx context.Context, cfg config.Config, prov provisioning, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	gap := fs.Int64("index-gap", 0, "move each network's next address index this far past the highest one handed out")
	fs.Usage = func() { fmt.Fprint(stderr, recoverUsage) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if prov.conn, err = temporalConnection(&cfg); err != nil {
		return err
	}
	if err := checkTemporalTransport(false, cfg.TemporalAllowPlaintext, prov.conn); err != nil {
		return err
	}
	tc, err := client.DialContext(ctx, prov.clientOptions(nil, logger))
	if err != nil {
		return fmt.Errorf("temporal: %w", err)
	}
	defer tc.Close()
	// A new Temporal database has none of the search attributes the
	// workflows set.
	if err := workers.RegisterSearchAttributes(ctx, tc, cfg.TemporalNamespace, logger); err != nil {
		return err
	}
	r := &recovery.Recoverer{
		Store:        db,
		Workflows:    &wfclient.Client{Temporal: tc, MaxVersion: cfg.WorkflowVersion},
		Rental:       cfg.RentalConfig(),
		TopUpTimeout: cfg.TopUpTimeout,
		IndexGap:     *gap,
		Logger:       logger,
	}
	rep, err := r.Run(ctx)
	for _, a := range rep.Indexes {
		fmt.Fprintf(stdout, "address index %s: %d -> %d\n", a.Network, a.From, a.To)
	}
	for _, ref := range slices.Sorted(maps.Keys(rep.Started)) {
		fmt.Fprintf(stdout, "started %s at %s\n", ref, rep.Started[ref])
	}
	fmt.Fprintf(stdout, "recovered %d workflows; %d exist already (left alone); %d with nothing to run; %d payments to deliver again\n",
		len(rep.Started), len(rep.Existing), len(rep.Skipped), rep.Resent)
	return err
}

const xpubUsage = `kernodeck xpub status
kernodeck xpub confirm NETWORK [--by NAME]

status lists each configured KERNODECK_XPUB_<NETWORK> key's fingerprint and
whether it is the key recorded for its network. A process that derives
addresses refuses to start with a key other than the one recorded; confirm
records the configured key of NETWORK as its key, after you checked its
fingerprint in the wallet that holds its private key (docs/recovery.md).
`

// runXPubCommand runs `kernodeck xpub` (configuration read here: it needs
// the database and the keys only).
func runXPubCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := config.FromEnv(nil)
	if err == nil {
		err = runXPub(ctx, cfg, args, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "xpub:", err)
		return 1
	}
	return 0
}

// runXPub shows or confirms the networks' watch-only keys.
func runXPub(ctx context.Context, cfg config.Config, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "status" && args[0] != "confirm") {
		fmt.Fprint(stderr, xpubUsage)
		return errors.New("usage: kernodeck xpub status | confirm NETWORK")
	}
	pcfg, err := config.PaymentsFromEnv(nil)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	accounts := map[string]*hdwallet.Account{}
	for network, xpub := range pcfg.AccountKeys {
		acc, err := hdwallet.ParseAccountKey(hdwallet.Network(pcfg.KeyNetworks[network]), xpub)
		if err != nil {
			return fmt.Errorf("watch-only key for %s: %w", network, err)
		}
		accounts[network] = acc
	}
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if args[0] == "status" {
		for _, network := range slices.Sorted(maps.Keys(accounts)) {
			err := recovery.CheckAccountKeys(ctx, db, map[string]*hdwallet.Account{network: accounts[network]})
			state := "recorded"
			if errors.Is(err, recovery.ErrAccountKeyChanged) {
				state = "CHANGED: not confirmed (kernodeck xpub confirm " + network + ")"
			} else if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%-9s fingerprint %s  %s\n", network, accounts[network].Fingerprint(), state)
		}
		return nil
	}
	fs := flag.NewFlagSet("xpub confirm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	by := fs.String("by", "", "who confirms (default: $USER)")
	if len(args) < 2 {
		fmt.Fprint(stderr, xpubUsage)
		return errors.New("usage: kernodeck xpub confirm NETWORK")
	}
	network := strings.ToLower(args[1])
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	acc, ok := accounts[network]
	if !ok {
		return fmt.Errorf("no KERNODECK_XPUB_%s is configured", strings.ToUpper(network))
	}
	who := *by
	if who == "" {
		who = envOr("USER", "operator")
	}
	old, err := recovery.ConfirmAccountKey(ctx, db, network, acc, who)
	if err != nil {
		return err
	}
	if old == "" {
		fmt.Fprintf(stdout, "%s: key %s recorded (no other key was)\n", network, acc.Fingerprint())
	} else {
		fmt.Fprintf(stdout, "%s: key %s confirmed, replacing %s\n", network, acc.Fingerprint(), old)
	}
	return nil
}
