package recovery

// A recovered workflow starts "at its phase" the way a run continuing as
// new does: with the whole state it would have carried (RentalInput.Carry,
// TopUpInput.Carry), built here from what PostgreSQL holds. The state is
// written in the carry's JSON form, the one form the workflows keep stable
// across releases (the carries recorded in histories must still decode),
// and decoded with unknown fields refused: a name the workflows no longer
// know fails the recovery instead of being dropped.
//
// What the state needs and PostgreSQL keeps:
//   - the order's or top-up's row: status, amounts, payment method, the
//     period's dates;
//   - its payment requests (the highest request key numbers the next one,
//     and their deadlines bound the payment window);
//   - the chain payments to them, and the timeline's event keys, which
//     say which payment signals the workflow had handled (a payment is
//     counted once its "confirmed:" event is written): the ledger is
//     rebuilt from those, so a signal re-sent after the recovery is
//     counted once;
//   - the provisioning attempts' and reminders' event keys, so that the
//     recovered run writes the same keys again (idempotent) instead of
//     new ones.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/workflows"
)

// The waiting points a run starts at (the carry's "Phase").
const (
	atPayment            = "payment"
	atProvisioningFailed = "provisioning_failed"
	atPeriod             = "period"
	atMachine            = "waiting_for_machine"
	atCredited           = "credited"
)

// record is a target's facts beside its row.
type record struct{ postgres.TargetRecord }

func (f record) keySet() map[string]bool {
	m := make(map[string]bool, len(f.EventKeys))
	for _, k := range f.EventKeys {
		m[k] = true
	}
	return m
}

// requests is the number the next request key follows: the highest n of
// the keys "intent:n" (a key given back is used again, so it is not the
// count of requests).
func (f record) requests() int {
	n := 0
	for _, k := range f.RequestKeys {
		if v, err := strconv.Atoi(strings.TrimPrefix(k, "intent:")); err == nil && v > n {
			n = v
		}
	}
	return n
}

// payUntil is the end of the payment window: from the workflow's start,
// and never before a request's deadline (a reverted payment moves it).
func (f record) payUntil(start time.Time, window time.Duration) time.Time {
	until := start.Add(window)
	for _, it := range f.Intents {
		if it.Deadline.After(until) {
			until = it.Deadline
		}
	}
	return until
}

// lastMethod is the asset and network of the newest request, as the
// search attributes had them.
func (f record) lastMethod() (asset, network string) {
	if n := len(f.Intents); n > 0 {
		return f.Intents[n-1].Asset, f.Intents[n-1].Network // oldest first
	}
	return "", ""
}

// ledger is the payment intake's state rebuilt from the facts: the
// requests, and each payment as far as the workflow had handled it (its
// events written). seen and confirmed are the payment keys the status
// lists; counted are the payments counted toward the target. A payment
// whose newest state the workflow had not handled is left out: recovery
// has the watchers deliver every payment of the target again, and the
// ledger makes the ones it knows no-ops.
func (f record) ledger() (payee map[string]any, seen, confirmed []string) {
	keys := f.keySet()
	countedKeys, pending := map[string]bool{}, map[string]bool{}
	seenN, revertN := map[string]int{}, map[string]int{}
	requests := map[string]workflows.PaymentRequestRef{}
	var validUntil time.Time
	for _, it := range f.Intents {
		requests[it.ID] = workflows.PaymentRequestRef{Address: it.Address, Asset: it.Asset, Network: it.Network}
		if it.Deadline.After(validUntil) {
			validUntil = it.Deadline
		}
	}
	counted := []map[string]any{}
	for _, p := range f.Payments {
		key := domain.PaymentKey(p.Network, p.TxID, p.Index)
		if countedKeys[key] || pending[key] {
			continue
		}
		for n := 1; keys[domain.KeySeen(key, n)]; n++ {
			seenN[key] = n
		}
		for n := 1; keys[domain.KeyReverted(key, n)]; n++ {
			revertN[key] = n
		}
		switch {
		case p.State == "confirmed" && keys[domain.KeyConfirmed(key)]:
			countedKeys[key] = true
			confirmed = append(confirmed, key)
			if !p.Late {
				counted = append(counted, map[string]any{"P": event(p), "Cents": p.AmountCents})
			}
		case p.State == "seen" && !p.Late && seenN[key] > revertN[key]:
			pending[key] = true
			seen = append(seen, key)
		}
	}
	payee = map[string]any{
		"Payments": map[string]any{
			"Counted": countedKeys, "Pending": pending, "SeenN": seenN, "RevertN": revertN,
			"Gen": map[string]int{}, "Dust": map[string]int64{}, "Ver": map[string]int64{},
			"Requests": requests, "ValidUntil": validUntil,
		},
		"Actions": f.actions(),
		"Counted": counted,
	}
	return payee, seen, confirmed
}

