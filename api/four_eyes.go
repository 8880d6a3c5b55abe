package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// No agent alone moves large money (issue 36, item 3). The money actions
// (a payment attributed or a queued amount counted, a refund to a balance,
// a value given to another asset) are recorded with what they move; above
// Config.SupportLimits.FourEyesCents they wait, recorded and answered 202
// awaiting_approval, until a second agent approves them
// (POST /support/actions/:id/approve, which carries them out) or declines
// them; the agent who asked can do neither (403 own_action). What an
// agent's money actions move in 24 hours, asked or approved, is capped
// (409 agent_daily_cap). The workflow refuses an update whose action
// needed approval and has none (domain.SupportAction.Check).

// moneyParams are a money action's recorded parameters.
type moneyParams struct {
	ExceptionID     int64 `json:"exception_id"`
	AmountCents     int64 `json:"amount_cents"`
	ReturnedOnChain bool  `json:"returned_on_chain"`
}

// actMoney records a money action of cents (what it moves at most) under
// key, and carries it out unless it needs a second agent (above the
// threshold, or forced: a value no rate bounds).
func (s *Server) actMoney(ctx context.Context, a *Agent, key, ref, action, reason string, params any, cents int64, forceApproval bool) (ActionOutcome, error) {
	if !domain.IdempotencyKeyValid(key) {
		return ActionOutcome{}, errKeyMissing
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return ActionOutcome{}, err
	}
	rec := domain.SupportAction{Agent: a.Agent, Action: action, TargetRef: ref, Reason: reason, Params: raw,
		MoneyCents: max(cents, 0), NeedsApproval: forceApproval || s.cfg.SupportLimits.NeedsSecondAgent(cents)}
	return s.runRecorded(ctx, key, rec, func(ctx context.Context, id int64, agent string) error {
		rec.ID, rec.Agent = id, agent
		return s.carryOutMoney(ctx, rec)
	})
}

// carryOutMoney carries out a recorded money action from its row: the
// one place each kind is run, whether by its agent alone or once
// approved.
func (s *Server) carryOutMoney(ctx context.Context, a domain.SupportAction) error {
	var p moneyParams
	if err := json.Unmarshal(a.Params, &p); err != nil {
		return fmt.Errorf("support action %d: params: %w", a.ID, err)
	}
	approved := a.Approved != nil && *a.Approved
	var e domain.Exception
	if p.ExceptionID != 0 {
		var err error
		if e, err = s.stores.Support.Exception(ctx, p.ExceptionID); err != nil {
			return notFoundAs(err, errExceptionNotFound)
		}
	}
	switch {
	case a.Action == domain.ActionRefundException:
		return s.wf.RefundException(ctx, e, domain.ExceptionRefund{
			ExceptionID: e.ID, ActionID: a.ID, Agent: a.Agent, AmountCents: p.AmountCents, Reason: a.Reason})
	case a.Action == domain.ActionValueException:
		return s.stores.Support.ValueException(ctx, domain.ExceptionValue{
			ExceptionID: e.ID, ActionID: a.ID, Agent: a.Agent, AmountCents: p.AmountCents, Reason: a.Reason, Approved: approved})
	case a.Action == domain.ActionRefund:
		return s.wf.Refund(ctx, a.TargetRef,
			workflows.Refund{ActionID: a.ID, Agent: a.Agent, AmountCents: p.AmountCents, Reason: a.Reason})
	case a.Action == domain.ActionAttributePayment:
		at := workflows.Attribution{ActionID: a.ID, Agent: a.Agent, AmountCents: p.AmountCents, Reason: a.Reason, ExceptionID: e.ID}
		kind := e.TargetKind
		if p.ExceptionID == 0 {
			kind = domain.TargetOrder
			if _, err := s.stores.Orders.GetOrder(ctx, a.TargetRef); domain.ErrorCode(err) == domain.ECodeNotFound {
				kind = domain.TargetTopUp
			} else if err != nil {
				return err
			}
		}
		if kind == domain.TargetTopUp {
			return s.wf.AttributeTopUpPayment(ctx, a.TargetRef, at)
		}
		return s.wf.AttributeOrderPayment(ctx, a.TargetRef, at)
	}
	return fmt.Errorf("support action %d: %s is not a money action", a.ID, a.Action)
}

// supportAwaitingApproval lists the money actions waiting for a second
// agent (and those approved whose run has no outcome yet), with the
// limits.
func (s *Server) supportAwaitingApproval(c *gin.Context) {
	l, err := s.AwaitingApproval(c.Request.Context(), agentOf(c))
	s.answer(c, http.StatusOK, l, err)
}

func (s *Server) supportApproveAction(c *gin.Context) { s.reviewAction(c, true) }
func (s *Server) supportDeclineAction(c *gin.Context) { s.reviewAction(c, false) }

// reviewAction answers a second agent's approval or refusal (ReviewAction).
func (s *Server) reviewAction(c *gin.Context, approve bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		s.fail(c, errActionNotFound)
		return
	}
	var req reasonRequest
	if !s.decodeAction(c, &req) {
		return
	}
	out, err := s.ReviewAction(c.Request.Context(), agentOf(c), id, approve, req.Reason)
	s.answerAction(c, out, err)
}
