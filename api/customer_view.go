package api

import (
	"bytes"
	"encoding/json"

	"github.com/kernodeck/kernodeck/domain"
)

// provisioningFailedForCustomer is what a customer reads of a provisioning
// failure: the error itself (host names, addresses, remote output) is for
// support, who sees the full timeline.
const provisioningFailedForCustomer = "La préparation de la machine a échoué. Le support est prévenu : il relancera la préparation ou vous remboursera."

// internalDataKeys never reach a customer: raw errors and remote output.
var internalDataKeys = []string{"error", "stderr", "stdout", "detail", "host", "hostname", "ip"}

// quotedFilterKeys are internalDataKeys and "agent" as JSON strings.
var quotedFilterKeys = func() [][]byte {
	var out [][]byte
	for _, k := range append([]string{"agent"}, internalDataKeys...) {
		out = append(out, []byte(`"`+k+`"`))
	}
	return out
}()

// cleanForCustomer reports whether data, a JSON object, holds no key the
// customer view removes (no such string appears at all): most events, kept
// as they are without being decoded and encoded again.
func cleanForCustomer(data []byte) bool {
	if data[0] != '{' {
		return false
	}
	for _, k := range quotedFilterKeys {
		if bytes.Contains(data, k) {
			return false
		}
	}
	return true
}

// customerTimeline is a timeline as its customer sees it: provisioning
// failures as a fixed French message, no raw error, and for what support
// did, neither the agent's name nor the agent's internal reason.
func customerTimeline(events []domain.TimelineEvent) []domain.TimelineEvent {
	out := make([]domain.TimelineEvent, len(events))
	for i, ev := range events {
		out[i] = customerEvent(ev)
	}
	return out
}

func customerEvent(ev domain.TimelineEvent) domain.TimelineEvent {
	if ev.Kind == domain.EventProvisioningFailed {
		ev.Message = provisioningFailedForCustomer
	}
	if len(ev.Data) == 0 || cleanForCustomer(ev.Data) {
		return ev
	}
	// Values stay raw: only top-level keys are filtered (decoding them
	// would cost most of an order read).
	var data map[string]json.RawMessage
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		ev.Data = nil // not an object: nothing a customer needs
		return ev
	}
	for _, k := range internalDataKeys {
		delete(data, k)
	}
	if _, bySupport := data["agent"]; bySupport {
		delete(data, "agent")
		delete(data, "reason")
	}
	raw, err := json.Marshal(data)
	if err != nil {
		ev.Data = nil
		return ev
	}
	ev.Data = raw
	return ev
}
