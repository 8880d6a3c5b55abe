package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// StarterStore finds orders and top-ups stored without a started workflow
// (the API crashed or Temporal was unreachable between insert and start).
type StarterStore interface {
	UnstartedOrders(ctx context.Context, olderThan time.Duration) ([]domain.Order, error)
	MarkOrderWorkflowStarted(ctx context.Context, ref string) error
	UnstartedTopUps(ctx context.Context, olderThan time.Duration) ([]domain.TopUp, error)
	MarkTopUpWorkflowStarted(ctx context.Context, ref string) error
}

// WorkflowStarter starts workflows idempotently.
type WorkflowStarter interface {
	StartRental(ctx context.Context, in workflows.RentalInput) error
	StartTopUp(ctx context.Context, in workflows.TopUpInput) error
}

// Starter is the reconciler that starts any missing workflow, so an order
// that was stored is never lost.
type Starter struct {
	Store        StarterStore
	Workflows    WorkflowStarter
	RentalConfig workflows.RentalConfig
	TopUpTimeout time.Duration
	Interval     time.Duration
	// Grace leaves the API time to start the workflow itself.
	Grace  time.Duration
	Logger *slog.Logger
}

// Run reconciles every Interval until ctx ends.
func (s *Starter) Run(ctx context.Context) error {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		if n, err := s.Once(ctx); err != nil {
			s.Logger.Warn("starter pass failed", "err", err)
		} else if n > 0 {
			s.Logger.Info("started missing workflows", "count", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Once runs one reconciliation pass and returns how many workflows it started.
func (s *Starter) Once(ctx context.Context) (int, error) {
	n := 0
	orders, err := s.Store.UnstartedOrders(ctx, s.Grace)
	if err != nil {
		return n, err
	}
	for _, o := range orders {
		if err := s.Workflows.StartRental(ctx, workflows.NewRentalInput(o, s.RentalConfig)); err != nil {
			return n, err
		}
		if err := s.Store.MarkOrderWorkflowStarted(ctx, o.Ref); err != nil {
			return n, err
		}
		n++
	}
	topups, err := s.Store.UnstartedTopUps(ctx, s.Grace)
	if err != nil {
		return n, err
	}
	for _, t := range topups {
		if err := s.Workflows.StartTopUp(ctx, workflows.NewTopUpInput(t, s.TopUpTimeout)); err != nil {
			return n, err
		}
		if err := s.Store.MarkTopUpWorkflowStarted(ctx, t.Ref); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
