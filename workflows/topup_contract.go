package workflows

import (
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// TopUpWorkflowID is the workflow ID of a top-up.
func TopUpWorkflowID(topUpRef string) string { return domain.TopUpWorkflowID(topUpRef) }

// AddressedTo is the workflow a start input is for: the top-up's.
func (in TopUpInput) AddressedTo() string { return TopUpWorkflowID(in.TopUpRef) }

// TopUpInput starts a TopUpWorkflow.
type TopUpInput struct {
	TopUpRef    string
	AccountID   int64
	AmountCents int64
	// PaymentTimeout expires an unpaid top-up; 0 means DefaultTopUpTimeout.
	PaymentTimeout time.Duration
	// MaxHistory: see RentalConfig.MaxHistory.
	MaxHistory int `json:",omitempty"`
	// MaxVersion: see RentalConfig.MaxVersion.
	MaxVersion int `json:",omitempty"`
	// Carry is the state of the previous run (continue-as-new).
	Carry *TopUpState `json:",omitempty"`
	// ExtensionRef is the rental extension the top-up pays, of order
	// OrderRef: once credited, the rental's workflow is asked to apply it
	// (vExtension).
	ExtensionRef string `json:",omitempty"`
	OrderRef     string `json:",omitempty"`
}

// TopUpStatus is what QueryStatus returns for a top-up.
type TopUpStatus struct {
	TopUpRef          string
	Status            TopUpPhase
	ReceivedCents     int64
	PaymentsConfirmed []string
	CreditedAt        time.Time
}

// NewTopUpInput builds the workflow input from a stored top-up.
func NewTopUpInput(t domain.TopUp, timeout time.Duration) TopUpInput {
	in := TopUpInput{TopUpRef: t.Ref, AccountID: t.AccountID, AmountCents: t.AmountCents, PaymentTimeout: timeout}
	if t.ExtensionRef != nil && t.ExtensionOrderRef != nil {
		in.ExtensionRef, in.OrderRef = *t.ExtensionRef, *t.ExtensionOrderRef
	}
	return in
}
