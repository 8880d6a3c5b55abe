package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// paymentLedger tracks the on-chain payments of one order or top-up by key:
// a payment is counted once however often a watcher re-sends it.
type paymentLedger struct {
	Counted map[string]bool // confirmed (counted, late or extra) or attributed
	Pending map[string]bool // seen, neither confirmed nor reverted yet
	SeenN   map[string]int  // times seen, so a payment re-seen after a reorg gets a new event key
	RevertN map[string]int
	// Gen counts a payment's reversals after confirmation: its next
	// confirmation is a new generation, with keys of its own (qkey).
	Gen map[string]int
	// Dust is the latest dust summary version applied per payment request.
	Dust map[string]int64
	// Ver is the newest state version applied per payment (vStateOrder).
	Ver map[string]int64 `json:",omitempty"`
	// Requests are the workflow's own payment requests known so far
	// (addressedChecks): a payment signal must name one of them with its
	// address, asset and network.
	Requests map[string]PaymentRequestRef `json:",omitempty"`
	// ValidUntil is the latest deadline of those requests: until then a
	// new one is refused by the validator (vDrain), leaving no history.
	ValidUntil time.Time `json:",omitempty"`
}

// PaymentRequestRef is what a payment signal must repeat of the payment
// request it names.
type PaymentRequestRef struct {
	Address, Asset, Network string
}

// addRequest records a payment request the workflow made.
func (l *paymentLedger) addRequest(it domain.Intent) {
	if l.Requests == nil {
		l.Requests = map[string]PaymentRequestRef{} // a ledger carried from before the field
	}
	l.Requests[it.ID] = PaymentRequestRef{Address: it.Address, Asset: it.Asset, Network: it.Network}
	if it.Deadline.After(l.ValidUntil) {
		l.ValidUntil = it.Deadline
	}
}

// ownRequest reports whether intentID is one of the workflow's payment
// requests (targetKind, ref) with that address, asset and network. A
// request the workflow did not make in this run's memory (made before
// vAddressed, or in a run whose ledger predates the field) is read from
// PostgreSQL once, in a local activity, and kept if it is ours.
func (l *paymentLedger) ownRequest(ctx workflow.Context, v workflow.Version, targetKind, ref, intentID, address, asset, network string) bool {
	got := PaymentRequestRef{Address: address, Asset: asset, Network: network}
	if want, ok := l.Requests[intentID]; ok {
		return want == got
	}
	if intentID == "" {
		return false
	}
	var a *activities.Activities
	var it domain.Intent
	if err := execLocal(ctx, v, localTimelineCtx(ctx, v), timelineCtx(ctx), a.PaymentRequest, intentID, &it); err != nil {
		return false // not found: not ours
	}
	return l.ownRequestIn(&it, targetKind, ref, intentID, got)
}

// ownRequestIn is ownRequest with the request already read (nil: none):
// a request the ledger knows is compared as it knows it; one it does not
// is kept if it is the target's, then compared.
func (l *paymentLedger) ownRequestIn(it *domain.Intent, targetKind, ref, intentID string, got PaymentRequestRef) bool {
	if want, ok := l.Requests[intentID]; ok {
		return want == got
	}
	if it == nil || intentID == "" || it.TargetKind != targetKind || it.TargetRef != ref {
		return false
	}
	l.addRequest(*it)
	return l.Requests[intentID] == got
}

func newPaymentLedger() *paymentLedger {
	return &paymentLedger{
		Counted:  map[string]bool{},
		Pending:  map[string]bool{},
		SeenN:    map[string]int{},
		RevertN:  map[string]int{},
		Gen:      map[string]int{},
		Dust:     map[string]int64{},
		Ver:      map[string]int64{},
		Requests: map[string]PaymentRequestRef{},
	}
}

// stale reports whether p is older than a state of its payment already
// applied (vStateOrder); otherwise p's version becomes the newest. A
// signal without a version (an older watcher) is never stale.
func (l *paymentLedger) stale(p PaymentEvent) bool {
	if p.StateVersion == 0 {
		return false
	}
	if l.Ver == nil {
		l.Ver = map[string]int64{} // a ledger carried from a run before the field
	}
	key := p.Key()
	if p.StateVersion <= l.Ver[key] {
		return true
	}
	l.Ver[key] = p.StateVersion
	return false
}

// qkey is the key of a payment's current generation in events and in
// support's queue: the payment key itself, then "key~n" after its n-th
// reversal after confirmation, so a payment mined again is counted (or
// queued) again once, beside what its reversal voided.
func (l *paymentLedger) qkey(key string) string { return genKey(key, l.Gen[key]) }

func genKey(key string, gen int) string {
	if gen == 0 {
		return key
	}
	return fmt.Sprintf("%s~%d", key, gen)
}

// dustFresh reports whether s is newer than the summary applied for its
// request, and marks it applied.
func (l *paymentLedger) dustFresh(s DustSummary) bool {
	if s.Version <= l.Dust[s.IntentID] {
		return false
	}
	l.Dust[s.IntentID] = s.Version
	return true
}

// seen marks key pending; ok is false if the payment is already known.
func (l *paymentLedger) seen(key string, late bool) (eventKey string, ok bool) {
	if l.Counted[key] || l.Pending[key] {
		return "", false
	}
	if !late {
		// A late payment never holds the order open: it goes to support.
		l.Pending[key] = true
	}
	l.SeenN[key]++
	return domain.KeySeen(key, l.SeenN[key]), true
}

// reverted drops a pending payment; ok is false if key was not pending.
func (l *paymentLedger) reverted(key string) (eventKey string, ok bool) {
	if !l.Pending[key] {
		return "", false
	}
	delete(l.Pending, key)
	l.RevertN[key]++
	return domain.KeyReverted(key, l.RevertN[key]), true
}

// confirm counts key; ok is false if it was already counted.
func (l *paymentLedger) confirm(key string) (ok bool) {
	if l.Counted[key] {
		return false
	}
	l.Counted[key] = true
	delete(l.Pending, key)
	return true
}

// uncount takes back the count of a confirmed payment a reorganisation
// removed: its next confirmation is a new generation. It returns the key
// of the generation removed (qkey).
func (l *paymentLedger) uncount(key string) (ekey string) {
	ekey = l.qkey(key)
	delete(l.Counted, key)
	l.Gen[key]++
	return ekey
}

// ordered puts p in its payment's order of generations (vReversalOrder).
// stale: p belongs to a generation already reverted, or is a reversal
// already applied; it changes nothing. A state from a later generation
// first applies the reversal the workflow has not handled yet (its signal
// waits later in the batch, or was never delivered): revert, the target's
// revertConfirmed, uncounts the payment if it is counted. The caller holds
// mu.
func (l *paymentLedger) ordered(ctx workflow.Context, v workflow.Version, p PaymentEvent,
	revert func(workflow.Context, PaymentEvent) error) (stale bool, err error) {
	// A reversal without its generation comes from a watcher older than
	// the field: applied as before (deploy chainwatch before the workers).
	if v < vReversalOrder || (p.AfterConfirmation && p.Reversals == 0) {
		return false, nil
	}
	key := p.Key()
	switch g := l.Gen[key]; {
	case p.Reversals < g, p.Reversals == g && p.AfterConfirmation:
		return true, nil
	case p.Reversals == g:
		return false, nil
	}
	if l.Counted[key] {
		rp := p
		rp.AfterConfirmation = true
		if err := revert(ctx, rp); err != nil {
			return false, err
		}
	}
	l.Gen[key] = p.Reversals
	return false, nil
}
