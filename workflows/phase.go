package workflows

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// Phase is where a rental stands. Its value is the order's status, as the
// API, the timeline and the KdStatus search attribute show it.
type Phase string

// The phases of a rental.
const (
	PhaseAwaitingPayment    Phase = domain.StatusAwaitingPayment
	PhasePaymentDetected    Phase = domain.StatusPaymentDetected
	PhasePaid               Phase = domain.StatusPaid
	PhaseWaitingForMachine  Phase = domain.StatusWaitingForMachine
	PhaseProvisioning       Phase = domain.StatusProvisioning
	PhaseProvisioningFailed Phase = domain.StatusProvisioningFailed
	PhaseActive             Phase = domain.StatusActive
	PhaseEnding             Phase = domain.StatusEnding
	PhaseEnded              Phase = domain.StatusEnded
	PhaseCancelled          Phase = domain.StatusCancelled
	PhaseExpired            Phase = domain.StatusExpired
	PhaseRefunded           Phase = domain.StatusRefunded
)

// RentalMoves is every move a rental may make, from each phase; the
// phases without moves are final.
//
//	awaiting_payment ⇄ payment_detected ─┐ (a payment seen, then confirmed or gone)
//	   │  └── expired, cancelled          ├─▶ paid ─▶ provisioning ─▶ active ─▶ ending ─▶ ended
//	   └───────────────────────────────────┘    │        ▲   │
//	paid ─▶ awaiting_payment (a deep reorg before provisioning)  │   ▼
//	                                provisioning_failed ─▶ cancelled, refunded
//	paid ─▶ waiting_for_machine (no free machine) ─▶ provisioning, refunded, cancelled
var RentalMoves = map[Phase][]Phase{
	PhaseAwaitingPayment:    {PhasePaymentDetected, PhasePaid, PhaseExpired, PhaseCancelled},
	PhasePaymentDetected:    {PhaseAwaitingPayment, PhasePaid, PhaseExpired},
	PhasePaid:               {PhaseProvisioning, PhaseWaitingForMachine, PhaseAwaitingPayment, PhasePaymentDetected},
	PhaseWaitingForMachine:  {PhaseProvisioning, PhaseRefunded, PhaseCancelled},
	PhaseProvisioning:       {PhaseActive, PhaseProvisioningFailed},
	PhaseProvisioningFailed: {PhaseProvisioning, PhaseCancelled, PhaseRefunded},
	PhaseActive:             {PhaseEnding},
	PhaseEnding:             {PhaseEnded},
	PhaseEnded:              nil,
	PhaseCancelled:          nil,
	PhaseExpired:            nil,
	PhaseRefunded:           nil,
}

// RentalSupportActions is what support may ask of a rental in each phase
// (domain.Action*): the actions whose update validator can accept them
// there; what else they check (an amount left to refund, a payment being
// confirmed, an end already asked) stays theirs. The console offers these
// only (SupportActionsFor), and TestRentalSupportActions holds them to the
// validators. The final phases take none: what a closed order still
// received is refunded from support's queue (settlement), apart.
var RentalSupportActions = map[Phase][]string{
	PhaseAwaitingPayment:    {domain.ActionAttributePayment, domain.ActionCancel, domain.ActionRefund},
	PhasePaymentDetected:    {domain.ActionAttributePayment, domain.ActionRefund},
	PhasePaid:               {domain.ActionExtend, domain.ActionRefund},
	PhaseWaitingForMachine:  {domain.ActionCancel, domain.ActionRefund},
	PhaseProvisioning:       {domain.ActionExtend, domain.ActionRefund},
	PhaseProvisioningFailed: {domain.ActionExtend, domain.ActionRetryProvisioning, domain.ActionCancel, domain.ActionRefund},
	PhaseActive:             {domain.ActionExtend, domain.ActionEndEarly, domain.ActionRefund},
	PhaseEnding:             {domain.ActionRefund},
	PhaseEnded:              nil,
	PhaseCancelled:          nil,
	PhaseExpired:            nil,
	PhaseRefunded:           nil,
}

// TopUpSupportActions is RentalSupportActions for a top-up, by status: an
// attribution while it awaits payment, a cancellation while nothing was
// seen for it (the top-up workflow's validators).
var TopUpSupportActions = map[string][]string{
	domain.TopUpAwaitingPayment: {domain.ActionAttributePayment, domain.ActionCancel},
	domain.TopUpPaymentDetected: {domain.ActionAttributePayment},
}

