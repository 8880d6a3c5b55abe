package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// Step outcomes: ok; refused (a domain refusal such as no capacity or a GPU
// mismatch: the workflow hands over to support); error (anything else: the
// activity is retried).
const (
	OutcomeOK      = "ok"
	OutcomeRefused = "refused"
	OutcomeError   = "error"
)

// Steps times the machine driver's steps by outcome.
type Steps struct {
	duration *prometheus.HistogramVec
}

func newSteps(reg prometheus.Registerer) *Steps {
	s := &Steps{duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    FamProvisioningSteps,
		Help:    "Machine driver steps (reserve, prepare, verify, create_access, revoke_access, release) by outcome.",
		Buckets: latencyBuckets,
	}, []string{"step", "outcome"})}
	reg.MustRegister(s.duration)
	return s
}

func (s *Steps) observe(step string, start time.Time, err error) {
	outcome := OutcomeOK
	var de *domain.Error
	switch {
	case err == nil:
	case errors.As(err, &de) && de.Code != domain.ECodeUnavailable && de.Code != domain.ECodeInternal:
		outcome = OutcomeRefused
	default:
		outcome = OutcomeError
	}
	s.duration.WithLabelValues(step, outcome).Observe(time.Since(start).Seconds())
}

// Provisioner decorates a machine driver with the step timings.
func (s *Steps) Provisioner(p activities.Provisioner) activities.Provisioner {
	return &timedProvisioner{Provisioner: p, s: s}
}

// timedProvisioner embeds the driver so a method added to the interface
// later passes through (untimed) rather than breaking the build.
type timedProvisioner struct {
	activities.Provisioner
	s *Steps
}

func (t *timedProvisioner) Reserve(ctx context.Context, in activities.ReserveInput) error {
	start := time.Now()
	err := t.Provisioner.Reserve(ctx, in)
	t.s.observe("reserve", start, err)
	return err
}

func (t *timedProvisioner) Prepare(ctx context.Context, in activities.PrepareInput) error {
	start := time.Now()
	err := t.Provisioner.Prepare(ctx, in)
	t.s.observe("prepare", start, err)
	return err
}

func (t *timedProvisioner) Verify(ctx context.Context, in activities.VerifyInput) (activities.Verification, error) {
	start := time.Now()
	v, err := t.Provisioner.Verify(ctx, in)
	t.s.observe("verify", start, err)
	return v, err
}

func (t *timedProvisioner) CreateAccess(ctx context.Context, in activities.CreateAccessInput) (activities.AccessSummary, error) {
	start := time.Now()
	a, err := t.Provisioner.CreateAccess(ctx, in)
	t.s.observe("create_access", start, err)
	return a, err
}

func (t *timedProvisioner) RevokeAccess(ctx context.Context, orderRef string) error {
	start := time.Now()
	err := t.Provisioner.RevokeAccess(ctx, orderRef)
	t.s.observe("revoke_access", start, err)
	return err
}

func (t *timedProvisioner) Release(ctx context.Context, orderRef string) error {
	start := time.Now()
	err := t.Provisioner.Release(ctx, orderRef)
	t.s.observe("release", start, err)
	return err
}
