package rates

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// History keeps the rates observed (postgres.DB: table asset_rates), so
// that what a payment received in another asset was worth when it came
// in can be checked later (postgres.ValueBound).
type History interface {
	RecordRate(ctx context.Context, r Rate) error
}

// Recorder is a Source that writes every rate its Source gives to History,
// best effort: a failed write is logged and the rate is returned all the
// same, since a quote must not fail for want of a history row.
type Recorder struct {
	Source  Source
	History History
	Logger  *slog.Logger // nil: slog.Default()
}

// Rate returns Source's rate, recorded.
func (r *Recorder) Rate(ctx context.Context, asset string) (Rate, error) {
	rate, err := r.Source.Rate(ctx, asset)
	if err != nil {
		return rate, err
	}
	if err := r.History.RecordRate(ctx, rate); err != nil {
		logger(r.Logger).Warn("rate not recorded", "asset", rate.Asset, "source", rate.Source, "err", err)
	}
	return rate, nil
}

// DefaultSampleInterval is how often the worker records every priced
// asset's rate (KERNODECK_RATE_SAMPLE_INTERVAL).
const DefaultSampleInterval = 5 * time.Minute

// Sampler records the rate of each of Assets every Interval, so that an
// asset nobody quoted still has an observation near any payment's
// reception. The worker runs it.
type Sampler struct {
	Source   Source
	History  History
	Assets   []string
	Interval time.Duration // 0: DefaultSampleInterval
	Logger   *slog.Logger  // nil: slog.Default()
}

// Tick records the current rate of every asset the source prices (an asset
// it does not price is skipped); it returns how many were recorded and the
// first failure, after trying them all.
func (s *Sampler) Tick(ctx context.Context) (int, error) {
	var first error
	n := 0
	for _, asset := range s.Assets {
		r, err := s.Source.Rate(ctx, asset)
		if errors.Is(err, ErrUnknownAsset) {
			continue
		}
		if err == nil {
			err = s.History.RecordRate(ctx, r)
		}
		if err != nil {
			logger(s.Logger).Warn("rate sample", "asset", asset, "err", err)
			if first == nil {
				first = err
			}
			continue
		}
		n++
	}
	return n, first
}

// Run ticks at once, then every Interval until ctx ends.
func (s *Sampler) Run(ctx context.Context) error {
	every := s.Interval
	if every <= 0 {
		every = DefaultSampleInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		_, _ = s.Tick(ctx) // failures are logged; the next tick tries again
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}
