package config

import (
	"testing"
	"time"
)

func TestQuotasDefaultsAndSettings(t *testing.T) {
	q, err := QuotasFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if q.HoldsPerAccount != 2 || q.HoldsPerNetwork != 2 || q.HoldFirst != 20*time.Minute || q.RegistrationsPerNet != 10 ||
		q.API.UnpaidOrdersPerAccount != 5 || q.API.OpenTopUpsPerAccount != 3 || q.API.PaymentRequestsPerHour != 6 ||
		q.API.SupportRequestsPerDay != 10 || q.API.SupportRequestsPerOrderDay != 3 ||
		q.API.StreamsPerSession != 10 || q.API.StreamsPerAccount != 30 ||
		q.HoldShare != 50 || q.HoldBudget != 2*time.Hour {
		t.Fatalf("defaults: %+v", q)
	}
	q, err = QuotasFromEnv(env(map[string]string{
		"KERNODECK_UNPAID_HOLDS_PER_ACCOUNT": "1", "KERNODECK_HOLD_FIRST": "5m", "KERNODECK_STREAMS_PER_SESSION": "3",
		"KERNODECK_UNPAID_HOLD_SHARE": "0", "KERNODECK_UNPAID_HOLD_BUDGET": "90m",
	}))
	if err != nil || q.HoldsPerAccount != 1 || q.HoldFirst != 5*time.Minute || q.API.StreamsPerSession != 3 ||
		q.HoldShare != 0 || q.HoldBudget != 90*time.Minute {
		t.Fatalf("settings: %+v %v", q, err)
	}
	for k, v := range map[string]string{
		"KERNODECK_UNPAID_HOLDS_PER_NETWORK": "0", "KERNODECK_MAX_UNPAID_ORDERS": "-1",
		"KERNODECK_HOLD_FIRST": "0s", "KERNODECK_STREAMS_PER_ACCOUNT": "many",
		"KERNODECK_UNPAID_HOLD_SHARE": "101", "KERNODECK_UNPAID_HOLD_BUDGET": "0s",
	} {
		if _, err := QuotasFromEnv(env(map[string]string{k: v})); err == nil {
			t.Errorf("%s=%s accepted", k, v)
		}
	}
}
