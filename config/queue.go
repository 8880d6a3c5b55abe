package config

import (
	"os"
	"time"
)

// DefaultQueueAlertAfter is how long a paid order may wait for a machine
// before the operators are alerted (KERNODECK_QUEUE_ALERT_AFTER).
const DefaultQueueAlertAfter = 30 * time.Minute

// QueueAlertAfterFromEnv reads KERNODECK_QUEUE_ALERT_AFTER: a paid order
// waiting longer than this for a machine counts in the metric
// kernodeck_machine_queue_overdue, which the alert
// KernodeckPaidOrderWaitingForMachine watches. A positive duration.
func QueueAlertAfterFromEnv(getenv func(string) string) (time.Duration, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	p := parser{getenv: getenv}
	d := p.dur("KERNODECK_QUEUE_ALERT_AFTER", DefaultQueueAlertAfter)
	if p.err != nil {
		return 0, p.err
	}
	return d, nil
}
