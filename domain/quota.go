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
	// Hosts held for unpaid payment requests, per account or per client
	// network (the refusal's message says which).
	QuotaUnpaidHolds = "unpaid_holds"
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

// QuotaError is a refusal by a quota: a *Error (code ECodeQuota or
// ECodeHoldLimit, French message) with the quota's name and how long to
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

// Unpaid capacity holds (issue 19): a payment request holds a whole host,
// so the first hold is short and a payment seen extends it.
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
)
