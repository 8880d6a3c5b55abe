package config

import (
	"fmt"
	"os"
	"time"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// Quotas are the limits on what a free account, or a client network, can
// create or hold (issue 19). The API takes API; the worker the holds.
type Quotas struct {
	API                 api.Quotas
	RegistrationsPerNet int           // KERNODECK_REGISTRATIONS_PER_NETWORK (per hour)
	HoldsPerAccount     int           // KERNODECK_UNPAID_HOLDS_PER_ACCOUNT
	HoldsPerNetwork     int           // KERNODECK_UNPAID_HOLDS_PER_NETWORK
	HoldFirst           time.Duration // KERNODECK_HOLD_FIRST
	HoldShare           int           // KERNODECK_UNPAID_HOLD_SHARE (percent, 0 to 100)
	HoldBudget          time.Duration // KERNODECK_UNPAID_HOLD_BUDGET (per 24 hours)
}

// QuotasFromEnv reads the quotas; each count must be at least 1, each
// duration positive, the share of unpaid holds from 0 to 100 percent.
func QuotasFromEnv(getenv func(string) string) (Quotas, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	p := parser{getenv: getenv}
	q := Quotas{
		API: api.Quotas{
			UnpaidOrdersPerAccount:     p.int("KERNODECK_MAX_UNPAID_ORDERS", api.DefaultUnpaidOrdersPerAccount),
			OpenTopUpsPerAccount:       p.int("KERNODECK_MAX_OPEN_TOPUPS", api.DefaultOpenTopUpsPerAccount),
			PaymentRequestsPerHour:     p.int("KERNODECK_PAYMENT_REQUESTS_PER_HOUR", api.DefaultPaymentRequestsPerHour),
			SupportRequestsPerDay:      p.int("KERNODECK_SUPPORT_REQUESTS_PER_DAY", api.DefaultSupportRequestsPerDay),
			SupportRequestsPerOrderDay: p.int("KERNODECK_SUPPORT_REQUESTS_PER_ORDER_PER_DAY", api.DefaultSupportRequestsPerOrderDay),
			StreamsPerSession:          p.int("KERNODECK_STREAMS_PER_SESSION", api.DefaultStreamsPerSession),
			StreamsPerAccount:          p.int("KERNODECK_STREAMS_PER_ACCOUNT", api.DefaultStreamsPerAccount),
		},
		RegistrationsPerNet: p.int("KERNODECK_REGISTRATIONS_PER_NETWORK", api.DefaultRegistrationsPerIP),
		HoldsPerAccount:     p.int("KERNODECK_UNPAID_HOLDS_PER_ACCOUNT", domain.DefaultUnpaidHolds),
		HoldsPerNetwork:     p.int("KERNODECK_UNPAID_HOLDS_PER_NETWORK", domain.DefaultUnpaidHolds),
		HoldFirst:           p.dur("KERNODECK_HOLD_FIRST", domain.DefaultHoldFirst),
		HoldShare:           p.int("KERNODECK_UNPAID_HOLD_SHARE", domain.DefaultUnpaidHoldShare),
		HoldBudget:          p.dur("KERNODECK_UNPAID_HOLD_BUDGET", domain.DefaultUnpaidHoldBudget),
	}
	if p.err != nil {
		return Quotas{}, p.err
	}
	if q.HoldShare < 0 || q.HoldShare > 100 {
		return Quotas{}, fmt.Errorf("KERNODECK_UNPAID_HOLD_SHARE must be a percentage from 0 to 100")
	}
	for name, v := range map[string]int{
		"KERNODECK_MAX_UNPAID_ORDERS":                  q.API.UnpaidOrdersPerAccount,
		"KERNODECK_MAX_OPEN_TOPUPS":                    q.API.OpenTopUpsPerAccount,
		"KERNODECK_PAYMENT_REQUESTS_PER_HOUR":          q.API.PaymentRequestsPerHour,
		"KERNODECK_SUPPORT_REQUESTS_PER_DAY":           q.API.SupportRequestsPerDay,
		"KERNODECK_SUPPORT_REQUESTS_PER_ORDER_PER_DAY": q.API.SupportRequestsPerOrderDay,
		"KERNODECK_STREAMS_PER_SESSION":                q.API.StreamsPerSession,
		"KERNODECK_STREAMS_PER_ACCOUNT":                q.API.StreamsPerAccount,
		"KERNODECK_REGISTRATIONS_PER_NETWORK":          q.RegistrationsPerNet,
		"KERNODECK_UNPAID_HOLDS_PER_ACCOUNT":           q.HoldsPerAccount,
		"KERNODECK_UNPAID_HOLDS_PER_NETWORK":           q.HoldsPerNetwork,
	} {
		if v < 1 {
			return Quotas{}, fmt.Errorf("%s must be at least 1", name)
		}
	}
	return q, nil
}
