package workflows

import (
	"slices"
	"testing"

	"github.com/kernodeck/kernodeck/domain"
)

// testRental is a rental in phase, as its updates' validators see it;
// paid is what it counted (refundable, unless nothing).
func testRental(phase Phase, paid int64) *rental {
	r := &rental{
		in: RentalInput{OrderRef: "KD-OFFERS0001", TotalCents: 2357},
		RentalState: RentalState{
			Status:     RentalStatus{OrderRef: "KD-OFFERS0001", Status: phase, PaidCents: paid},
			payeeState: payeeState{Payments: newPaymentLedger(), Actions: map[int64]bool{}},
		},
	}
	if phase == PhasePaymentDetected {
		r.Payments.Pending["bitcoin:tx:0"] = true // what the phase means
	}
	r.intakeRun = intakeRun{kind: domain.TargetOrder, ref: r.in.OrderRef, amount: r.in.TotalCents, st: &r.payeeState, p: r}
	return r
}

// The support actions each phase offers are exactly those its validators
// can accept there, each in the state most favourable to it (nothing
// counted to cancel, money counted to refund): the console offers no
// action the workflow is sure to refuse, and hides none it could take.
func TestRentalSupportActions(t *testing.T) {
	const id = 7
	validators := map[string]func(p Phase) error{
		domain.ActionAttributePayment: func(p Phase) error {
			return testRental(p, 0).validateAttribution(Attribution{ActionID: id, Agent: "a", Reason: "r"})
		},
		domain.ActionExtend: func(p Phase) error {
			return testRental(p, 2357).validateExtend(Extension{ActionID: id, Agent: "a", Days: 1, Reason: "r"})
		},
		domain.ActionEndEarly: func(p Phase) error {
			return testRental(p, 2357).validateEndEarly(SupportAction{ActionID: id, Agent: "a", Reason: "r"})
		},
		domain.ActionRetryProvisioning: func(p Phase) error {
			return testRental(p, 2357).validateRetry(SupportAction{ActionID: id, Agent: "a", Reason: "r"})
		},
		domain.ActionCancel: func(p Phase) error {
			return testRental(p, 0).validateCancel(CancelRequest{By: "support", ActionID: id, Agent: "a", Reason: "r"})
		},
		domain.ActionRefund: func(p Phase) error {
			return testRental(p, 2357).validateRefund(Refund{ActionID: id, Agent: "a", AmountCents: 100, Reason: "r"})
		},
	}
	if len(RentalSupportActions) != len(RentalMoves) {
		t.Fatalf("%d phases offer support actions, the table has %d", len(RentalSupportActions), len(RentalMoves))
	}
	for _, p := range rentalPhases {
		offered := SupportActionsFor(domain.TargetOrder, string(p))
		if p.Final() {
			// The workflow ends with its final phase: Temporal refuses any
			// update (wfclient: «Ce dossier est clos»).
			if len(offered) != 0 {
				t.Errorf("final phase %s offers %v", p, offered)
			}
			continue
		}
		for action, validate := range validators {
			err := validate(p)
			if want := slices.Contains(offered, action); (err == nil) != want {
				t.Errorf("%s, %s: offered %v, validator says %v", p, action, want, err)
			}
		}
		for _, a := range offered {
			if validators[a] == nil {
				t.Errorf("%s offers %s, which has no validator", p, a)
			}
		}
	}
	if got := SupportActionsFor(domain.TargetOrder, string(PhaseCancelled)); len(got) != 0 {
		t.Fatalf("a cancelled order offers %v", got)
	}
}

// A top-up's: attribution while it awaits payment, cancellation while
// nothing was seen, none once credited or closed.
func TestTopUpSupportActions(t *testing.T) {
	for _, st := range topUpPhases {
		tu := &topUp{in: TopUpInput{TopUpRef: "TU-OFFERS0001", AmountCents: 10000}, TopUpState: TopUpState{Status: TopUpStatus{TopUpRef: "TU-OFFERS0001", Status: st},
			payeeState: payeeState{Payments: newPaymentLedger(), Actions: map[int64]bool{}}}}
		tu.intakeRun = intakeRun{kind: domain.TargetTopUp, ref: "TU-OFFERS0001", amount: 10000, st: &tu.payeeState, p: tu}
		offered := SupportActionsFor(domain.TargetTopUp, string(st))
		for action, err := range map[string]error{
			domain.ActionAttributePayment: tu.validateAttribution(Attribution{ActionID: 7, Agent: "a", Reason: "r"}),
			domain.ActionCancel:           tu.validateCancel(CancelRequest{By: "support", ActionID: 7, Agent: "a", Reason: "r"}),
		} {
			if want := slices.Contains(offered, action); (err == nil) != want {
				t.Errorf("%s, %s: offered %v, validator says %v", st, action, want, err)
			}
		}
	}
}
