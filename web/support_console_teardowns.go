package web

// The rentals whose teardown is stuck, in the support console's queue
// (issue 40): still ending after the teardown's steps kept failing (the
// workflow wrote a "teardown_stuck" event and goes on retrying every 30
// minutes), read from the TeardownsStuck service (GET /v1/support/teardowns-stuck). The machine may
// still hold the customer's data and access: support checks the host from
// the order's file. An order leaves the list once its teardown completes.

import (
	"context"

	"github.com/kernodeck/kernodeck/domain"
)

// teardownRow is a stuck teardown with the step that failed said in
// French (empty when the event did not say), its error cut to
// maxTeardownError characters (the order's file has it whole).
type teardownRow struct {
	domain.StuckTeardown
	StepLabel string
}

// teardownStepLabels names the teardown's steps (the workflow's activity
// names, as the event records them).
var teardownStepLabels = map[string]string{
	"RevokeAccess":    "retrait de l'accès du client",
	"ReleaseCapacity": "effacement et libération de la machine",
}

const maxTeardownError = 300

// stuckTeardowns reads the rentals whose teardown is stuck, the longest
// stuck first.
func (s *Site) stuckTeardowns(ctx context.Context, a *agent) ([]teardownRow, error) {
	orders, err := s.svc.TeardownsStuck(ctx, a)
	if err != nil {
		return nil, err
	}
	rows := make([]teardownRow, 0, len(orders))
	for _, o := range orders {
		r := teardownRow{StuckTeardown: o, StepLabel: o.Step}
		if l, ok := teardownStepLabels[o.Step]; ok {
			r.StepLabel = l
		}
		if e := []rune(o.Error); len(e) > maxTeardownError {
			r.Error = string(e[:maxTeardownError]) + "…"
		}
		rows = append(rows, r)
	}
	return rows, nil
}
