package config

import (
	"testing"
	"time"
)

func TestQueueAlertAfter(t *testing.T) {
	if d, err := QueueAlertAfterFromEnv(env(nil)); err != nil || d != 30*time.Minute {
		t.Fatalf("default: %v %v, want 30m", d, err)
	}
	if d, err := QueueAlertAfterFromEnv(env(map[string]string{"KERNODECK_QUEUE_ALERT_AFTER": "1h15m"})); err != nil || d != 75*time.Minute {
		t.Fatalf("1h15m: %v %v", d, err)
	}
	for _, v := range []string{"0s", "-5m", "soon"} {
		if _, err := QueueAlertAfterFromEnv(env(map[string]string{"KERNODECK_QUEUE_ALERT_AFTER": v})); err == nil {
			t.Errorf("KERNODECK_QUEUE_ALERT_AFTER=%s accepted", v)
		}
	}
}
