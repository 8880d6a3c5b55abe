package domain

import (
	"fmt"
	"time"
)

// Quota names: the label of the refusal metric and the scope of a quota's
// lock. A free account can create nothing without one of them bounding it.
const (
	QuotaUnpaidOrders         = "unpaid_orders_per_account"
	QuotaOpenTopUps           = "open_topups_per_account"
	QuotaOrderPaymentRequests = "payment_requests_per_order"
	QuotaTopUpPaymentRequests = "payment_requests_per_topup"
	QuotaClaims               = "claims_per_payment_request"
	QuotaSupportPerAccount    = "support_requests_per_account"
	QuotaSupportPerOrder      = "support_requests_per_order"
	QuotaStreamsPerSession    = "streams_per_session"
	QuotaStreamsPerAccount    = "streams_per_account"
	QuotaRegistrations        = "registrations_per_network"
)

// Limit is one quota: at most Max things within Window. For things that
// stay open (unpaid orders, open top-ups), Window is the longest they stay
// open, so the oldest frees its place at most Window after it was created.
// Max 0 means no limit.
type Limit struct {
	Quota  string
	Max    int
	Window time.Duration
}

// Validate checks the limit is usable.
func (l Limit) Validate() error {
	if l.Quota == "" || l.Max < 0 || (l.Max > 0 && l.Window <= 0) {
		return fmt.Errorf("limit %q: a name, max >= 0 and a positive window required", l.Quota)
	}
	return nil
}

// QuotaError is a refusal by a quota: a *Error (code ECodeQuota, French
// message) with the quota's name and how long to
// wait (the API's Retry-After). Nothing was written.
type QuotaError struct {
	Err        *Error
	Quota      string
	RetryAfter time.Duration
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("%s (quota %s, retry after %s)", e.Err.Error(), e.Quota, e.RetryAfter)
}

// Unwrap lets errors.As find the *Error.
func (e *QuotaError) Unwrap() error { return e.Err }

// QuotaExceeded builds a quota refusal with code ECodeQuota. retry is at
// least a second (a Retry-After of 0 would invite a busy loop).
func QuotaExceeded(quota string, retry time.Duration, message string) *QuotaError {
	return &QuotaError{Err: &Error{Code: ECodeQuota, Message: message}, Quota: quota, RetryAfter: max(retry, time.Second)}
}

// Unpaid capacity holds (issues 19, 35): a payment request may hold a
// whole host, so the first hold is short, a payment seen extends it, and
// what an unpaid request may hold is bounded; past the bounds the request
// is still made, without a hold (the machine goes to the first payment).
const (
	// DefaultHoldFirst is how long a payment request's hold lasts until a
	// payment to it is seen.
	DefaultHoldFirst = 20 * time.Minute
	// HoldGrace keeps a hold past its request's deadline once a payment is
	// seen: a payment made in time that a restarting watcher reports late
	// still finds its host.
	HoldGrace = 15 * time.Minute
	// DefaultUnpaidHolds is how many hosts one account, and one client
	// network, may hold for unpaid payment requests at once.
	DefaultUnpaidHolds = 2
	// DefaultUnpaidHoldShare is the percentage of a model's capacity that
	// holds of unpaid orders may take: the rest goes to whoever pays first.
	DefaultUnpaidHoldShare = 50
	// DefaultUnpaidHoldBudget is the unpaid hold time one account, and one
	// client network, may spend in 24 hours.
	DefaultUnpaidHoldBudget = 2 * time.Hour
	// HoldBudgetWindow is the window of that budget.
	HoldBudgetWindow = 24 * time.Hour
)

// HoldDecision is what a payment request's capacity hold came to: the
// request is made either way (held or not), unless nothing of the order's
// configuration is left to sell at all (no_capacity).
type HoldDecision struct {
	// Held: a machine is held for the order until Until.
	Held  bool
	Until time.Time
	// Taken: this call took the hold (a caller whose payment request is
	// then refused gives it back).
	Taken bool
	// Reason says, in French, why nothing is held (when !Held).
	Reason string
}

// MachineHold is what the customer reads of an unpaid order's hold, live:
// a machine is held until Until, or none is (the machine goes to the first
// payment received).
type MachineHold struct {
	Held  bool       `json:"held"`
	Until *time.Time `json:"until,omitempty"`
}
