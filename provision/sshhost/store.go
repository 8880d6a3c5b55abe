package sshhost

import (
	"context"

	"github.com/kernodeck/kernodeck/postgres"
)

// Store is what the driver reads and writes (postgres.Hosts): only
// package postgres writes the inventory, the reservations and the order's
// tables.
type Store interface {
	HostReservation(ctx context.Context, orderRef string) (postgres.HostReservation, bool, error)
	ReserveHost(ctx context.Context, orderRef, model string, gpus int, user string) (postgres.HostReserved, error)
	SetHostAside(ctx context.Context, r postgres.HostReservation, failure string, seen *postgres.GPUsSeen, note string) error
	LastHostFailure(ctx context.Context, orderRef string) (failure string, ok bool, err error)
	ReservationSecrets(ctx context.Context, reservationID int64, privateKey, publicKey, jupyterToken string) (
		storedPublicKey, storedJupyterToken string, err error)
	UIDFloor(ctx context.Context, hostID int64) (int64, error)
	GPUModelCheck(ctx context.Context, model string) (vendor string, smiPattern *string, err error)
	RecordPrepared(ctx context.Context, reservationID int64, presetCheck string, uid int64, subIDs string) error
	RecordGPUsSeen(ctx context.Context, reservationID int64, seen postgres.GPUsSeen) error
	RecordAccountIDs(ctx context.Context, reservationID, uid int64, subIDs string) error
	FlagCustomer(ctx context.Context, reservationID int64, what string) error
	ReleaseHost(ctx context.Context, in postgres.HostRelease) (postgres.HostReleased, error)
	HostToRepair(ctx context.Context, name string, limit int) (postgres.SSHHost, []postgres.HostReservation, error)
	FinishRepair(ctx context.Context, in postgres.HostRepair) error

	OrderPublicKey(ctx context.Context, orderRef string) (string, error)
	CreateHostAccess(ctx context.Context, a postgres.NewAccess, r postgres.HostReservation) (postgres.AccessAddress, error)
	RevokeAccess(ctx context.Context, orderRef string) error
	LiveAccess(ctx context.Context, orderRef string) (bool, error)
	ReplaceOrderKey(ctx context.Context, orderRef, publicKey, fingerprint string) error
	ReissueOrderKey(ctx context.Context, orderRef string, reservationID int64, publicKey, privateKey, fingerprint string) error
}

// InventoryStore is what operators change in the inventory
// (postgres.Hosts).
type InventoryStore interface {
	AddHost(ctx context.Context, h Host) (Host, error)
	ListHosts(ctx context.Context) ([]Host, error)
	SetHostState(ctx context.Context, name, state, note string) error
	RemoveHost(ctx context.Context, name string) error
}

// Host is an inventory row, for operators.
type Host = postgres.Host

// ReleaseCheck is what the release (or a repair) found on a host after an
// order.
type ReleaseCheck = postgres.ReleaseCheck

// host is one inventory row, as the driver needs it.
type host = postgres.SSHHost

// reservation is an order's active hold on a host, with the host.
type reservation = postgres.HostReservation

var (
	_ Store          = postgres.Hosts{}
	_ InventoryStore = postgres.Hosts{}
)