// SupportActionsFor lists the support actions the workflow of an order
// (kind domain.TargetOrder) or a top-up (domain.TargetTopUp) in status
// may take; none for an unknown status.
func SupportActionsFor(kind, status string) []string {
	if kind == domain.TargetTopUp {
		return slices.Clone(TopUpSupportActions[status])
	}
	return slices.Clone(RentalSupportActions[Phase(status)])
}

// rentalPhases are the phases in the order the diagram lists them.
var rentalPhases = []Phase{PhaseAwaitingPayment, PhasePaymentDetected, PhasePaid, PhaseWaitingForMachine, PhaseProvisioning,
	PhaseProvisioningFailed, PhaseActive, PhaseEnding, PhaseEnded, PhaseCancelled, PhaseExpired, PhaseRefunded}

// movesMermaid is RentalMoves as a Mermaid state diagram, the one README's
// Architecture section shows (TestREADMEPhaseDiagram keeps them equal).
func movesMermaid() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n    [*] --> " + string(PhaseAwaitingPayment) + "\n")
	for _, p := range rentalPhases {
		for _, q := range RentalMoves[p] {
			fmt.Fprintf(&b, "    %s --> %s\n", p, q)
		}
		if p.Final() {
			fmt.Fprintf(&b, "    %s --> [*]\n", p)
		}
	}
	return b.String()
}

// CanMove reports whether a rental in phase p may move to q. Staying in
// the same phase is always allowed (a status written again).
func (p Phase) CanMove(q Phase) bool {
	return p == q || slices.Contains(RentalMoves[p], q)
}

// Awaiting reports whether a rental in phase p still takes payments
// toward its total.
func (p Phase) Awaiting() bool { return p == PhaseAwaitingPayment || p == PhasePaymentDetected }

// Closed reports whether the rental was closed instead of running its
// period to the end: cancelled, expired or refunded.
func (p Phase) Closed() bool { return p == PhaseCancelled || p == PhaseExpired || p == PhaseRefunded }

// Final reports whether p ends the rental.
func (p Phase) Final() bool {
	moves, known := RentalMoves[p]
	return known && len(moves) == 0
}

// phase is the rental's current phase.
func (r *rental) phase() Phase { return Phase(r.Status.Status) }

// transition moves the rental to phase to, at once in memory, in its
// KdStatus search attribute (with the payment's asset and network noted
// since) and in PostgreSQL: it records evs, in order, the last one
// carrying the status (those before it are a support action's audit entry
// that goes with the move). As the reference app's updateStatus: the
// state first, then the activity that writes it (RecordOrderEvent:
// idempotent by event key, the status with its event in one
// transaction). Staying in the same phase upserts nothing; the event
// writes the status again.
//
// Four moves are made by setPhase instead, because their write is not an
// event recorded right after the move, and the commands recorded
// histories replay must stay as they are: paid, covered by the intake
// (its "paid" event follows in the main flow, recordPaid) or by the
// balance (the debit's transaction wrote it before); ending (its event
// follows the revocation of access, teardown); refunded by a closing
// refund (its event is recorded first: a refused refund moves nothing).
func (r *rental) transition(ctx workflow.Context, to Phase, evs ...activities.OrderEvent) error {
	if r.phase() != to {
		r.setPhase(ctx, to)
	}
	evs[len(evs)-1].Status = string(to)
	return recordAll(ctx, r.record, evs)
}

// setPhase moves the rental to phase to in memory and in its search
// attributes only; transition says who else calls it, and why. A move the
// table does not allow is a bug: the workflow task fails (and is retried
// once the code is fixed) instead of writing a state the order cannot be
// in.
func (r *rental) setPhase(ctx workflow.Context, to Phase) {
	if from := r.phase(); !from.CanMove(to) {
		panic(fmt.Sprintf("rental %s: no move from %s to %s", r.in.OrderRef, from, to))
	}
	r.Status.Status = string(to)
	r.sa.setStatus(ctx, string(to))
}

// recordAll records evs in order, up to the first that fails.
func recordAll[E any](ctx workflow.Context, record func(workflow.Context, E) error, evs []E) error {
	for _, ev := range evs {
		if err := record(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}
