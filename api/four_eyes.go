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

// runMoneyAction records a money action of cents (what it moves at most)
// under the request's idempotency key, and carries it out unless it needs
// a second agent (above the threshold, or forced: a value no rate bounds).
func (s *Server) runMoneyAction(c *gin.Context, ref, action, reason string, params any, cents int64, forceApproval bool) {
	key, err := idempotencyKey(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	raw, err := json.Marshal(params)
	if err != nil {
		s.fail(c, err)
		return
	}
	rec := domain.SupportAction{Agent: c.GetString(ctxAgent), Action: action, TargetRef: ref, Reason: reason, Params: raw,
		MoneyCents: max(cents, 0), NeedsApproval: forceApproval || s.cfg.SupportLimits.NeedsSecondAgent(cents)}
	done, runErr, err := s.runRecorded(c, key, rec, func(ctx context.Context, id int64, agent string) error {
		rec.ID, rec.Agent = id, agent
		return s.carryOutMoney(ctx, rec)
	})
	if err != nil {
		s.fail(c, err)
		return
	}
	writeSupportAnswer(c, done, runErr)
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
		if e, err = s.store.Exception(ctx, p.ExceptionID); err != nil {
			return notFoundAs(err, errExceptionNotFound)
		}
	}
	switch {
	case a.Action == domain.ActionRefundException:
		return s.wf.RefundException(ctx, e, domain.ExceptionRefund{
			ExceptionID: e.ID, ActionID: a.ID, Agent: a.Agent, AmountCents: p.AmountCents, Reason: a.Reason})
	case a.Action == domain.ActionValueException:
		return s.store.ValueException(ctx, domain.ExceptionValue{
			ExceptionID: e.ID, ActionID: a.ID, Agent: a.Agent, AmountCents: p.AmountCents, Reason: a.Reason, Approved: approved})
	case a.Action == domain.ActionRefund:
		return s.wf.Refund(ctx, a.TargetRef,
			workflows.Refund{ActionID: a.ID, Agent: a.Agent, AmountCents: p.AmountCents, Reason: a.Reason})
	case a.Action == domain.ActionAttributePayment:
		at := workflows.Attribution{ActionID: a.ID, Agent: a.Agent, AmountCents: p.AmountCents, Reason: a.Reason, ExceptionID: e.ID}
		kind := e.TargetKind
		if p.ExceptionID == 0 {
			kind = domain.TargetOrder
			if _, err := s.store.GetOrder(ctx, a.TargetRef); domain.ErrorCode(err) == domain.ECodeNotFound {
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
	actions, err := s.store.AwaitingApproval(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"actions": actions, "agent": c.GetString(ctxAgent),
		"four_eyes_cents": s.cfg.SupportLimits.FourEyesCents, "agent_daily_cap_cents": s.cfg.SupportLimits.AgentDailyCapCents})
}

func (s *Server) supportApproveAction(c *gin.Context) { s.reviewAction(c, true) }
func (s *Server) supportDeclineAction(c *gin.Context) { s.reviewAction(c, false) }

// reviewAction records a second agent's approval (then carries the
// action out, answered as the action itself would be) or refusal.
func (s *Server) reviewAction(c *gin.Context, approve bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		s.fail(c, domain.Errorf(domain.ECodeNotFound, "Action de support introuvable."))
		return
	}
	reason, ok := s.decodeReason(c)
	if !ok {
		return
	}
	agent := c.GetString(ctxAgent)
	a, err := s.store.ReviewSupportAction(c.Request.Context(), id, agent, approve, reason, s.cfg.SupportLimits.AgentDailyCapCents)
	if err != nil {
		s.fail(c, notFoundAs(err, domain.Errorf(domain.ECodeNotFound, "Action de support introuvable.")))
		return
	}
	s.log.Info("support action reviewed", "id", id, "asked_by", a.Agent, "reviewer", agent, "approved", approve)
	if !approve {
		writeSupportAnswer(c, a, nil)
		return
	}
	done, runErr, err := s.carryOut(c.Request.Context(), a, func(ctx context.Context, _ int64, _ string) error { return s.carryOutMoney(ctx, a) })
	if err != nil {
		s.fail(c, err)
		return
	}
	writeSupportAnswer(c, done, runErr)
}
