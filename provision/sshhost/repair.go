package sshhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kernodeck/kernodeck/postgres"
)

// ErrHostDirty refuses to put a host back in rotation while something of a
// past customer's account is left on it.
var ErrHostDirty = errors.New("something of a past customer is left on the host")

// ErrRebootRequired is ErrHostDirty when only a reboot can clean the host
// (processes stuck in the kernel).
var ErrRebootRequired = fmt.Errorf("%w; reboot it first", ErrHostDirty)

// repairChecks bounds how many past reservations a repair checks again.
const repairChecks = 20

// RepairHost puts a drained or broken host back in rotation, after running
// the release's wipe and check again, on the host, for every past account
// no release or repair has found clean yet. While anything of one of them
// remains, it refuses (ErrHostDirty, or ErrRebootRequired), keeps the host
// out of rotation (broken) and writes what is left in its note. Refused
// while an order holds the host (ErrHostBusy).
func (d *Driver) RepairHost(ctx context.Context, name, note string) error {
	h, past, err := d.Store.HostToRepair(ctx, name, repairChecks)
	if err != nil {
		return err
	}
	var reasons, customer []string
	reboot := ""
	var cleaned []int64
	reset := ""
	for _, r := range past {
		t, err := d.teardown(ctx, r, "release")
		if err != nil {
			return fmt.Errorf("repair %s: %w", name, err)
		}
		if t.GPUReset != "" {
			reset = t.GPUReset
		}
		if len(t.Dirty) == 0 {
			cleaned = append(cleaned, r.ID)
			continue
		}
		for _, why := range t.Dirty {
			reasons = append(reasons, r.UnixUser+" ("+r.OrderRef+") : "+why)
		}
		customer = append(customer, t.Customer...)
		if t.Reboot != "" {
			reboot = t.Reboot
		}
	}
	repair := postgres.HostRepair{Host: h, Cleaned: cleaned, GPUReset: reset, Note: note}
	if len(reasons) > 0 {
		msg := "réparation refusée, nettoyage incomplet : " + strings.Join(reasons, " ; ")
		if reboot != "" {
			msg += " ; " + reboot
		}
		if len(customer) > 0 {
			msg += " ; du fait du client : " + strings.Join(customer, " ; ")
		}
		repair.Dirty = fmt.Sprintf("%s (%s)", msg, time.Now().UTC().Format(time.RFC3339))
	}
	err = d.Store.FinishRepair(ctx, repair)
	if err != nil {
		return fmt.Errorf("repair %s: %w", name, err)
	}
	if len(reasons) > 0 {
		sentinel := ErrHostDirty
		if reboot != "" {
			sentinel = ErrRebootRequired
		}
		d.logger().Error("repair refused: host not clean", "host", name, "left", reasons, "reboot", reboot)
		return fmt.Errorf("%s: %w: %s", name, sentinel, strings.Join(reasons, " ; "))
	}
	d.logger().Info("host repaired", "host", name, "checked", len(past))
	return nil
}

// Operations are what operators do to the inventory, from `kernodeck hosts`
// and from the support console alike: one implementation for both.
type Operations struct {
	Inventory *Inventory
	// Driver runs repair's checks on the host over SSH.
	Driver *Driver
}

// NewOperations is the operators' inventory of d's hosts, kept in hosts.
func NewOperations(hosts InventoryStore, d *Driver) *Operations {
	return &Operations{Inventory: &Inventory{Store: hosts}, Driver: d}
}

// List is Inventory.List.
func (o *Operations) List(ctx context.Context) ([]Host, error) { return o.Inventory.List(ctx) }

// Repair is Driver.RepairHost: back in rotation once the host is clean.
func (o *Operations) Repair(ctx context.Context, name, note string) error {
	return o.Driver.RepairHost(ctx, name, note)
}

// Retire is Inventory.Retire: out of rotation.
func (o *Operations) Retire(ctx context.Context, name, note string) error {
	return o.Inventory.Retire(ctx, name, note)
}
