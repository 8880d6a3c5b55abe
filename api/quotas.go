package api

import (
	"context"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// Quota defaults (issue 19: everything a free account can create is
// bounded). Registrations per network are Config.RegistrationsPerIP.
const (
	DefaultUnpaidOrdersPerAccount     = 5
	DefaultOpenTopUpsPerAccount       = 3
	DefaultPaymentRequestsPerHour     = 6
	DefaultSupportRequestsPerDay      = 10
	DefaultSupportRequestsPerOrderDay = 3
	DefaultStreamsPerSession          = 10
	DefaultStreamsPerAccount          = 30
)

// A live stream's place is a lease renewed while it runs: a stream whose
// API process died frees its place within streamLease.
const (
	streamLease      = time.Minute
	streamRenewEvery = streamLease / 3
)

const (
	quotaDay             = 24 * time.Hour
	paymentRequestWindow = time.Hour
)

// Quotas bound what an account can create or open. Each is decided in
// PostgreSQL (atomically against parallel requests); past it the API
// answers 429 quota_exceeded with Retry-After, and writes nothing. Zero
// fields take the defaults.
type Quotas struct {
	// UnpaidOrdersPerAccount: orders awaiting payment at once (5).
	UnpaidOrdersPerAccount int
	// OpenTopUpsPerAccount: top-ups awaiting payment at once (3).
	OpenTopUpsPerAccount int
	// PaymentRequestsPerHour: payment requests asked per order, and per
	// top-up, within an hour (6).
	PaymentRequestsPerHour int
	// SupportRequestsPerDay per account (10) and SupportRequestsPerOrderDay
	// per order (3), within 24 hours.
	SupportRequestsPerDay      int
	SupportRequestsPerOrderDay int
	// StreamsPerSession (10) and StreamsPerAccount (30): live streams (SSE)
	// open at once.
	StreamsPerSession int
	StreamsPerAccount int
}

func (q *Quotas) setDefaults() {
	for _, f := range []struct {
		v   *int
		def int
	}{
		{&q.UnpaidOrdersPerAccount, DefaultUnpaidOrdersPerAccount},
		{&q.OpenTopUpsPerAccount, DefaultOpenTopUpsPerAccount},
		{&q.PaymentRequestsPerHour, DefaultPaymentRequestsPerHour},
		{&q.SupportRequestsPerDay, DefaultSupportRequestsPerDay},
		{&q.SupportRequestsPerOrderDay, DefaultSupportRequestsPerOrderDay},
		{&q.StreamsPerSession, DefaultStreamsPerSession},
		{&q.StreamsPerAccount, DefaultStreamsPerAccount},
	} {
		if *f.v <= 0 {
			*f.v = f.def
		}
	}
}

// QuotaStore takes the quota decisions (package postgres).
type QuotaStore interface {
	// CreateOrderLimited, CreateTopUpLimited and CreateSupportRequestLimited
	// are the creations, refused (a *domain.QuotaError) past their limits.
	CreateOrderLimited(ctx context.Context, accountID int64, q domain.Quote, lim domain.Limit) (domain.Order, error)
	CreateTopUpLimited(ctx context.Context, accountID, amountCents int64, lim domain.Limit) (domain.TopUp, error)
	CreateSupportRequestLimited(ctx context.Context, r domain.SupportRequest, perAccount, perOrder domain.Limit) (domain.SupportRequest, error)
	// AskPaymentRequest counts a payment request asked on an order or a
	// top-up and, on an order, records the asking network (a hold the
	// request takes belongs to it).
	AskPaymentRequest(ctx context.Context, targetRef, network string, lim domain.Limit) error
	// OpenStream, RenewStream and CloseStream lease a live stream's place.
	OpenStream(ctx context.Context, accountID int64, session []byte, perSession, perAccount int, lease time.Duration) (int64, error)
	RenewStream(ctx context.Context, id int64, lease time.Duration) error
	CloseStream(ctx context.Context, id int64) error
}

// QuotaObserver counts quota refusals by quota name (metrics, Deps.Quotas).
type QuotaObserver interface {
	QuotaRefused(quota string)
}

func (s *Server) countQuota(quota string) {
	if s.quotas != nil {
		s.quotas.QuotaRefused(quota)
	}
}

// refuseQuota answers a quota's refusal: 429, Retry-After in whole
// seconds, and the French message with how long to wait. Counted.
func (s *Server) refuseQuota(c *gin.Context, e *domain.QuotaError) {
	s.countQuota(e.Quota)
	secs := int((max(e.RetryAfter, time.Second) + time.Second - 1) / time.Second)
	c.Header("Retry-After", strconv.Itoa(secs))
	writeError(c, statusFor(e.Err.Code), e.Err.Code, e.Err.Message+" Réessayez dans "+frenchWait(secs)+".", e.Err.Field)
}

// frenchWait says secs in the largest unit that keeps it readable.
func frenchWait(secs int) string {
	switch {
	case secs < 60:
		return domain.Plural(secs, "seconde", "secondes")
	case secs < 2*3600:
		return domain.Plural((secs+59)/60, "minute", "minutes")
	default:
		return domain.Plural((secs+3599)/3600, "heure", "heures")
	}
}

// limits of the quotas, as the store takes them.
func (s *Server) unpaidOrdersLimit() domain.Limit {
	window := s.cfg.Rental.UnpaidTimeout
	if window <= 0 {
		window = workflows.DefaultUnpaidTimeout
	}
	return domain.Limit{Quota: domain.QuotaUnpaidOrders, Max: s.cfg.Quotas.UnpaidOrdersPerAccount, Window: window}
}

func (s *Server) openTopUpsLimit() domain.Limit {
	window := s.cfg.TopUpTimeout
	if window <= 0 {
		window = workflows.DefaultTopUpTimeout
	}
	return domain.Limit{Quota: domain.QuotaOpenTopUps, Max: s.cfg.Quotas.OpenTopUpsPerAccount, Window: window}
}

func (s *Server) paymentRequestsLimit(quota string) domain.Limit {
	return domain.Limit{Quota: quota, Max: s.cfg.Quotas.PaymentRequestsPerHour, Window: paymentRequestWindow}
}

func (s *Server) supportLimits() (perAccount, perOrder domain.Limit) {
	return domain.Limit{Quota: domain.QuotaSupportPerAccount, Max: s.cfg.Quotas.SupportRequestsPerDay, Window: quotaDay},
		domain.Limit{Quota: domain.QuotaSupportPerOrder, Max: s.cfg.Quotas.SupportRequestsPerOrderDay, Window: quotaDay}
}

// openStream takes the request's live-stream place (per session and per
// account), or answers 429 and returns false. The place is renewed while
// the stream runs; call release when it ends.
func (s *Server) openStream(c *gin.Context) (release func(), ok bool) {
	h, _ := c.Get(ctxTokenHash)
	session, _ := h.([]byte)
	ctx := c.Request.Context()
	id, err := s.stores.Quotas.OpenStream(ctx, account(c).ID, session,
		s.cfg.Quotas.StreamsPerSession, s.cfg.Quotas.StreamsPerAccount, streamLease)
	if err != nil {
		s.fail(c, err)
		return nil, false
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(streamRenewEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := s.stores.Quotas.RenewStream(ctx, id, streamLease); err != nil && ctx.Err() == nil {
					s.log.Warn("live stream lease not renewed", "err", err)
				}
			}
		}
	}()
	return func() {
		close(done)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.stores.Quotas.CloseStream(cctx, id); err != nil {
			// The lease expires by itself.
			s.log.Warn("live stream place not given back", "err", err)
		}
	}, true
}
