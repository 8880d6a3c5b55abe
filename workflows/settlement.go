package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// UpdateRefundException refunds all or part of a received amount of
// support's queue to the customer's balance (domain.ExceptionRefund).
const UpdateRefundException = "refund-exception"

// SettlementWorkflowType is the settlement workflow's registered name.
const SettlementWorkflowType = "SettlementWorkflow"

// SettlementIdle is how long a settlement workflow waits for another
// refund before it ends; the next one starts it again (update-with-start).
const SettlementIdle = 10 * time.Minute

// SettlementInput names the order or top-up whose queued amounts the
// workflow refunds.
type SettlementInput struct {
	TargetKind string // domain.TargetOrder or domain.TargetTopUp
	TargetRef  string
}

// SettlementWorkflowID is the settlement workflow of an order or top-up.
func SettlementWorkflowID(targetRef string) string { return domain.SettlementWorkflowID(targetRef) }

// SettlementWorkflow refunds the received amounts of one order or top-up
// that were never counted (support's exception queue), whether its own
// workflow still runs or closed long ago. It is started by the refund
// itself (update-with-start), runs each refund as one transition of the
// target (event, ledger posting, queued amount reduced) that PostgreSQL
// bounds by what remains, and ends once idle. Its history stays small: it
// continues as new when the server suggests it.
func SettlementWorkflow(ctx workflow.Context, in SettlementInput) error {
	s := &settlement{in: in, mu: workflow.NewMutex(ctx), actions: map[int64]bool{}}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateRefundException, s.refund,
		workflow.UpdateHandlerOptions{Validator: func(r domain.ExceptionRefund) error { return refusal(r.Validate()) }}); err != nil {
		return err
	}
	seen := 0
	for {
		busy, err := awaitOrTimeout(ctx, SettlementIdle, func() bool { return s.updates != seen })
		if err != nil {
			return err
		}
		seen = s.updates
		if !busy || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			break
		}
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
		return workflow.NewContinueAsNewError(ctx, SettlementWorkflowType, in)
	}
	return nil
}

type settlement struct {
	in      SettlementInput
	mu      workflow.Mutex
	actions map[int64]bool // support actions done: a re-sent update is a no-op
	updates int
}

func (s *settlement) refund(ctx workflow.Context, r domain.ExceptionRefund) error {
	s.updates++
	if err := s.mu.Lock(ctx); err != nil {
		return errUnavailable()
	}
	defer s.mu.Unlock()
	if s.actions[r.ActionID] {
		return nil
	}
	e, err := loadException(ctx, r.ExceptionID, s.in.TargetRef)
	if err != nil {
		return err
	}
	amount := r.AmountCents
	if amount == 0 {
		amount = e.RemainingCents()
	}
	if amount <= 0 || amount > e.RemainingCents() {
		return reject(domain.ECodeConflict, fmt.Sprintf("Ce montant en attente n'a plus que %s à rembourser.", usd(e.RemainingCents())))
	}
	var a *activities.Activities
	msg := fmt.Sprintf("Remboursement de %s crédité sur votre solde (paiement %s %s reçu hors règlement).", usd(amount), e.Asset, e.Network)
	data := map[string]any{"amount_cents": amount, "exception_id": e.ID, "payment_key": e.PaymentKey, "reason": e.Reason,
		"agent": r.Agent, "support_reason": r.Reason, "action_id": r.ActionID}
	use := &domain.ExceptionUse{ExceptionID: e.ID, Cents: amount, Refund: true}
	posting := &domain.Posting{Kind: domain.PostingRefund, AccountID: e.AccountID, Cents: amount, Memo: r.Reason}
	key := domain.KeyExceptionRefund(r.ActionID)
	now := workflow.Now(ctx).UTC()
	var f workflow.Future
	if s.in.TargetKind == domain.TargetTopUp {
		f = workflow.ExecuteActivity(timelineCtx(ctx), a.RecordTopUpEvent, activities.TopUpEvent{
			TopUpRef: s.in.TargetRef, Key: key, Kind: domain.EventRefunded, Message: msg, Data: data, At: now, Use: use, Posting: posting})
	} else {
		f = workflow.ExecuteActivity(timelineCtx(ctx), a.RecordOrderEvent, activities.OrderEvent{
			OrderRef: s.in.TargetRef, Key: key, Kind: domain.EventRefunded, Message: msg, Data: data, At: now, Use: use, Posting: posting})
	}
	if err := f.Get(ctx, nil); err != nil {
		return asRefusal(err, "Le remboursement n'a pas abouti. Réessayez plus tard.")
	}
	s.actions[r.ActionID] = true
	return nil
}
