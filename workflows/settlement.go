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

// UpdateResolveException closes a reverted payment's flag in support's
// queue (domain.ExceptionResolve): support acknowledges it, the rental
// going on (or ended apart with end-early).
const UpdateResolveException = "resolve-exception"

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

// AddressedTo is the workflow a start input is for.
func (in SettlementInput) AddressedTo() string { return SettlementWorkflowID(in.TargetRef) }

// SettlementWorkflow refunds the received amounts of one order or top-up
// that were never counted (support's exception queue), whether its own
// workflow still runs or closed long ago. It is started by the refund
// itself (update-with-start), runs each refund as one transition of the
// target (event, ledger posting, queued amount reduced) that PostgreSQL
// bounds by what remains, and ends once idle. Its history stays small: it
// continues as new when the server suggests it.
func SettlementWorkflow(ctx workflow.Context, in SettlementInput) error {
	s := &settlement{in: in, mu: workflow.NewMutex(ctx), actions: map[int64]bool{}}
	// A settlement run's own version: its updates' works are handed over
	// to the run past handlerPatience (handOver), as a rental's from vHandOver.
	s.works.on = workflow.GetVersion(ctx, "settlement-handover", workflow.DefaultVersion, 1) == 1
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateRefundException,
		func(ctx workflow.Context, r domain.ExceptionRefund) error {
			return s.works.run(ctx, UpdateRefundException, func(ctx workflow.Context) error { return s.refund(ctx, r) })
		},
		workflow.UpdateHandlerOptions{Validator: notBusy(&s.works, func(r domain.ExceptionRefund) error { return refusal(r.Validate()) })}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateResolveException,
		func(ctx workflow.Context, r domain.ExceptionResolve) error {
			return s.works.run(ctx, UpdateResolveException, func(ctx workflow.Context) error { return s.resolve(ctx, r) })
		},
		workflow.UpdateHandlerOptions{Validator: notBusy(&s.works, func(r domain.ExceptionResolve) error { return refusal(r.Validate()) })}); err != nil {
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
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) && s.works.idle() }); err != nil {
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
	works   handOver
}

// act runs one support action on a queued row, once per action ID, once
// its support_actions row is checked against claim.
func (s *settlement) act(ctx workflow.Context, update string, claim domain.SupportActionClaim, exceptionID int64, do func(domain.Exception) error) error {
	actionID := claim.ID
	s.updates++
	if err := s.mu.Lock(ctx); err != nil {
		return errUnavailable()
	}
	defer s.mu.Unlock()
	if s.actions[actionID] {
		return nil
	}
	// A settlement run starts empty: the row's written outcome is what
	// stops a refund copied from an earlier run's history.
	if err := checkAction(ctx, workflow.DefaultVersion, update, claim); err != nil {
		return err
	}
	e, err := loadException(ctx, exceptionID, s.in.TargetRef)
	if err != nil {
		return err
	}
	if err := do(e); err != nil {
		return err
	}
	s.actions[actionID] = true
	return nil
}

func (s *settlement) refund(ctx workflow.Context, r domain.ExceptionRefund) error {
	return s.act(ctx, UpdateRefundException, r.Claim(s.in.TargetRef), r.ExceptionID, func(e domain.Exception) error { return s.refundOf(ctx, e, r) })
}

func (s *settlement) refundOf(ctx workflow.Context, e domain.Exception, r domain.ExceptionRefund) error {
	amount := r.AmountCents
	if amount == 0 {
		amount = e.RemainingCents()
	}
	if amount <= 0 || amount > e.RemainingCents() {
		return reject(domain.ECodeConflict, fmt.Sprintf("Ce montant en attente n'a plus que %s à rembourser.", usd(e.RemainingCents())))
	}
	msg := fmt.Sprintf("Remboursement de %s crédité sur votre solde (paiement %s %s reçu hors règlement).", usd(amount), e.Asset, e.Network)
	data := map[string]any{"amount_cents": amount, "exception_id": e.ID, "payment_key": e.PaymentKey, "reason": e.Reason,
		"agent": r.Agent, "support_reason": r.Reason, "action_id": r.ActionID}
	use := &domain.ExceptionUse{ExceptionID: e.ID, Cents: amount, Refund: true}
	posting := &domain.Posting{Kind: domain.PostingRefund, AccountID: e.AccountID, Cents: amount, Memo: r.Reason}
	if err := s.transition(ctx, domain.KeyExceptionRefund(r.ActionID), domain.EventRefunded, msg, data, use, posting); err != nil {
		return asRefusal(err, "Le remboursement n'a pas abouti. Réessayez plus tard.")
	}
	return nil
}

// transition writes one transition of the target (order or top-up).
func (s *settlement) transition(ctx workflow.Context, key, kind, msg string, data map[string]any,
	use *domain.ExceptionUse, posting *domain.Posting) error {
	var a *activities.Activities
	now := workflow.Now(ctx).UTC()
	if s.in.TargetKind == domain.TargetTopUp {
		return workflow.ExecuteActivity(timelineCtx(ctx), a.RecordTopUpEvent, activities.TopUpEvent{
			TopUpRef: s.in.TargetRef, Key: key, Kind: kind, Message: msg, Data: data, At: now, Use: use, Posting: posting}).Get(ctx, nil)
	}
	return workflow.ExecuteActivity(timelineCtx(ctx), a.RecordOrderEvent, activities.OrderEvent{
		OrderRef: s.in.TargetRef, Key: key, Kind: kind, Message: msg, Data: data, At: now, Use: use, Posting: posting}).Get(ctx, nil)
}

// resolve closes a reverted payment's flag, in one transition of its
// target (a timeline event with who and why).
func (s *settlement) resolve(ctx workflow.Context, r domain.ExceptionResolve) error {
	return s.act(ctx, UpdateResolveException, r.Claim(s.in.TargetRef), r.ExceptionID, func(e domain.Exception) error { return s.resolveOf(ctx, e, r) })
}

func (s *settlement) resolveOf(ctx workflow.Context, e domain.Exception, r domain.ExceptionResolve) error {
	if e.Reason != domain.ExceptionReverted || e.ResolvedAt != nil {
		return reject(domain.ECodeConflict, "Seul un paiement annulé par le réseau et signalé au support se clôt ainsi.")
	}
	paid := usd(e.AmountCents)
	if e.Asset != "" {
		paid = e.Asset + ", " + paid
	}
	msg := fmt.Sprintf("Le support a pris en charge le paiement annulé par le réseau %s (%s).", domain.NetworkName(e.Network), paid)
	data := map[string]any{"exception_id": e.ID, "payment_key": e.PaymentKey, "shortfall_cents": e.ShortfallCents,
		"agent": r.Agent, "support_reason": r.Reason, "action_id": r.ActionID}
	use := &domain.ExceptionUse{ExceptionID: e.ID, Resolve: &r}
	key := domain.KeySupport(r.ActionID, domain.ActionResolveException)
	if err := s.transition(ctx, key, domain.EventSupportAction, msg, data, use, nil); err != nil {
		return asRefusal(err, "Le signalement n'a pas pu être clos. Réessayez plus tard.")
	}
	return nil
}