func event(p domain.PendingPayment) workflows.PaymentEvent {
	return workflows.PaymentEvent{
		Addressed: domain.Addressed{Target: targetID(p.TargetKind, p.TargetRef)},
		Network:   p.Network, Asset: p.Asset, TxID: p.TxID, Index: p.Index, AmountBase: p.AmountBase,
		AmountCents: p.AmountCents, IntentID: p.IntentID, Address: p.Address, Late: p.Late,
	}
}

func targetID(kind, ref string) string {
	if kind == domain.TargetTopUp {
		return workflows.TopUpWorkflowID(ref)
	}
	return workflows.RentalWorkflowID(ref)
}

// actions are the support actions the workflow applied (their audit
// events, "support:<id>:<action>", are written with their effect): one
// re-sent after the recovery stays a no-op.
func (f record) actions() map[string]bool {
	m := map[string]bool{}
	for _, k := range f.EventKeys {
		rest, ok := strings.CutPrefix(k, "support:")
		if !ok {
			continue
		}
		id, _, _ := strings.Cut(rest, ":")
		if _, err := strconv.ParseInt(id, 10, 64); err == nil {
			m[id] = true
		}
	}
	return m
}

// maxAttempt is the highest provisioning attempt the timeline names
// ("prov:n:...").
func maxAttempt(keys []string) int {
	m := 0
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, "prov:")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ":")
		if v, err := strconv.Atoi(n); err == nil && v > m {
			m = v
		}
	}
	return m
}

// finalOrder are the statuses with nothing left to run.
var finalOrder = map[string]bool{
	domain.StatusEnded: true, domain.StatusCancelled: true, domain.StatusExpired: true, domain.StatusRefunded: true,
}

// rentalInput builds the input that starts order o's workflow again at the
// phase PostgreSQL shows (cfg: the starter's). at says where it starts
// (its waiting point, or "provision"); ok is false for an order with
// nothing left to run.
func rentalInput(o domain.Order, rec postgres.TargetRecord, cfg workflows.RentalConfig) (in workflows.RentalInput, at string, ok bool, err error) {
	if finalOrder[o.Status] {
		return in, "", false, nil
	}
	f := record{rec}
	window := cfg.UnpaidTimeout
	if window <= 0 {
		window = workflows.DefaultUnpaidTimeout
	}
	start := o.CreatedAt
	if o.WorkflowStartedAt != nil {
		start = *o.WorkflowStartedAt
	}
	payee, seen, confirmed := f.ledger()
	status := map[string]any{
		"OrderRef": o.Ref, "Status": o.Status, "PaidCents": o.PaidCents, "RefundedCents": o.RefundedCents,
		"UnbackedCents": o.UnbackedCents, "ShortfallCents": o.ShortfallCents,
		"PaymentsSeen": seen, "PaymentsConfirmed": confirmed,
	}
	st := map[string]any{
		"Status": status, "Reminded": map[string]bool{}, "Shortfalls": map[string]int64{},
		"Intents": f.requests(), "PayUntil": f.payUntil(start, window), "Runs": 0,
	}
	for k, v := range payee {
		st[k] = v
	}
	st["Asset"], st["Network"] = f.lastMethod()
	if o.PaymentMethod != nil {
		status["PaymentMethod"] = *o.PaymentMethod
		st["SupportPaid"] = *o.PaymentMethod == "support"
	}
	attempt := maxAttempt(f.EventKeys)
	// Days support added before the period started, which starts with
	// them (once active, the stored end has them).
	st["ExtraDays"] = f.ExtendedDays
	switch o.Status {
	case domain.StatusAwaitingPayment, domain.StatusPaymentDetected:
		at = atPayment
	case domain.StatusPaid:
		// Paid, provisioning not begun: the run finds the order paid at
		// once, writes its "paid" event (idempotent) and provisions.
		at = atPayment
		st["Over"] = max(0, o.PaidCents-o.TotalCents)
	case domain.StatusProvisioning:
		// The machine is taken again (a no-op when it was) and the
		// attempt under way made again under its own keys (the steps are
		// idempotent by order).
		at = "provision" // from the waiting point of a machine taken (Waiting false)
		st["Phase"] = atMachine
		st["ProvStarted"], st["Waiting"], st["Attempt"] = true, false, max(0, attempt-1)
		st["Over"] = max(0, o.PaidCents-o.TotalCents)
	case domain.StatusWaitingForMachine:
		at = atMachine
		st["ProvStarted"], st["Waiting"], st["Attempt"] = true, true, attempt
		st["Over"] = max(0, o.PaidCents-o.TotalCents)
	case domain.StatusProvisioningFailed:
		at = atProvisioningFailed
		st["ProvStarted"], st["Attempt"] = true, attempt
		st["Over"] = max(0, o.PaidCents-o.TotalCents)
	case domain.StatusActive, domain.StatusEnding:
		at = atPeriod
		st["ProvStarted"], st["Attempt"] = true, attempt
		st["Over"] = max(0, o.PaidCents-o.TotalCents)
		// An ending rental was being torn down: the teardown runs again
		// (idempotent) whatever its end date says.
		st["EndNow"] = o.Status == domain.StatusEnding
		if o.PeriodStart != nil {
			status["PeriodStart"] = *o.PeriodStart
		}
		if o.PeriodEnd == nil {
			return in, "", false, fmt.Errorf("order %s is %s without a period end", o.Ref, o.Status)
		}
		st["End"], status["PeriodEnd"] = *o.PeriodEnd, *o.PeriodEnd
		reminded := map[string]bool{}
		for _, k := range f.EventKeys {
			if strings.HasPrefix(k, "reminder:") {
				reminded[k] = true
			}
		}
		st["Reminded"] = reminded
	default:
		return in, "", false, fmt.Errorf("order %s: unknown status %q", o.Ref, o.Status)
	}
	if _, set := st["Phase"]; !set {
		st["Phase"] = at
	}
	in = workflows.NewRentalInput(o, cfg)
	if err := decodeStrict(st, &in.Carry); err != nil {
		return in, "", false, fmt.Errorf("order %s: %w", o.Ref, err)
	}
	return in, at, true, nil
}

