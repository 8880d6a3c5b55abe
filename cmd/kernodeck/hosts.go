package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/provision/sshhost"
	"github.com/kernodeck/kernodeck/secrets"
)

const hostsUsage = `kernodeck hosts: the GPU host inventory of the SSH driver (operators).

It works on PostgreSQL directly (KERNODECK_DATABASE_URL); repair also logs in
to the host as the worker does (KERNODECK_SSH_KEY_FILE, KERNODECK_SSH_USER,
KERNODECK_SSH_USER_PREFIX, KERNODECK_SCRATCH_DIR, KERNODECK_SSH_TIMEOUT).

Usage:
  kernodeck hosts list [--json]
  kernodeck hosts add NAME --address A [--port 22] --host-key SHA256:... [--host-key-type ssh-ed25519]
                       --gpu-model MODEL --gpus N [--note TEXT]
  kernodeck hosts drain NAME [--note TEXT]    no new order gets it; a running rental keeps it
  kernodeck hosts retire NAME [--note TEXT]   the same as drain (the support console's word)
  kernodeck hosts repair NAME [--note TEXT]   back in rotation (drained or broken, and free), once
                                              the release check, run again on the host over SSH,
                                              finds nothing of a past customer (refused otherwise)
  kernodeck hosts remove NAME                 delete a host no order holds

The host key fingerprint comes from the host itself, e.g.
  ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub
An order takes one whole host whose GPU model and count are exactly the
order's; GPU models are the catalog's (rtx-a5000, h100-80g, b200, ...).
`

// runHosts is the operator's inventory tool. It returns the exit code.
func runHosts(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, hostsUsage)
		return 0
	}
	action := args[0]
	var name string
	rest := args[1:]
	if action != "list" {
		if len(rest) == 0 {
			fmt.Fprint(stderr, hostsUsage)
			return 2
		}
		name, rest = rest[0], rest[1:]
	}
	fs := flag.NewFlagSet("hosts "+action, flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "list as JSON")
	address := fs.String("address", "", "address the driver and customers connect to")
	port := fs.Int("port", 22, "SSH port")
	hostKey := fs.String("host-key", "", "host key fingerprint, SHA256:...")
	keyType := fs.String("host-key-type", "ssh-ed25519", "type of that host key")
	model := fs.String("gpu-model", "", "catalog GPU model")
	gpus := fs.Int("gpus", 0, "GPUs on the host")
	note := fs.String("note", "", "operator note")
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	cfg, err := config.FromEnv(nil)
	if err != nil {
		fmt.Fprintln(stderr, "config:", err)
		return 2
	}
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		fmt.Fprintln(stderr, "hosts:", err)
		return 1
	}
	defer db.Close()
	inv := &sshhost.Inventory{Store: postgres.Hosts{DB: db}}
	switch action {
	case "list":
		hosts, err := inv.List(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "hosts:", err)
			return 1
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(hosts)
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tADDRESS\tGPUS\tSTATE\tORDER\tNOTE")
		for _, h := range hosts {
			order := "-"
			if h.OrderRef != nil {
				order = *h.OrderRef
			}
			fmt.Fprintf(tw, "%s\t%s:%d\t%d x %s\t%s\t%s\t%s\n", h.Name, h.Address, h.Port, h.GPUCount, h.GPUModel, h.State, order, h.Note)
		}
		_ = tw.Flush()
		return 0
	case "add":
		if *address == "" || *hostKey == "" || *model == "" || *gpus < 1 {
			fmt.Fprintln(stderr, "hosts add: --address, --host-key, --gpu-model and --gpus are required")
			return 2
		}
		h, err := inv.Add(ctx, sshhost.Host{Name: name, Address: *address, Port: *port, Fingerprint: *hostKey,
			KeyType: *keyType, GPUModel: *model, GPUCount: *gpus, Note: *note})
		if err != nil {
			fmt.Fprintln(stderr, "hosts:", err)
			return 1
		}
		fmt.Fprintf(stdout, "added %s (%d x %s at %s:%d), %s\n", h.Name, h.GPUCount, h.GPUModel, h.Address, h.Port, h.State)
		return 0
	case "drain", "retire":
		err = (&sshhost.Operations{Inventory: inv}).Retire(ctx, name, *note)
	case "repair":
		var d *sshhost.Driver
		if d, err = hostsDriver(db); err != nil {
			fmt.Fprintln(stderr, "hosts repair:", err)
			return 2
		}
		err = sshhost.NewOperations(inv.Store, d).Repair(ctx, name, *note)
	case "remove":
		err = inv.Remove(ctx, name)
	default:
		fmt.Fprintf(stderr, "hosts: unknown action %q\n\n%s", action, hostsUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "hosts:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s done\n", name, action)
	return 0
}

// hostsDriver is the SSH driver as the worker configures it, for the checks
// `hosts repair` runs on the host.
func hostsDriver(db *postgres.DB) (*sshhost.Driver, error) {
	pc, err := config.ProvisioningFromEnv(nil)
	if err != nil {
		return nil, err
	}
	if pc.SSHKeyFile == "" {
		return nil, errors.New("it checks the host over SSH first: set KERNODECK_SSH_KEY_FILE (the worker's admin key)")
	}
	raw, err := os.ReadFile(pc.SSHKeyFile)
	if err != nil {
		return nil, fmt.Errorf("KERNODECK_SSH_KEY_FILE: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("KERNODECK_SSH_KEY_FILE %s: %w", pc.SSHKeyFile, err)
	}
	return &sshhost.Driver{Store: postgres.Hosts{DB: db}, Signer: signer, AdminUser: pc.SSHUser, UserPrefix: pc.SSHUserPrefix,
		ScratchDir: pc.ScratchDir, ConnectTimeout: pc.SSHTimeout}, nil
}

// runKeygen prints a new keyring entry for KERNODECK_SECRET_KEYS.
func runKeygen(args []string, stdout, stderr io.Writer) int {
	id := "k1"
	if len(args) > 0 {
		id = args[0]
	}
	spec := secrets.Generate(id)
	if _, err := secrets.Parse(spec); err != nil {
		fmt.Fprintln(stderr, "keygen:", err)
		return 2
	}
	fmt.Fprintln(stdout, spec)
	return 0
}
