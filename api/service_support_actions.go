package api

import (
	"cmp"
	"context"
	"encoding/json"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// The support actions as services: each checks its agent, its reason and
// parameters and its target, then records the action under the agent's
// idempotency key BEFORE carrying it out (runRecorded), money actions
// above the four-eyes threshold waiting for a second agent (four_eyes.go).
// The /v1/support handlers and the console call the same methods.

// ActionInput is what an agent sends with a support action: the reason,
// and the parameters of the actions taking some.
type ActionInput struct {
	Reason string
	// AmountCents: what a payment attributed or a queued amount counted
	// or refunded moves (0: all that is due or remains), a refund to the
	// balance (required), or the value of another asset.
	AmountCents int64
	// Days: a rental's extension.
	Days int
	// ReturnedOnChain: another asset's amount was sent back on chain (it
	// is closed with no value).
	ReturnedOnChain bool
}

// ActionOutcome is a support action's answer: its audit record (ID 0:
// refused before anything was recorded) and whether its idempotency key
// was sent before (Replayed: nothing was carried out again, the answer is
// the first one). The error returned with it is the action's refusal: a
// *domain.Error, awaiting_approval and in_progress included.
type ActionOutcome struct {
	Action   domain.SupportAction
	Replayed bool
}

// answerAction encodes a support action's answer: its record with 200 or
// with its refusal (writeSupportAnswer), Idempotent-Replayed when its key
// was sent before; a request refused before any record as any error.
func (s *Server) answerAction(c *gin.Context, out ActionOutcome, err error) {
	if out.Replayed {
		c.Header(ReplayedHeader, "true")
	}
	if err != nil && out.Action.ID == 0 {
		s.fail(c, err)
		return
	}
	writeSupportAnswer(c, out.Action, err)
}

type runFunc = func(ctx context.Context, actionID int64, agent string) error

// actOn records action on ref (already checked) for agent a under key and
// carries it out with run.
func (s *Server) actOn(ctx context.Context, a *Agent, key, ref, action, reason string, params any, run runFunc) (ActionOutcome, error) {
	if !domain.IdempotencyKeyValid(key) {
		return ActionOutcome{}, errKeyMissing
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return ActionOutcome{}, err
	}
	return s.runRecorded(ctx, key, domain.SupportAction{Agent: a.Agent, Action: action, TargetRef: ref, Reason: reason, Params: raw}, run)
}

// actOnCase is actOn on order or top-up ref (kind), checked first.
func (s *Server) actOnCase(ctx context.Context, a *Agent, key, kind, ref, action, reason string, params any, run runFunc) (ActionOutcome, error) {
	var err error
	if kind == domain.TargetTopUp {
		_, err = s.stores.TopUps.GetTopUp(ctx, ref)
		err = notFoundAs(err, errTopUpNotFound)
	} else {
		_, err = s.stores.Orders.GetOrder(ctx, ref)
		err = notFoundAs(err, errOrderNotFound)
	}
	if err != nil {
		return ActionOutcome{}, err
	}
	return s.actOn(ctx, a, key, ref, action, reason, params, run)
}

// actorReason checks the agent and the action's reason.
func actorReason(a *Agent, reason string) (string, error) {
	if err := requireAgent(a); err != nil {
		return "", err
	}
	return reasonOf(reason)
}

// workflowActor is actorReason for an action carried out through a
// workflow: refused first while the workflow service does not answer
// (WorkflowsReady), so that nothing is recorded.
func (s *Server) workflowActor(ctx context.Context, a *Agent, reason string) (string, error) {
	if err := requireAgent(a); err != nil {
		return "", err
	}
	if err := s.WorkflowsReady(ctx); err != nil {
		return "", err
	}
	return reasonOf(reason)
}

// AttributePayment counts amountCents (0: all that is due) toward order
// or top-up ref (kind) with no payment received.
func (s *Server) AttributePayment(ctx context.Context, a *Agent, key, kind, ref string, in ActionInput) (ActionOutcome, error) {
	reason, err := s.workflowActor(ctx, a, in.Reason)
	if err != nil {
		return ActionOutcome{}, err
	}
	// The same rule as the workflow's (the action ID is given later).
	if err := (domain.Attribution{AmountCents: in.AmountCents}).ValidateParams(); err != nil {
		return ActionOutcome{}, err
	}
	var due int64 // all that is due (0) moves at most the total
	if kind == domain.TargetTopUp {
		t, err := s.stores.TopUps.GetTopUp(ctx, ref)
		if err != nil {
			return ActionOutcome{}, notFoundAs(err, errTopUpNotFound)
		}
		ref, due = t.Ref, t.AmountCents
	} else {
		o, err := s.stores.Orders.GetOrder(ctx, ref)
		if err != nil {
			return ActionOutcome{}, notFoundAs(err, errOrderNotFound)
		}
		ref, due = o.Ref, o.TotalCents
	}
	return s.actMoney(ctx, a, key, ref, domain.ActionAttributePayment, reason, map[string]any{"amount_cents": in.AmountCents},
		cmp.Or(in.AmountCents, due), false)
}

// Extend lengthens rental ref by in.Days.
func (s *Server) Extend(ctx context.Context, a *Agent, key, ref string, in ActionInput) (ActionOutcome, error) {
	reason, err := s.workflowActor(ctx, a, in.Reason)
	if err != nil {
		return ActionOutcome{}, err
	}
	// The workflow validates the same domain type the same way.
	if err := (domain.Extension{Days: in.Days}).ValidateParams(); err != nil {
		return ActionOutcome{}, err
	}
	return s.actOnCase(ctx, a, key, domain.TargetOrder, ref, domain.ActionExtend, reason, map[string]any{"days": in.Days},
		func(ctx context.Context, id int64, agent string) error {
			return s.wf.Extend(ctx, ref, workflows.Extension{ActionID: id, Agent: agent, Days: in.Days, Reason: reason})
		})
}

// EndEarly ends rental ref now (nothing refunded by it).
func (s *Server) EndEarly(ctx context.Context, a *Agent, key, ref string, in ActionInput) (ActionOutcome, error) {
	reason, err := s.workflowActor(ctx, a, in.Reason)
	if err != nil {
		return ActionOutcome{}, err
	}
	return s.actOnCase(ctx, a, key, domain.TargetOrder, ref, domain.ActionEndEarly, reason, map[string]any{},
		func(ctx context.Context, id int64, agent string) error {
			return s.wf.EndEarly(ctx, ref, workflows.SupportAction{ActionID: id, Agent: agent, Reason: reason})
		})
}

// RetryProvisioning resumes order ref's provisioning from its failed step.
func (s *Server) RetryProvisioning(ctx context.Context, a *Agent, key, ref string, in ActionInput) (ActionOutcome, error) {
	reason, err := s.workflowActor(ctx, a, in.Reason)
	if err != nil {
		return ActionOutcome{}, err
	}
	return s.actOnCase(ctx, a, key, domain.TargetOrder, ref, domain.ActionRetryProvisioning, reason, map[string]any{},
		func(ctx context.Context, id int64, agent string) error {
			return s.wf.RetryProvisioning(ctx, ref, workflows.SupportAction{ActionID: id, Agent: agent, Reason: reason})
		})
}

// SupportCancel cancels order or top-up ref (kind) awaiting payment.
func (s *Server) SupportCancel(ctx context.Context, a *Agent, key, kind, ref string, in ActionInput) (ActionOutcome, error) {
	reason, err := s.workflowActor(ctx, a, in.Reason)
	if err != nil {
		return ActionOutcome{}, err
	}
	return s.actOnCase(ctx, a, key, kind, ref, domain.ActionCancel, reason, map[string]any{},
		func(ctx context.Context, id int64, agent string) error {
			req := workflows.CancelRequest{By: "support", ActionID: id, Agent: agent, Reason: reason}
			if kind == domain.TargetTopUp {
				return s.wf.CancelTopUp(ctx, ref, req)
			}
			return s.wf.CancelOrder(ctx, ref, req)
		})
}

// CloseHostFlag closes the open customer flags of order ref's hosts,
// recorded with who and why.
func (s *Server) CloseHostFlag(ctx context.Context, a *Agent, key, ref string, in ActionInput) (ActionOutcome, error) {
	if err := s.requireRole(a, domain.RoleOperator); err != nil {
		return ActionOutcome{}, err
	}
	reason, err := actorReason(a, in.Reason)
	if err != nil {
		return ActionOutcome{}, err
	}
	return s.actOnCase(ctx, a, key, domain.TargetOrder, ref, domain.ActionCloseHostFlag, reason, map[string]any{},
		func(ctx context.Context, _ int64, agent string) error {
			return s.stores.SupportHosts.CloseHostFlag(ctx, ref, agent)
		})
}

// Refund refunds in.AmountCents of what order ref received to its
// customer's balance.
func (s *Server) Refund(ctx context.Context, a *Agent, key, ref string, in ActionInput) (ActionOutcome, error) {
	reason, err := s.workflowActor(ctx, a, in.Reason)
	if err != nil {
		return ActionOutcome{}, err
	}
	if err := (domain.Refund{AmountCents: in.AmountCents}).ValidateParams(); err != nil {
		return ActionOutcome{}, err
	}
	o, err := s.stores.Orders.GetOrder(ctx, ref)
	if err != nil {
		return ActionOutcome{}, notFoundAs(err, errOrderNotFound)
	}
	return s.actMoney(ctx, a, key, o.Ref, domain.ActionRefund, reason, map[string]any{"amount_cents": in.AmountCents}, in.AmountCents, false)
}

// exceptionAction checks the agent, the reason and the amount of an
// action on queued amount id, and reads it.
func (s *Server) exceptionAction(ctx context.Context, a *Agent, id int64, in ActionInput) (domain.Exception, string, error) {
	if err := requireAgent(a); err != nil {
		return domain.Exception{}, "", err
	}
	if err := s.WorkflowsReady(ctx); err != nil {
		return domain.Exception{}, "", err
	}
	if id <= 0 {
		return domain.Exception{}, "", errExceptionNotFound
	}
	reason, err := reasonOf(in.Reason)
	if err != nil {
		return domain.Exception{}, "", err
	}
	if err := (domain.ExceptionRefund{ExceptionID: id, AmountCents: in.AmountCents}).ValidateParams(); err != nil {
		return domain.Exception{}, "", err
	}
	e, err := s.stores.Support.Exception(ctx, id)
	if err != nil {
		return domain.Exception{}, "", notFoundAs(err, errExceptionNotFound)
	}
	return e, reason, nil
}

// RefundException refunds all (amount 0) or part of queued amount id to
// the customer's balance.
func (s *Server) RefundException(ctx context.Context, a *Agent, key string, id int64, in ActionInput) (ActionOutcome, error) {
	return s.exceptionMoney(ctx, a, key, id, in, domain.ActionRefundException)
}

// CountException counts queued amount id toward its order or top-up
// (which must still await payment), at most what is due.
func (s *Server) CountException(ctx context.Context, a *Agent, key string, id int64, in ActionInput) (ActionOutcome, error) {
	return s.exceptionMoney(ctx, a, key, id, in, domain.ActionAttributePayment)
}

// exceptionMoney moves in.AmountCents of queued amount id (0: all that
// remains) as action.
func (s *Server) exceptionMoney(ctx context.Context, a *Agent, key string, id int64, in ActionInput, action string) (ActionOutcome, error) {
	e, reason, err := s.exceptionAction(ctx, a, id, in)
	if err != nil {
		return ActionOutcome{}, err
	}
	return s.actMoney(ctx, a, key, e.TargetRef, action, reason,
		map[string]any{"exception_id": e.ID, "amount_cents": in.AmountCents}, cmp.Or(in.AmountCents, e.RemainingCents()), false)
}

// ResolveException closes a reverted payment's flag (not money: nothing
// to count or refund); ending the rental is EndEarly, apart.
func (s *Server) ResolveException(ctx context.Context, a *Agent, key string, id int64, in ActionInput) (ActionOutcome, error) {
	e, reason, err := s.exceptionAction(ctx, a, id, in)
	if err != nil {
		return ActionOutcome{}, err
	}
	return s.actOn(ctx, a, key, e.TargetRef, domain.ActionResolveException, reason, map[string]any{"exception_id": e.ID},
		func(ctx context.Context, id int64, agent string) error {
			return s.wf.ResolveException(ctx, e, domain.ExceptionResolve{ExceptionID: e.ID, ActionID: id, Agent: agent, Reason: reason})
		})
}

// ValueException states, once, the USD value of queued amount id received
// in another asset; in.ReturnedOnChain closes it with no value. A value
// no observed rate bounds takes a second agent, whatever it is.
func (s *Server) ValueException(ctx context.Context, a *Agent, key string, id int64, in ActionInput) (ActionOutcome, error) {
	e, reason, err := s.exceptionAction(ctx, a, id, in)
	if err != nil {
		return ActionOutcome{}, err
	}
	if in.AmountCents == 0 && !in.ReturnedOnChain {
		return ActionOutcome{}, domain.FieldError("amount_cents", "Indiquez la valeur en cents, ou returned_on_chain si le montant a été renvoyé sur la chaîne.")
	}
	if in.AmountCents > 0 && in.ReturnedOnChain {
		return ActionOutcome{}, domain.FieldError("returned_on_chain", "Un montant renvoyé sur la chaîne n'a pas de valeur à indiquer.")
	}
	unbounded := false
	if in.AmountCents > 0 {
		b, err := s.stores.Support.ValueBound(ctx, e.ID)
		if err != nil {
			return ActionOutcome{}, err
		}
		unbounded = !b.Known
	}
	return s.actMoney(ctx, a, key, e.TargetRef, domain.ActionValueException, reason,
		map[string]any{"exception_id": e.ID, "amount_cents": in.AmountCents, "returned_on_chain": in.ReturnedOnChain},
		in.AmountCents, unbounded)
}

// RepairHost puts host name back in rotation after checking it over SSH
// (`kernodeck hosts repair`), audited as support's actions are.
func (s *Server) RepairHost(ctx context.Context, a *Agent, key, name string, in ActionInput) (ActionOutcome, error) {
	return s.actOnHost(ctx, a, key, name, domain.ActionRepairHost, in, s.hostsRepair)
}

// RetireHost takes host name out of rotation (`kernodeck hosts retire`),
// audited as support's actions are.
func (s *Server) RetireHost(ctx context.Context, a *Agent, key, name string, in ActionInput) (ActionOutcome, error) {
	return s.actOnHost(ctx, a, key, name, domain.ActionRetireHost, in, s.hostsRetire)
}

// actOnHost records action on host name, runs do with the reason as the
// host's note, and writes the outcome.
func (s *Server) actOnHost(ctx context.Context, a *Agent, key, name, action string, in ActionInput,
	do func(ctx context.Context, name, note string) error) (ActionOutcome, error) {
	if err := s.requireRole(a, domain.RoleOperator); err != nil {
		return ActionOutcome{}, err
	}
	if s.hosts == nil {
		return ActionOutcome{}, errNoHostInventory
	}
	reason, err := reasonOf(in.Reason)
	if err != nil {
		return ActionOutcome{}, err
	}
	hosts, err := s.hosts.List(ctx)
	if err != nil {
		return ActionOutcome{}, err
	}
	if !hostListed(hosts, name) {
		return ActionOutcome{}, errHostNotFound
	}
	note := "par " + a.Agent + " : " + reason
	return s.actOn(ctx, a, key, hostTarget(name), action, reason, map[string]any{"host": name},
		func(ctx context.Context, _ int64, _ string) error {
			return hostError(do(ctx, name, note))
		})
}

var errActionNotFound = domain.Errorf(domain.ECodeNotFound, "Action de support introuvable.")

// ReviewAction records a senior agent's approval of money action id (then
// carries it out, answered as the action itself would be) or refusal; the
// agent who asked can do neither, and an approval counts in the
// reviewer's daily cap (the store decides both).
func (s *Server) ReviewAction(ctx context.Context, a *Agent, id int64, approve bool, reason string) (ActionOutcome, error) {
	if err := s.requireRole(a, domain.RoleSenior); err != nil {
		return ActionOutcome{}, err
	}
	if approve {
		// Carried out at once, through a workflow.
		if err := s.WorkflowsReady(ctx); err != nil {
			return ActionOutcome{}, err
		}
	}
	if id <= 0 {
		return ActionOutcome{}, errActionNotFound
	}
	reason, err := reasonOf(reason)
	if err != nil {
		return ActionOutcome{}, err
	}
	act, err := s.stores.Support.ReviewSupportAction(ctx, id, a.Agent, approve, reason, s.cfg.SupportLimits.AgentDailyCapCents)
	if err != nil {
		return ActionOutcome{}, notFoundAs(err, errActionNotFound)
	}
	s.log.Info("support action reviewed", "id", id, "asked_by", act.Agent, "reviewer", a.Agent, "approved", approve)
	if !approve {
		return ActionOutcome{Action: act}, nil
	}
	done, runErr, err := s.carryOut(ctx, act, func(ctx context.Context, _ int64, _ string) error { return s.carryOutMoney(ctx, act) })
	if err != nil {
		return ActionOutcome{}, err
	}
	return ActionOutcome{Action: done}, runErr
}
