package sshhost

import (
	"context"
	"fmt"
	"regexp"

	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/postgres"
)

// Host states.
const (
	StateAvailable = "available"
	StateReserved  = "reserved"
	StateInUse     = "in_use"
	StateDraining  = "draining"
	StateBroken    = "broken"
)

// Inventory is the operator's view of gpu_hosts (kernodeck hosts ...).
type Inventory struct {
	Store InventoryStore
}

var fingerprintRE = regexp.MustCompile(`^SHA256:[A-Za-z0-9+/]{43}$`)

// ErrHostBusy refuses an operation on a host an order holds.
var ErrHostBusy = postgres.ErrHostBusy

// ErrNoHost: no host has that name.
var ErrNoHost = postgres.ErrNoHost

// Add registers a host, available at once.
func (inv *Inventory) Add(ctx context.Context, h Host) (Host, error) {
	if !fingerprintRE.MatchString(h.Fingerprint) {
		return Host{}, fmt.Errorf("host key fingerprint %q: want SHA256:<43 base64 characters> (ssh-keygen -lf)", h.Fingerprint)
	}
	if h.KeyType == "" {
		h.KeyType = ssh.KeyAlgoED25519
	}
	if h.Port == 0 {
		h.Port = 22
	}
	return inv.Store.AddHost(ctx, h)
}

// List returns every host with the order holding it, if any, and the
// release check of the last reservation that ended on it.
func (inv *Inventory) List(ctx context.Context) ([]Host, error) {
	return inv.Store.ListHosts(ctx)
}

// Drain takes a host out of rotation: no new order gets it; an order
// holding it keeps it until its end, then the host stays drained.
func (inv *Inventory) Drain(ctx context.Context, name, note string) error {
	return inv.Store.SetHostState(ctx, name, StateDraining, note)
}

// Retire is Drain under the console's and the CLI's operator word: the
// host leaves rotation (a running rental keeps it to its end) until a
// repair puts it back.
func (inv *Inventory) Retire(ctx context.Context, name, note string) error {
	return inv.Drain(ctx, name, note)
}

// Putting a host back in rotation is Driver.RepairHost: it checks the host
// first, over SSH.

// Remove deletes a host no order holds (past reservations keep its name).
func (inv *Inventory) Remove(ctx context.Context, name string) error {
	return inv.Store.RemoveHost(ctx, name)
}
