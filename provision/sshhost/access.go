package sshhost

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/postgres"
)

// CreateAccess writes the order's access information once: the host, the
// account, the generated private key (sealed, shown once to the owner) and
// the Jupyter URL and token for the notebook preset.
func (d *Driver) CreateAccess(ctx context.Context, in activities.CreateAccessInput) (activities.AccessSummary, error) {
	r, ok, err := d.Store.HostReservation(ctx, in.OrderRef)
	if err != nil {
		return activities.AccessSummary{}, err
	}
	if !ok {
		return activities.AccessSummary{}, fmt.Errorf("create access %s: no active host reservation", in.OrderRef)
	}
	var privKey, fingerprint, jupyterURL, jupyterTok string
	if r.PrivateKey.Valid {
		pem, err := postgres.ReservationPrivateKey.Open(d.Keyring, in.OrderRef, r.PrivateKey.String)
		if err != nil {
			return activities.AccessSummary{}, err
		}
		privKey = postgres.AccessPrivateKey.Seal(d.Keyring, in.OrderRef, pem)
	}
	pubLine, err := d.Store.OrderPublicKey(ctx, in.OrderRef)
	if err != nil {
		return activities.AccessSummary{}, err
	}
	if pubLine == "" {
		pubLine = r.PublicKey.String
	}
	if pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(pubLine)); err == nil {
		fingerprint = ssh.FingerprintSHA256(pk)
	}
	if r.JupyterTok.Valid {
		tok, err := postgres.ReservationJupyterToken.Open(d.Keyring, in.OrderRef, r.JupyterTok.String)
		if err != nil {
			return activities.AccessSummary{}, err
		}
		jupyterTok = postgres.AccessJupyterToken.Seal(d.Keyring, in.OrderRef, tok)
		jupyterURL = fmt.Sprintf("http://127.0.0.1:%d/lab", d.jupyterPort())
	}
	v := in.Verification
	if r.PresetCheck.Valid {
		v.Notes = strings.TrimSpace(v.Notes + " " + r.PresetCheck.String)
	}
	if jupyterURL != "" {
		v.Notes = strings.TrimSpace(v.Notes + " " + jupyterTunnelNote(r, d.jupyterPort()))
	}
	// The generated private key then lives (sealed) on the access only.
	a, err := d.Store.CreateHostAccess(ctx, postgres.NewAccess{OrderRef: in.OrderRef, Host: r.Address, Port: r.Port,
		Username: r.UnixUser, PrivateKey: privKey, KeyFingerprint: fingerprint, JupyterURL: jupyterURL,
		JupyterToken: jupyterTok, GPUModel: v.GPUModel, GPUCount: v.GPUCount, DriverVersion: v.DriverVersion,
		CUDAVersion: v.CUDAVersion, Notes: v.Notes}, r)
	if err != nil {
		return activities.AccessSummary{}, err
	}
	return activities.AccessSummary{Host: a.Host, Port: a.Port, Username: a.Username}, nil
}

// jupyterTunnelNote tells the customer how to reach Jupyter, which listens
// on the host's loopback only.
func jupyterTunnelNote(r reservation, port int) string {
	return fmt.Sprintf("Jupyter écoute sur 127.0.0.1 de la machine seulement : ouvrez le tunnel "+
		"« ssh -N -L %d:127.0.0.1:%d -p %d %s@%s » puis ouvrez http://127.0.0.1:%d/lab avec le jeton.",
		port, port, r.Port, r.UnixUser, r.Address, port)
}

// RevokeAccess stops the customer's processes and removes the account and
// its files, then marks the access revoked.
func (d *Driver) RevokeAccess(ctx context.Context, orderRef string) error {
	r, ok, err := d.Store.HostReservation(ctx, orderRef)
	if err != nil {
		return err
	}
	if ok {
		// What could not be cleaned is checked again, and acted on, by
		// Release; what the customer did is kept for it.
		t, err := d.teardown(ctx, r, "revoke")
		if err != nil {
			return err
		}
		if err := d.flagCustomer(ctx, r.ID, t.Customer); err != nil {
			return fmt.Errorf("revoke %s: %w", orderRef, err)
		}
	}
	return d.Store.RevokeAccess(ctx, orderRef)
}
