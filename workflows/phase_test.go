package workflows

import (
	"os"
	"slices"
	"strings"
	"testing"

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
	r := &rental{in: RentalInput{OrderRef: "KD-PHASE00001"}, RentalState: RentalState{Status: RentalStatus{Status: string(PhaseEnded)}}}
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

// README's phase diagram is the table's: every phase listed, every move
// drawn, nothing else.
func TestREADMEPhaseDiagram(t *testing.T) {
	if len(rentalPhases) != len(RentalMoves) {
		t.Fatalf("the diagram lists %d phases, the table has %d", len(rentalPhases), len(RentalMoves))
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// In the list item of the workflows package: indented by two spaces.
	block := "```mermaid\n" + movesMermaid() + "```"
	want := "  " + strings.ReplaceAll(block, "\n", "\n  ") + "\n"
	if !strings.Contains(string(readme), want) {
		t.Fatalf("README.md lacks the phase diagram of RentalMoves; put this block in its Architecture section:\n%s", want)
	}
}
