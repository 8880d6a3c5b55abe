// Package recovery rebuilds the rentals' and top-ups' workflows from
// PostgreSQL, the system of record, after Temporal's database was lost
// (`kernodeck recover`), and keeps the payment address indexes ahead of
// every address already handed out (at recovery and at every start).
// docs/recovery.md has the operator's steps.
package recovery

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/workflows"
)

// Store is what recovery reads and writes in PostgreSQL.
type Store interface {
	LiveOrders(ctx context.Context) ([]domain.Order, error)
	LiveTopUps(ctx context.Context) ([]domain.TopUp, error)
	TargetRecord(ctx context.Context, ref string) (postgres.TargetRecord, error)
	ResendTargetPayments(ctx context.Context, ref string) (int64, error)
	MarkOrderWorkflowStarted(ctx context.Context, ref string) error
	MarkTopUpWorkflowStarted(ctx context.Context, ref string) error
	AdvanceHDIndexes(ctx context.Context, gap int64) ([]postgres.IndexAdvance, error)
}

// Starter starts a workflow unless one with its ID exists (wfclient.Client).
type Starter interface {
	StartRentalOnce(ctx context.Context, in workflows.RentalInput) (bool, error)
	StartTopUpOnce(ctx context.Context, in workflows.TopUpInput) (bool, error)
}

// Recoverer starts every live order's and top-up's workflow at its phase.
type Recoverer struct {
	Store     Store
	Workflows Starter
	// Rental and TopUpTimeout are the starter's (config.Config).
	Rental       workflows.RentalConfig
	TopUpTimeout time.Duration
	// IndexGap moves each network's next address index this far past the
	// highest one handed out (after a point-in-time restore); 0: only past it.
	IndexGap int64
	Logger   *slog.Logger
	Now      func() time.Time
}

// Report is what a recovery did.
type Report struct {
	// Started are the workflows started, by order or top-up reference,
	// with the phase each resumes at.
	Started map[string]string
	// Existing are the live targets whose workflow exists (left alone).
	Existing []string
	// Skipped are the live targets with nothing left to run.
	Skipped []string
	// Resent counts the chain payments the watchers deliver again.
	Resent int64
	// Indexes are the networks whose next address index moved.
	Indexes []postgres.IndexAdvance
}

func (r *Recoverer) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Run moves the address indexes, then starts every live order's and
// top-up's workflow that does not exist. Run twice, it starts nothing the
// second time.
func (r *Recoverer) Run(ctx context.Context) (Report, error) {
	rep := Report{Started: map[string]string{}}
	var err error
	if rep.Indexes, err = r.Store.AdvanceHDIndexes(ctx, r.IndexGap); err != nil {
		return rep, err
	}
	for _, a := range rep.Indexes {
		r.Logger.Warn("address index moved past the addresses handed out", "network", a.Network, "from", a.From, "to", a.To)
	}
	orders, err := r.Store.LiveOrders(ctx)
	if err != nil {
		return rep, err
	}
	for _, o := range orders {
		rec, err := r.Store.TargetRecord(ctx, o.Ref)
		if err != nil {
			return rep, err
		}
		in, at, ok, err := rentalInput(o, rec, r.Rental)
		if err != nil {
			return rep, err
		}
		if !ok {
			rep.Skipped = append(rep.Skipped, o.Ref)
			continue
		}
		if err := r.start(ctx, &rep, o.Ref, at, func() (bool, error) {
			return r.Workflows.StartRentalOnce(ctx, in)
		}, r.Store.MarkOrderWorkflowStarted); err != nil {
			return rep, err
		}
	}
	topups, err := r.Store.LiveTopUps(ctx)
	if err != nil {
		return rep, err
	}
	for _, t := range topups {
		rec, err := r.Store.TargetRecord(ctx, t.Ref)
		if err != nil {
			return rep, err
		}
		in, at, ok, err := topUpInput(t, rec, r.TopUpTimeout, r.now())
		if err != nil {
			return rep, err
		}
		if !ok {
			rep.Skipped = append(rep.Skipped, t.Ref)
			continue
		}
		if err := r.start(ctx, &rep, t.Ref, at, func() (bool, error) {
			return r.Workflows.StartTopUpOnce(ctx, in)
		}, r.Store.MarkTopUpWorkflowStarted); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// start starts one workflow; once started, its payments are marked for
// the watchers to deliver again (the lost workflow had acknowledged them).
func (r *Recoverer) start(ctx context.Context, rep *Report, ref, phase string, start func() (bool, error),
	mark func(context.Context, string) error) error {
	started, err := start()
	if err != nil {
		return fmt.Errorf("recover %s: %w", ref, err)
	}
	if !started {
		rep.Existing = append(rep.Existing, ref)
		return nil
	}
	rep.Started[ref] = phase
	n, err := r.Store.ResendTargetPayments(ctx, ref)
	if err != nil {
		return err
	}
	rep.Resent += n
	if err := mark(ctx, ref); err != nil {
		return err
	}
	r.Logger.Info("workflow recovered", "ref", ref, "phase", phase, "payments_resent", n)
	return nil
}
