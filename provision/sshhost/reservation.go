package sshhost

import (
	"context"
	"fmt"
	"time"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
)

// Reserve takes a free host with exactly the order's GPUs: the host the
// order holds since its payment request if it has one (postgres.Capacity),
// without waiting for the capacity lock, else a free host no other order
// holds, left over by the paid rentals waiting ahead. A closed order takes
// none. Other decisions on a model's capacity are serialised, and unique
// indexes allow one active reservation per order and per host, so two
// rentals never share a machine (postgres.Hosts.ReserveHost). A second call
// for the same order keeps its host. No free host: a non-retryable
// no_capacity error (the order waits in line).
func (d *Driver) Reserve(ctx context.Context, in activities.ReserveInput) error {
	user, err := d.UnixUser(in.OrderRef)
	if err != nil {
		return err
	}
	r, err := d.Store.ReserveHost(ctx, in.OrderRef, in.GPUModel, in.GPUs, user)
	if err != nil || r.Already {
		return err
	}
	if r.Name == "" {
		return domain.Errorf(domain.ECodeNoCapacity,
			"Aucune machine libre avec %d GPU %s pour le moment.", in.GPUs, in.GPUModel)
	}
	d.logger().Info("host reserved", "order", in.OrderRef, "host", r.Name, "held", r.Held)
	return nil
}

// setAside marks the host broken and fails the order's reservation, so the
// next Reserve picks another host. The customer's account and scratch space,
// if any, are removed first (best effort: the host is out of service anyway).
func (d *Driver) setAside(ctx context.Context, r reservation, reason string, seen *gpuSeen, cleanup bool) error {
	if cleanup {
		if _, err := d.teardown(ctx, r, "release"); err != nil {
			d.logger().Warn("cleanup on a host set aside failed", "host", r.Name, "order", r.OrderRef, "err", err)
		}
	}
	var saw *postgres.GPUsSeen
	if seen != nil {
		saw = &postgres.GPUsSeen{Model: seen.model(), Count: len(seen.Names), Driver: seen.Driver, CUDA: seen.CUDA}
	}
	note := fmt.Sprintf("%s (commande %s, %s)", reason, r.OrderRef, time.Now().UTC().Format(time.RFC3339))
	if err := d.Store.SetHostAside(ctx, r, reason, saw, note); err != nil {
		return fmt.Errorf("set host %s aside: %w", r.Name, err)
	}
	d.logger().Error("host set aside as broken", "host", r.Name, "order", r.OrderRef, "reason", reason)
	return nil
}
