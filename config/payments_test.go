package config

import (
	"strings"
	"testing"
	"time"
)

// The value tolerance defaults to 2 % and reads a percentage or a fraction;
// the rate sample interval defaults to 5 minutes and stays within the
// hour around a payment that bounds its value. Anything else fails at
// startup, naming the variable.
func TestValueToleranceAndRateSampleInterval(t *testing.T) {
	c, err := PaymentsFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.ValueTolerance.String() != "0.02" || c.RateSampleInterval != 5*time.Minute {
		t.Fatalf("defaults: tolerance %s, sample every %s", c.ValueTolerance, c.RateSampleInterval)
	}
	for in, want := range map[string]string{"5%": "0.05", "0.5 %": "0.005", "0.01": "0.01"} {
		c, err := PaymentsFromEnv(env(map[string]string{"KERNODECK_VALUE_TOLERANCE": in}))
		if err != nil || c.ValueTolerance.String() != want {
			t.Errorf("KERNODECK_VALUE_TOLERANCE=%q: %s %v, want %s", in, c.ValueTolerance, err, want)
		}
	}
	if c, err := PaymentsFromEnv(env(map[string]string{"KERNODECK_RATE_SAMPLE_INTERVAL": "1m"})); err != nil || c.RateSampleInterval != time.Minute {
		t.Errorf("KERNODECK_RATE_SAMPLE_INTERVAL=1m: %s %v", c.RateSampleInterval, err)
	}
	for k, bad := range map[string][]string{
		"KERNODECK_VALUE_TOLERANCE":      {"2", "0", "-2%", "60%", "deux"},
		"KERNODECK_RATE_SAMPLE_INTERVAL": {"0s", "-1m", "61m", "5"},
	} {
		for _, v := range bad {
			if _, err := PaymentsFromEnv(env(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), k) {
				t.Errorf("%s=%q: %v, want refused", k, v, err)
			}
		}
	}
}
