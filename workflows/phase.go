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
var RentalMoves = moveTable[Phase]{
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

// TopUpPhase is where a top-up stands. Its value is the top-up's status,
// as the API, the timeline and the KdStatus search attribute show it.
type TopUpPhase string

// The phases of a top-up.
const (
	TopUpPhaseAwaitingPayment TopUpPhase = domain.TopUpAwaitingPayment
	TopUpPhasePaymentDetected TopUpPhase = domain.TopUpPaymentDetected
	TopUpPhaseCredited        TopUpPhase = domain.TopUpCredited
	TopUpPhaseExpired         TopUpPhase = domain.TopUpExpired
	TopUpPhaseCancelled       TopUpPhase = domain.TopUpCancelled
)

// TopUpMoves is every move a top-up may make, from each phase (as
// RentalMoves): a payment seen and then confirmed or gone, the credit once
// received covers the amount (a reversal before it sends the top-up back
// to awaiting its payment), expiry at the end of the payment window, and
// cancellation while nothing was seen. A credited top-up stays credited: a
// payment a reorganisation removes after the credit is flagged for
// support.
var TopUpMoves = moveTable[TopUpPhase]{
	TopUpPhaseAwaitingPayment: {TopUpPhasePaymentDetected, TopUpPhaseCredited, TopUpPhaseExpired, TopUpPhaseCancelled},
	TopUpPhasePaymentDetected: {TopUpPhaseAwaitingPayment, TopUpPhaseCredited, TopUpPhaseExpired},
	TopUpPhaseCredited:        nil,
	TopUpPhaseExpired:         nil,
	TopUpPhaseCancelled:       nil,
}

// TopUpSupportActions is RentalSupportActions for a top-up: an attribution
// while it awaits payment, a cancellation while nothing was seen for it
// (the top-up workflow's validators).
var TopUpSupportActions = map[TopUpPhase][]string{
	TopUpPhaseAwaitingPayment: {domain.ActionAttributePayment, domain.ActionCancel},
	TopUpPhasePaymentDetected: {domain.ActionAttributePayment},
}

// SupportActionsFor lists the support actions the workflow of an order
// (kind domain.TargetOrder) or a top-up (domain.TargetTopUp) in status
// may take; none for an unknown status.
func SupportActionsFor(kind, status string) []string {
	if kind == domain.TargetTopUp {
		return slices.Clone(TopUpSupportActions[TopUpPhase(status)])
	}
	return slices.Clone(RentalSupportActions[Phase(status)])
}

// rentalPhases and topUpPhases are the phases in the order the diagrams
// list them.
var (
	rentalPhases = []Phase{PhaseAwaitingPayment, PhasePaymentDetected, PhasePaid, PhaseWaitingForMachine, PhaseProvisioning,
		PhaseProvisioningFailed, PhaseActive, PhaseEnding, PhaseEnded, PhaseCancelled, PhaseExpired, PhaseRefunded}
	topUpPhases = []TopUpPhase{TopUpPhaseAwaitingPayment, TopUpPhasePaymentDetected, TopUpPhaseCredited,
		TopUpPhaseExpired, TopUpPhaseCancelled}
)

// movesMermaid is RentalMoves as a Mermaid state diagram, the one README's
// Architecture section shows (TestREADMEPhaseDiagram keeps them equal).
func movesMermaid() string {
	return mermaid("RentalMoves", PhaseAwaitingPayment, rentalPhases, RentalMoves)
}

// topUpMovesMermaid is TopUpMoves as a Mermaid state diagram, shown just
// after the rental's (TestREADMEPhaseDiagram too).
func topUpMovesMermaid() string {
	return mermaid("TopUpMoves", TopUpPhaseAwaitingPayment, topUpPhases, TopUpMoves)
}

// mermaid draws the move table named name as a state diagram: start,
// then each phase's moves in the order of phases, the final phases (no
// moves) ending it.
func mermaid[P ~string](name string, start P, phases []P, moves moveTable[P]) string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n    %% " + name + " (workflows/phase.go)\n    [*] --> " + string(start) + "\n")
	for _, p := range phases {
		for _, q := range moves[p] {
			fmt.Fprintf(&b, "    %s --> %s\n", p, q)
		}
		if moves.final(p) {
			fmt.Fprintf(&b, "    %s --> [*]\n", p)
		}
	}
	return b.String()
}

// moveTable is every move of a rental's or a top-up's phases, from each
// phase; the phases without moves are final.
type moveTable[P ~string] map[P][]P

// allows reports whether from may move to to. Staying in the same phase is
// always allowed (a status written again).
func (m moveTable[P]) allows(from, to P) bool { return from == to || slices.Contains(m[from], to) }

// final reports whether p is in the table with no move.
func (m moveTable[P]) final(p P) bool {
	next, known := m[p]
	return known && len(next) == 0
}

// CanMove reports whether a rental in phase p may move to q (staying
// included).
func (p Phase) CanMove(q Phase) bool { return RentalMoves.allows(p, q) }

// Awaiting reports whether a rental in phase p still takes payments
// toward its total.
func (p Phase) Awaiting() bool { return p == PhaseAwaitingPayment || p == PhasePaymentDetected }

// Closed reports whether the rental was closed instead of running its
// period to the end: cancelled, expired or refunded.
func (p Phase) Closed() bool { return p == PhaseCancelled || p == PhaseExpired || p == PhaseRefunded }

// Final reports whether p ends the rental.
func (p Phase) Final() bool { return RentalMoves.final(p) }