// topUpInput builds the input that starts top-up t's workflow again
// (timeout: the starter's): awaiting payment with its requests and what
// it received, or, credited, listening for late payments until its window
// ends. ok is false when nothing is left to run at now.
func topUpInput(t domain.TopUp, rec postgres.TargetRecord, timeout time.Duration, now time.Time) (in workflows.TopUpInput, at string, ok bool, err error) {
	f := record{rec}
	window := timeout
	if window <= 0 {
		window = workflows.DefaultTopUpTimeout
	}
	start := t.CreatedAt
	if t.WorkflowStartedAt != nil {
		start = *t.WorkflowStartedAt
	}
	payee, _, confirmed := f.ledger()
	status := map[string]any{
		"TopUpRef": t.Ref, "Status": t.Status, "ReceivedCents": t.ReceivedCents, "PaymentsConfirmed": confirmed,
	}
	st := map[string]any{
		"Status": status, "Intents": f.requests(), "PayUntil": f.payUntil(start, window),
		"Remined": map[string]int64{}, "Runs": 0,
	}
	for k, v := range payee {
		st[k] = v
	}
	st["Asset"], st["Network"] = f.lastMethod()
	switch t.Status {
	case domain.TopUpAwaitingPayment, domain.TopUpPaymentDetected:
		at = atPayment
		// Covered but not credited yet: the run credits it (idempotent).
		st["Due"] = t.ReceivedCents >= t.AmountCents
	case domain.TopUpCredited:
		if t.CreditedAt == nil || !now.Before(t.CreditedAt.Add(window)) {
			return in, "", false, nil
		}
		at = atCredited
		status["CreditedAt"] = *t.CreditedAt
		st["ListenUntil"] = t.CreditedAt.Add(window)
	default:
		return in, "", false, nil
	}
	st["Phase"] = at
	in = workflows.NewTopUpInput(t, timeout)
	if err := decodeStrict(st, &in.Carry); err != nil {
		return in, "", false, fmt.Errorf("top-up %s: %w", t.Ref, err)
	}
	return in, at, true, nil
}

// decodeStrict decodes the carry v into out through its JSON form,
// refusing names the carry does not have.
func decodeStrict(v any, out any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("recovered state does not decode as the workflow's carry: %w", err)
	}
	return nil
}
