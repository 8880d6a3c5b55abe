package workflows

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// Every pair of phases is either a move of the table or refused; staying
// put is allowed; the final phases allow nothing else; every phase a move
// reaches is in the table.
func TestPhaseMoves(t *testing.T) {
	allowed := map[[2]Phase]bool{
		{PhaseAwaitingPayment, PhasePaymentDetected}: true, {PhaseAwaitingPayment, PhasePaid}: true,
		{PhaseAwaitingPayment, PhaseExpired}: true, {PhaseAwaitingPayment, PhaseCancelled}: true,
		{PhasePaymentDetected, PhaseAwaitingPayment}: true, {PhasePaymentDetected, PhasePaid}: true,
		{PhasePaymentDetected, PhaseExpired}: true,
		{PhasePaid, PhaseProvisioning}:       true, {PhasePaid, PhaseAwaitingPayment}: true, {PhasePaid, PhasePaymentDetected}: true,
		{PhasePaid, PhaseWaitingForMachine}:         true,
		{PhaseWaitingForMachine, PhaseProvisioning}: true, {PhaseWaitingForMachine, PhaseRefunded}: true,
		{PhaseWaitingForMachine, PhaseCancelled}: true,
		{PhaseProvisioning, PhaseActive}:         true, {PhaseProvisioning, PhaseProvisioningFailed}: true,
		{PhaseProvisioningFailed, PhaseProvisioning}: true, {PhaseProvisioningFailed, PhaseCancelled}: true,
		{PhaseProvisioningFailed, PhaseRefunded}: true,
		{PhaseActive, PhaseEnding}:               true, {PhaseEnding, PhaseEnded}: true,
	}
	var phases []Phase
	for p := range RentalMoves {
		phases = append(phases, p)
	}
	slices.Sort(phases)
	if len(phases) != 12 {
		t.Fatalf("%d phases in the table, want the 12 order statuses", len(phases))
	}
	refused := 0
	for _, from := range phases {
		for _, to := range phases {
			want := from == to || allowed[[2]Phase{from, to}]
			if got := from.CanMove(to); got != want {
				t.Errorf("%s -> %s: allowed %v, want %v", from, to, got, want)
			}
			if !want {
				refused++
			}
			if _, known := RentalMoves[to]; !known {
				t.Errorf("%s is reached but has no entry", to)
			}
		}
		if final := len(RentalMoves[from]) == 0; from.Final() != final {
			t.Errorf("%s: final %v, want %v", from, from.Final(), final)
		}
	}
	if refused != 12*12-12-len(allowed) {
		t.Fatalf("%d refused moves, want %d", refused, 12*12-12-len(allowed))
	}
	for _, p := range []Phase{PhaseEnded, PhaseCancelled, PhaseExpired, PhaseRefunded} {
		if !p.Final() {
			t.Errorf("%s is not final", p)
		}
	}
	if Phase("ghost").CanMove(PhasePaid) || Phase("ghost").Final() {
		t.Error("an unknown phase moves or ends")
	}
}

// A move the table refuses panics: the workflow task fails rather than
// writing a state the order cannot be in.
func TestTransitionRefusesAMoveOutsideTheTable(t *testing.T) {
	r := &rental{in: RentalInput{OrderRef: "KD-PHASE00001"}, RentalState: RentalState{Status: RentalStatus{Status: PhaseEnded}}}
	defer func() {
		if recover() == nil {
			t.Fatal("ended -> active did not panic")
		}
		if r.phase() != PhaseEnded {
			t.Fatalf("phase %s after a refused move", r.phase())
		}
	}()
	_ = r.transition(nil, PhaseActive, activities.OrderEvent{Key: "access", Kind: domain.EventAccessAvailable})
}

