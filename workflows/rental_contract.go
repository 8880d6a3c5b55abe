package workflows

import (
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// Rental workflow updates (besides UpdateAttributePayment and UpdateCancel).
const (
	// UpdatePayFromBalance debits the customer's balance for the order's total;
	// rejected with ECodeInsufficient if the balance does not cover it.
	UpdatePayFromBalance = "pay-from-balance"
	// UpdateExtend moves the end of the period (Extension).
	UpdateExtend = "extend"
	// UpdateEndEarly ends an active rental now (SupportAction).
	UpdateEndEarly = "end-early"
	// UpdateRetryProvisioning retries a failed provisioning (SupportAction).
	UpdateRetryProvisioning = "retry-provisioning"
	// UpdateRefund refunds an amount to the customer's balance (Refund).
	UpdateRefund = "refund"
)

// RentalWorkflowID is the workflow ID of an order's rental.
func RentalWorkflowID(orderRef string) string { return domain.RentalWorkflowID(orderRef) }

// PayFromBalance is UpdatePayFromBalance's argument: only its address,
// since every update takes exactly one sealed argument naming its workflow.
type PayFromBalance struct {
	domain.Addressed
}

// AddressedTo is the workflow a start input is for: the order's rental.
func (in RentalInput) AddressedTo() string { return RentalWorkflowID(in.OrderRef) }

// RentalInput starts a RentalWorkflow.
type RentalInput struct {
	OrderRef     string
	AccountID    int64
	GPUModel     string
	Lots         int
	GPUsPerLot   int
	TotalGPUs    int
	DurationDays int
	Preset       string
	TotalCents   int64
	Config       RentalConfig
	// Carry is the state of the previous run (continue-as-new); nil at
	// the first run.
	Carry *RentalState `json:",omitempty"`
}

// RentalConfig is captured at start; zero fields take the defaults.
type RentalConfig struct {
	// UnpaidTimeout closes an order still unpaid after this long.
	UnpaidTimeout time.Duration
	// ReminderOffsets: reminders go out this long before the end.
	ReminderOffsets []time.Duration
	// ProvisioningAttempts of the provisioning (per step before
	// vOneProvisioning) before waiting for support.
	ProvisioningAttempts int32
	// Day is the length of a rental day (0: 24 h). Only tests shorten it,
	// to run a whole 30-day rental on a real server in seconds.
	Day time.Duration `json:",omitempty"`
	// MaxHistory: past this many history events the workflow continues
	// as new at its next waiting point (0: DefaultMaxHistory).
	MaxHistory int `json:",omitempty"`
	// MaxVersion caps the command version the workflow records (0: its
	// worker's newest); set by the starter, see historyVersion.
	MaxVersion int `json:",omitempty"`
}

// RentalStatus is what QueryStatus returns for a rental.
type RentalStatus struct {
	OrderRef      string
	Status        Phase
	PaidCents     int64
	RefundedCents int64
	UnbackedCents int64 // attributed by support without a received payment
	// ShortfallCents are order refunds paid out on payments a deep
	// reorganisation removed since (flagged for support): not owed again
	// by the order, backed again if the payment is mined again.
	ShortfallCents int64 `json:",omitempty"`
	// RefundableCents is what the order's refund may still credit: counted
	// money received, less the excess queued for support and the refunds.
	RefundableCents   int64 `json:",omitempty"`
	PaymentMethod     string
	PaymentsSeen      []string // payment keys seen (not confirmed)
	PaymentsConfirmed []string // payment keys confirmed / attributed
	ProvisioningError string
	PeriodStart       time.Time
	PeriodEnd         time.Time
	RemindersSent     []time.Time // the reminders' scheduled times
	EndedAt           time.Time
}

// NewRentalInput builds the workflow input from a stored order.
func NewRentalInput(o domain.Order, cfg RentalConfig) RentalInput {
	return RentalInput{
		OrderRef:     o.Ref,
		AccountID:    o.AccountID,
		GPUModel:     o.Model,
		Lots:         o.Lots,
		GPUsPerLot:   o.GPUsPerLot,
		TotalGPUs:    o.TotalGPUs,
		DurationDays: o.DurationDays,
		Preset:       o.Preset,
		TotalCents:   o.TotalCents,
		Config:       cfg,
	}
}
