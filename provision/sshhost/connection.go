package sshhost

import (
	"context"
	"errors"

	"go.temporal.io/sdk/activity"
	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/domain"
)

// connect dials the reserved host. A host key mismatch sets the host aside
// and returns a non-retryable refusal.
func (d *Driver) connect(ctx context.Context, r reservation) (*ssh.Client, func(), error) {
	client, closeFn, err := d.dial(ctx, r.SSHHost)
	var mismatch *HostKeyMismatchError
	if errors.As(err, &mismatch) {
		if aerr := d.setAside(ctx, r, "clé d'hôte SSH inattendue : "+mismatch.Got, nil, false); aerr != nil {
			return nil, nil, aerr
		}
		return nil, nil, domain.Errorf(ErrTypeHostRefused,
			"La machine %s n'a pas présenté la clé SSH attendue : elle est écartée, une autre sera réservée.", r.Name)
	}
	return client, closeFn, err
}

func (d *Driver) step(ctx context.Context, orderRef string) func(string) {
	return func(step string) {
		d.logger().Debug("remote step", "order", orderRef, "step", step)
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, step)
		}
		if d.OnStep != nil {
			d.OnStep(orderRef, step)
		}
	}
}