// CanMove reports whether a top-up in phase p may move to q (staying
// included).
func (p TopUpPhase) CanMove(q TopUpPhase) bool { return TopUpMoves.allows(p, q) }

// Awaiting reports whether a top-up in phase p still waits for its
// payment.
func (p TopUpPhase) Awaiting() bool {
	return p == TopUpPhaseAwaitingPayment || p == TopUpPhasePaymentDetected
}

// Closed reports whether the top-up was closed without its credit:
// cancelled or expired.
func (p TopUpPhase) Closed() bool { return p == TopUpPhaseCancelled || p == TopUpPhaseExpired }

// Final reports whether p ends the top-up.
func (p TopUpPhase) Final() bool { return TopUpMoves.final(p) }

// phase is the rental's current phase.
func (r *rental) phase() Phase { return r.Status.Status }

// phase is the top-up's current phase.
func (t *topUp) phase() TopUpPhase { return t.Status.Status }

// Every move of a rental or a top-up is made here, by transition or one
// of its two forms, which take the move's write with it: the phase
// changes in memory and in the KdStatus search attribute (with the
// payment's asset and network noted since), and the status reaches
// PostgreSQL with an event (RecordOrderEvent: idempotent by event key, the
// status with its event in one transaction) or with the transaction of
// the activity that makes the move (a debit, a credit). A move the table
// does not allow is a bug: the workflow task fails (and is retried once
// the code is fixed) before anything is written, instead of writing a
// state the order cannot be in.
//
//   - transition: the state first, then the events that write it,
//     recorded now (as the reference app's updateStatus).
//   - transitionThen: the state first, then write, which writes it when
//     it can: the end of the period moves at once (no update sees an
//     active rental whose teardown began), and its status goes with the
//     revocation's event, once access is revoked.
//   - transitionOnWrite: write first, which writes the status itself; the
//     state moves once it succeeded, so a refused write moves nothing (a
//     balance debit, a closing refund, a top-up's credit).
//
// From vOneTransition the move to paid when payments cover the order is a
// transition like the others: the covering payment's event carries the
// status (the "paid" event the main flow records next writes it again,
// with the payment method and date). Before, the move was made alone
// (movedBeforeVOneTransition), written by that "paid" event only.

// transition moves the rental to phase to and records evs, in order, the
// last one carrying the status (those before it are a support action's
// audit entry that goes with the move). Staying in the same phase upserts
// nothing; the event writes the status again. The caller holds mu.
func (r *rental) transition(ctx workflow.Context, to Phase, evs ...activities.OrderEvent) error {
	return r.transitionThen(ctx, to, func(status string) error {
		evs[len(evs)-1].Status = status
		return recordAll(ctx, r.record, evs)
	})
}

// transitionThen moves the rental to phase to, then runs write, which
// writes the status it is given.
func (r *rental) transitionThen(ctx workflow.Context, to Phase, write func(status string) error) error {
	if r.phase() != to {
		r.setPhase(ctx, to)
	}
	return write(string(to))
}

// transitionOnWrite runs write, which writes the status it is given, and
// moves the rental to phase to once it succeeded.
func (r *rental) transitionOnWrite(ctx workflow.Context, to Phase, write func(status string) error) error {
	r.mustMove(to)
	if err := write(string(to)); err != nil {
		return err
	}
	if r.phase() != to {
		r.setPhase(ctx, to)
	}
	return nil
}

// movedBeforeVOneTransition is the move to paid of an order covered by
// payments in a workflow started before vOneTransition: made at once, its
// status written by the "paid" event the main flow records next
// (recordPaid), as those histories' commands have it.
func (r *rental) movedBeforeVOneTransition(ctx workflow.Context) {
	r.setPhase(ctx, PhasePaid)
}

// mustMove panics on a move the table does not allow (see above).
func (r *rental) mustMove(to Phase) {
	if from := r.phase(); !from.CanMove(to) {
		panic(fmt.Sprintf("rental %s: no move from %s to %s", r.in.OrderRef, from, to))
	}
}

// setPhase moves the rental to phase to in memory and in its search
// attributes only; only the transitions above call it.
func (r *rental) setPhase(ctx workflow.Context, to Phase) {
	r.mustMove(to)
	r.Status.Status = to
	r.sa.setStatus(ctx, string(to))
}

// transition moves the top-up to phase to and records evs, the last one
// carrying the status, as the rental's does.
func (t *topUp) transition(ctx workflow.Context, to TopUpPhase, evs ...activities.TopUpEvent) error {
	if t.phase() != to {
		t.setPhase(ctx, to)
	}
	evs[len(evs)-1].Status = string(to)
	return recordAll(ctx, t.record, evs)
}

// transitionOnWrite runs write, which writes the status it is given, and
// moves the top-up to phase to once it succeeded (the credit:
// CreditTopUp writes it with the credit, in one transaction).
func (t *topUp) transitionOnWrite(ctx workflow.Context, to TopUpPhase, write func(status string) error) error {
	t.mustMove(to)
	if err := write(string(to)); err != nil {
		return err
	}
	if t.phase() != to {
		t.setPhase(ctx, to)
	}
	return nil
}

func (t *topUp) mustMove(to TopUpPhase) {
	if from := t.phase(); !from.CanMove(to) {
		panic(fmt.Sprintf("top-up %s: no move from %s to %s", t.in.TopUpRef, from, to))
	}
}

// setPhase moves the top-up to phase to in memory and in its search
// attributes only; only its transitions call it.
func (t *topUp) setPhase(ctx workflow.Context, to TopUpPhase) {
	t.mustMove(to)
	t.Status.Status = to
	t.sa.setStatus(ctx, string(to))
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