// README's phase diagrams are the tables': the rental's, then the
// top-up's just after it, every phase listed, every move drawn, nothing
// else.
func TestREADMEPhaseDiagram(t *testing.T) {
	if len(rentalPhases) != len(RentalMoves) {
		t.Fatalf("the diagram lists %d phases, the table has %d", len(rentalPhases), len(RentalMoves))
	}
	if len(topUpPhases) != len(TopUpMoves) {
		t.Fatalf("the top-up's diagram lists %d phases, the table has %d", len(topUpPhases), len(TopUpMoves))
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// In the list item of the workflows package: indented by two spaces.
	indent := func(diagram string) string {
		return "  " + strings.ReplaceAll("```mermaid\n"+diagram+"```", "\n", "\n  ") + "\n"
	}
	want := indent(movesMermaid()) + "\n" + indent(topUpMovesMermaid())
	if !strings.Contains(string(readme), want) {
		t.Fatalf("README.md lacks the phase diagrams of RentalMoves and TopUpMoves; put these blocks in its Architecture section:\n%s", want)
	}
}

// A top-up's moves: each pair of phases is a move of the table or
// refused, the credited, expired and cancelled top-ups move no more.
func TestTopUpPhaseMoves(t *testing.T) {
	allowed := map[[2]TopUpPhase]bool{
		{TopUpPhaseAwaitingPayment, TopUpPhasePaymentDetected}: true, {TopUpPhaseAwaitingPayment, TopUpPhaseCredited}: true,
		{TopUpPhaseAwaitingPayment, TopUpPhaseExpired}: true, {TopUpPhaseAwaitingPayment, TopUpPhaseCancelled}: true,
		{TopUpPhasePaymentDetected, TopUpPhaseAwaitingPayment}: true, {TopUpPhasePaymentDetected, TopUpPhaseCredited}: true,
		{TopUpPhasePaymentDetected, TopUpPhaseExpired}: true,
	}
	for _, from := range topUpPhases {
		for _, to := range topUpPhases {
			if got, want := from.CanMove(to), from == to || allowed[[2]TopUpPhase{from, to}]; got != want {
				t.Errorf("%s -> %s: allowed %v, want %v", from, to, got, want)
			}
		}
		if final := len(TopUpMoves[from]) == 0; from.Final() != final {
			t.Errorf("%s: final %v, want %v", from, from.Final(), final)
		}
	}
	tu := &topUp{in: TopUpInput{TopUpRef: "TU-PHASE00001"}, TopUpState: TopUpState{Status: TopUpStatus{Status: TopUpPhaseCredited}}}
	defer func() {
		if recover() == nil {
			t.Fatal("credited -> expired did not panic")
		}
		if tu.phase() != TopUpPhaseCredited {
			t.Fatalf("phase %s after a refused move", tu.phase())
		}
	}()
	_ = tu.transition(nil, TopUpPhaseExpired, activities.TopUpEvent{Key: "expired", Kind: domain.EventExpired})
}

// From vOneTransition the move to paid is a transition like the others:
// the covering payment's event carries the status, and the "paid" event
// the main flow records next writes it again with the method and date.
// Before, only the "paid" event carried it (recorded histories).
func (s *RentalWorkflowSuite) TestCoveringPaymentWritesThePaidMove() {
	s.coveringWrites(0, string(PhasePaid))
}

func (s *RentalWorkflowSuite) TestCoveringPaymentBeforeOneTransition() {
	s.coveringWrites(int(vHandOver), "")
}

func (s *RentalWorkflowSuite) coveringWrites(maxVersion int, status string) {
	s.mockAllMachine()
	s.signalAt(time.Minute, SignalPaymentConfirmed, payment("tx1", totalCents))
	in := rentalInput(3)
	in.Config.MaxVersion = maxVersion
	st := s.run(in)

	s.Equal(PhaseEnded, st.Status)
	confirmed := s.eventsOf(domain.EventPaymentConfirmed)
	s.Require().Len(confirmed, 1)
	s.Equal(status, confirmed[0].Status)
	paid := s.eventsOf(domain.EventPaid)
	s.Require().Len(paid, 1)
	s.Equal(string(PhasePaid), paid[0].Status)
	s.Equal(methodCrypto, paid[0].PaymentMethod)
}
