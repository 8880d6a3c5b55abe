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
		q.API.StreamsPerSession != 10 || q.API.StreamsPerAccount != 30 {
		t.Fatalf("defaults: %+v", q)
	}
	q, err = QuotasFromEnv(env(map[string]string{
		"KERNODECK_UNPAID_HOLDS_PER_ACCOUNT": "1", "KERNODECK_HOLD_FIRST": "5m", "KERNODECK_STREAMS_PER_SESSION": "3",
	}))
	if err != nil || q.HoldsPerAccount != 1 || q.HoldFirst != 5*time.Minute || q.API.StreamsPerSession != 3 {
		t.Fatalf("settings: %+v %v", q, err)
	}
	for k, v := range map[string]string{
		"KERNODECK_UNPAID_HOLDS_PER_NETWORK": "0", "KERNODECK_MAX_UNPAID_ORDERS": "-1",
		"KERNODECK_HOLD_FIRST": "0s", "KERNODECK_STREAMS_PER_ACCOUNT": "many",
	} {
		if _, err := QuotasFromEnv(env(map[string]string{k: v})); err == nil {
			t.Errorf("%s=%s accepted", k, v)
		}
	}
}
