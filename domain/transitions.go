package domain

import "time"

// The transitions a workflow writes: one per timeline event, with what it
// changes and the money it moves (applied by the store in one transaction).

// OrderEvent is one transition of an order, written by its workflow only:
// a timeline entry and everything it causes (status and amounts, a ledger
// posting, amounts put in or taken from support's queue), applied in one
// transaction, once per (OrderRef, Key).
type OrderEvent struct {
	OrderRef string
	Key      string
	Kind     string
	Message  string // French, shown on the tracking
	Data     map[string]any
	At       time.Time // workflow time of the event

	// Order changes (nil / "" = unchanged).
	Status        string
	PaidCents     *int64 // cumulative
	RefundedCents *int64 // cumulative order refunds
	UnbackedCents *int64 // cumulative attributions naming no received payment
	// ShortfallCents: cumulative order refunds paid out on payments a deep
	// reorganisation removed since (in their flags' shortfall).
	ShortfallCents *int64
	PaymentMethod  string
	PaidAt         *time.Time
	PeriodStart    *time.Time
	PeriodEnd      *time.Time
	EndedAt        *time.Time

	Posting    *Posting
	Exceptions []NewException
	Use        *ExceptionUse
	Reversal   *Reversal
}

// MovesMoney reports whether the transition posts to the ledger or touches
// support's queue: only such a transition can be refused (a balance short,
// a queued amount already settled).
func (ev OrderEvent) MovesMoney() bool {
	return ev.Posting != nil || len(ev.Exceptions) > 0 || ev.Use != nil || ev.Reversal != nil
}

// ChangesOrder reports whether the transition sets any of the order's own
// fields (a provisioning step's start or end sets none).
func (ev OrderEvent) ChangesOrder() bool {
	return ev.Status != "" || ev.PaidCents != nil || ev.RefundedCents != nil || ev.UnbackedCents != nil ||
		ev.ShortfallCents != nil || ev.PaymentMethod != "" || ev.PaidAt != nil || ev.PeriodStart != nil ||
		ev.PeriodEnd != nil || ev.EndedAt != nil
}

// TopUpEvent is one transition of a top-up (see OrderEvent).
type TopUpEvent struct {
	TopUpRef   string
	Key        string
	Kind       string
	Message    string
	Data       map[string]any
	At         time.Time
	Status     string
	CreditedAt *time.Time
	// ReceivedCents is what the workflow has counted toward the top-up
	// when it writes this transition (nil: unchanged).
	ReceivedCents *int64

	Posting    *Posting
	Exceptions []NewException
	Use        *ExceptionUse
	Reversal   *Reversal
}
