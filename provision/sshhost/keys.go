package sshhost

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/provision/accesskey"
)

// runningReservation is the order's reservation once its access exists:
// keys are changed on running rentals only.
func (d *Driver) runningReservation(ctx context.Context, orderRef string) (reservation, error) {
	r, ok, err := d.Store.HostReservation(ctx, orderRef)
	if err != nil {
		return reservation{}, err
	}
	var access bool
	if ok {
		if access, err = d.Store.LiveAccess(ctx, orderRef); err != nil {
			return reservation{}, err
		}
	}
	if !access {
		return reservation{}, domain.Errorf(domain.ECodeConflict,
			"La commande %s n'a pas de location en cours : aucune clé à changer.", orderRef)
	}
	return r, nil
}

// installKey makes pubKey the only key of the order's account on its host.
func (d *Driver) installKey(ctx context.Context, r reservation, pubKey string) error {
	client, closeFn, err := d.connect(ctx, r)
	if err != nil {
		return err
	}
	defer closeFn()
	res, err := d.runScript(ctx, client, setkeyScript, [][2]string{{"KD_USER", r.UnixUser}, {"KD_PUBKEY", pubKey}},
		d.step(ctx, r.OrderRef))
	if err != nil {
		return fmt.Errorf("set key of %s on %s: %w", r.OrderRef, r.Name, err)
	}
	if !hasLine(res.Stdout, "KD_SETKEY_OK "+res.Tag) {
		return fmt.Errorf("set key of %s on %s: script ended early", r.OrderRef, r.Name)
	}
	return nil
}

// ReplaceKey makes the customer's own public key (an authorized_keys line,
// validated by the caller) the only key of a running rental: recorded on
// the order first, so a prepare retry installs it too, then applied on the
// host, where the old key (given or generated) stops working. A generated
// private key still on the access is erased. Retrying after a failure
// applies it again.
func (d *Driver) ReplaceKey(ctx context.Context, orderRef, publicKey string) error {
	r, err := d.runningReservation(ctx, orderRef)
	if err != nil {
		return err
	}
	pk, _, options, rest, err := ssh.ParseAuthorizedKey([]byte(publicKey))
	if err != nil || len(options) > 0 || strings.TrimSpace(string(rest)) != "" {
		return domain.FieldError("ssh_public_key", "Une seule clé publique SSH est attendue, sans options.")
	}
	// Only the key itself is written on the host (no comment, no options).
	publicKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk)))
	if err := d.Store.ReplaceOrderKey(ctx, orderRef, publicKey, ssh.FingerprintSHA256(pk)); err != nil {
		return fmt.Errorf("replace key of %s: %w", orderRef, err)
	}
	return d.installKey(ctx, r, publicKey)
}

// ReissueKey generates a new key pair for a running rental, stores its
// private key sealed on the access (to be shown to the owner again, once)
// and makes its public key the only one on the host: the previous key,
// generated or the customer's own, stops working.
func (d *Driver) ReissueKey(ctx context.Context, orderRef string) error {
	r, err := d.runningReservation(ctx, orderRef)
	if err != nil {
		return err
	}
	priv, pub, err := accesskey.New(accesskey.Comment(orderRef))
	if err != nil {
		return fmt.Errorf("generate key pair: %w", err)
	}
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(pub))
	if err != nil {
		return err
	}
	if err := d.Store.ReissueOrderKey(ctx, orderRef, r.ID, pub, postgres.AccessPrivateKey.Seal(d.Keyring, orderRef, priv),
		ssh.FingerprintSHA256(pk)); err != nil {
		return fmt.Errorf("reissue key of %s: %w", orderRef, err)
	}
	return d.installKey(ctx, r, pub)
}
