package domain

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// Support actions are idempotent: each request carries a single-use key
// (the API's Idempotency-Key header), unique per agent. The same key sent
// again finds the first action sent under it and gets its answer back;
// nothing is carried out twice.

// IdempotencyKeyMin and IdempotencyKeyMax bound a key's length; its
// characters are ASCII letters, digits and . _ : - (IdempotencyKeyValid).
const (
	IdempotencyKeyMin = 8
	IdempotencyKeyMax = 128
)

// IdempotencyKeyValid reports whether k is a well-formed key (the same
// rule as support_actions' CHECK).
func IdempotencyKeyValid(k string) bool {
	if len(k) < IdempotencyKeyMin || len(k) > IdempotencyKeyMax {
		return false
	}
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// KeyedSupportAction is the action first recorded under an idempotency
// key, with the error it was answered (Answer: nil when it was done, or
// while it has no outcome).
type KeyedSupportAction struct {
	SupportAction
	Answer *Error
}

// SameRequest reports whether b asks for what a recorded: the same agent,
// action, target, reason and parameters (compared as JSON values).
func (a SupportAction) SameRequest(b SupportAction) bool {
	return a.Agent == b.Agent && a.Action == b.Action && a.TargetRef == b.TargetRef && a.Reason == b.Reason &&
		sameJSON(a.Params, b.Params)
}

func sameJSON(x, y json.RawMessage) bool {
	decode := func(raw json.RawMessage) (any, bool) {
		if len(bytes.TrimSpace(raw)) == 0 {
			raw = json.RawMessage("{}")
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		err := dec.Decode(&v)
		return v, err == nil
	}
	vx, okx := decode(x)
	vy, oky := decode(y)
	return okx && oky && reflect.DeepEqual(vx, vy)
}
