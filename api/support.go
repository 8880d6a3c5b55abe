package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// Outcomes written to the audit log.
const (
	outcomeDone     = "done"
	outcomeRejected = "rejected" // the workflow refused (a *domain.Error)
	outcomeFailed   = "failed"   // the workflow could not be reached
)

// A support action's reason: 3 to 2,000 characters.
const reasonMin, reasonMax = 3, 2000

func reasonOf(r string) (string, error) {
	return text("reason", r, reasonMin, reasonMax, "Indiquez la raison de l'action (3 à 2 000 caractères).")
}

// CheckReason refuses a support action's reason the services would
// refuse (the console checks it before its confirmation page).
func CheckReason(reason string) error {
	_, err := reasonOf(reason)
	return err
}

// CheckReviewReason is CheckReason for a second agent's decision, said
// of a decision.
func CheckReviewReason(reason string) error {
	_, err := text("reason", reason, reasonMin, reasonMax, "Indiquez la raison de votre décision (3 à 2 000 caractères).")
	return err
}

// supportActionError is the body of a refused or failed support action:
// the usual error, plus the audit record.
type supportActionError struct {
	Error  errorDetail          `json:"error"`
	Action domain.SupportAction `json:"action"`
}

// runAction records an action of agent (an agent, or a customer on their
// own order: domain.CustomerAgent) in support_actions, runs it, and
// records its outcome: done is the action's row, runErr its refusal as a
// *domain.Error, err a failure to record it (nothing ran).
func (s *Server) runAction(ctx context.Context, agent, ref, action, reason string, params any,
	run func(ctx context.Context, actionID int64, agent string) error) (done domain.SupportAction, runErr, err error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return done, nil, err
	}
	rec := domain.SupportAction{Agent: agent, Action: action, TargetRef: ref, Reason: reason, Params: raw}
	if rec.ID, err = s.stores.Support.InsertSupportAction(ctx, rec); err != nil {
		return done, nil, err
	}
	rec.CreatedAt = time.Now()
	return s.carryOut(ctx, rec, run)
}

// runRecorded records rec under key and carries it out, unless it needs
// a second agent: it is then only recorded, and answered
// awaiting_approval (four_eyes.go). The error is the action's refusal
// (with its record) or a failure to record it (no record).
func (s *Server) runRecorded(ctx context.Context, key string, rec domain.SupportAction, run runFunc) (ActionOutcome, error) {
	id, replay, first, runErr, err := s.recordKeyedAction(ctx, rec, key)
	if err != nil {
		return ActionOutcome{}, err
	}
	if replay {
		return ActionOutcome{Action: first, Replayed: runErr != errKeyReused}, runErr
	}
	rec.ID, rec.CreatedAt = id, time.Now()
	if rec.NeedsApproval {
		s.log.Info("support action awaits a second agent", "id", id, "agent", rec.Agent, "action", rec.Action,
			"ref", rec.TargetRef, "money_cents", rec.MoneyCents)
		return ActionOutcome{Action: rec}, domain.ErrAwaitingApproval(id)
	}
	done, runErr, err := s.carryOut(ctx, rec, run)
	if err != nil {
		return ActionOutcome{}, err
	}
	return ActionOutcome{Action: done}, runErr
}

// carryOut runs a recorded action and writes its outcome: done, refused
// (a *domain.Error, kept as its answer) or failed; an action the workflow
// goes on with (in_progress) keeps no outcome.
func (s *Server) carryOut(ctx context.Context, rec domain.SupportAction,
	run func(ctx context.Context, actionID int64, agent string) error) (done domain.SupportAction, runErr, err error) {
	id, agent, action, ref := rec.ID, rec.Agent, rec.Action, rec.TargetRef
	ctx, cancel := s.wfCtx(ctx)
	defer cancel()
	runErr = run(ctx, id, agent)
	outcome, detail := outcomeDone, "OK"
	var de *domain.Error
	switch {
	case runErr == nil:
	case errors.As(runErr, &de) && de.Code == domain.ECodeInProgress:
		// Accepted and going on in the workflow: the row keeps no outcome
		// (the console says «en cours»), the order's timeline tells the end.
		s.log.Info("support action in progress", "id", id, "agent", agent, "action", action, "ref", ref)
		return rec, s.workflowError(ctx, action, ref, runErr), nil
	case errors.As(runErr, &de):
		outcome, detail = outcomeRejected, de.Code+": "+de.Message
	default:
		outcome, detail = outcomeFailed, runErr.Error()
	}
	if runErr != nil {
		// What the request is answered, kept with the outcome for its key.
		runErr = s.workflowError(ctx, action, ref, runErr)
	}
	done, err = s.stores.Support.CompleteSupportActionAnswer(ctx, id, outcome, detail, answerOf(runErr))
	if err != nil {
		// The action ran (or not) already: answer its outcome anyway so the
		// agent does not repeat it under a new ID.
		s.log.Error("support action outcome not recorded", "id", id, "outcome", outcome, "err", err)
		now := time.Now()
		rec.Outcome, rec.Detail, rec.DoneAt = &outcome, &detail, &now
		done = rec
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "support action",
		slog.Int64("id", id), slog.String("agent", agent), slog.String("action", action),
		slog.String("ref", ref), slog.String("outcome", outcome))
	return done, runErr, nil
}

type reasonRequest struct {
	Reason string `json:"reason"`
}

// decodeAction decodes a support action's body into req: false (the
// answer written) when it cannot.
func (s *Server) decodeAction(c *gin.Context, req any) bool {
	if err := s.decodeJSON(c, req, false); err != nil {
		s.fail(c, err)
		return false
	}
	return true
}

type attributeRequest struct {
	Reason string `json:"reason"`
	// AmountCents is the USD value attributed; absent or 0 means the full
	// amount due.
	AmountCents *int64 `json:"amount_cents"`
}

// keyOf is the request's idempotency key (checked by the service).
func keyOf(c *gin.Context) string { return c.GetHeader(IdempotencyKeyHeader) }

func (s *Server) supportAttributeOrderPayment(c *gin.Context) {
	s.supportAttribute(c, domain.TargetOrder)
}

func (s *Server) supportAttributeTopUpPayment(c *gin.Context) {
	s.supportAttribute(c, domain.TargetTopUp)
}

func (s *Server) supportAttribute(c *gin.Context, kind string) {
	var req attributeRequest
	if !s.decodeAction(c, &req) {
		return
	}
	in := ActionInput{Reason: req.Reason}
	if req.AmountCents != nil {
		in.AmountCents = *req.AmountCents
	}
	out, err := s.AttributePayment(c.Request.Context(), agentOf(c), keyOf(c), kind, c.Param("ref"), in)
	s.answerAction(c, out, err)
}

func (s *Server) supportExtend(c *gin.Context) {
	var req struct {
		Reason string `json:"reason"`
		Days   int    `json:"days"`
	}
	if !s.decodeAction(c, &req) {
		return
	}
	out, err := s.Extend(c.Request.Context(), agentOf(c), keyOf(c), c.Param("ref"), ActionInput{Reason: req.Reason, Days: req.Days})
	s.answerAction(c, out, err)
}

// supportReasonOnly answers an action whose body is only {"reason"}.
func (s *Server) supportReasonOnly(c *gin.Context,
	act func(ctx context.Context, a *Agent, key, target string, in ActionInput) (ActionOutcome, error), target string) {
	var req reasonRequest
	if !s.decodeAction(c, &req) {
		return
	}
	out, err := act(c.Request.Context(), agentOf(c), keyOf(c), target, ActionInput{Reason: req.Reason})
	s.answerAction(c, out, err)
}

func (s *Server) supportEndEarly(c *gin.Context) { s.supportReasonOnly(c, s.EndEarly, c.Param("ref")) }

func (s *Server) supportRetryProvisioning(c *gin.Context) {
	s.supportReasonOnly(c, s.RetryProvisioning, c.Param("ref"))
}

func (s *Server) supportCancelOrder(c *gin.Context) { s.supportCancel(c, domain.TargetOrder) }

func (s *Server) supportCancelTopUp(c *gin.Context) { s.supportCancel(c, domain.TargetTopUp) }

func (s *Server) supportCancel(c *gin.Context, kind string) {
	s.supportReasonOnly(c, func(ctx context.Context, a *Agent, key, ref string, in ActionInput) (ActionOutcome, error) {
		return s.SupportCancel(ctx, a, key, kind, ref, in)
	}, c.Param("ref"))
}

func (s *Server) supportRefund(c *gin.Context) {
	var req struct {
		Reason      string `json:"reason"`
		AmountCents int64  `json:"amount_cents"`
	}
	if !s.decodeAction(c, &req) {
		return
	}
	out, err := s.Refund(c.Request.Context(), agentOf(c), keyOf(c), c.Param("ref"), ActionInput{Reason: req.Reason, AmountCents: req.AmountCents})
	s.answerAction(c, out, err)
}

// supportCase is what support sees of any order or top-up: who, what
// happened, the payment requests, and the actions already taken.
type supportCase struct {
	Customer       domain.Account         `json:"customer"`
	Timeline       []domain.TimelineEvent `json:"timeline"`
	PaymentIntents []intentView           `json:"payment_intents"`
	SupportActions []domain.SupportAction `json:"support_actions"`
	// Exceptions are the received amounts of this case in support's
	// queue (settled ones too, for the record).
	Exceptions []exceptionView `json:"exceptions"`
}

func (s *Server) supportCase(ctx context.Context, ref string, accountID int64) (supportCase, error) {
	var sc supportCase
	var err error
	if sc.Customer, err = s.stores.Accounts.Account(ctx, accountID); err != nil {
		return sc, err
	}
	if sc.Timeline, err = s.stores.Orders.Timeline(ctx, ref, 0); err != nil {
		return sc, err
	}
	if sc.PaymentIntents, err = s.intentViews(ctx, ref); err != nil {
		return sc, err
	}
	if sc.SupportActions, err = s.stores.Support.ListSupportActions(ctx, ref); err != nil {
		return sc, err
	}
	es, err := s.stores.Support.ExceptionsOf(ctx, ref)
	sc.Exceptions = viewExceptions(es)
	return sc, err
}

// supportOrderDetail is the support view of an order. The access secret is
// never shown to support; only whether access exists and its description.
type supportOrderDetail struct {
	Order orderView `json:"order"`
	supportCase
	AccessPresent   bool                    `json:"access_present"`
	Access          *domain.Access          `json:"access,omitempty"`
	SupportRequests []domain.SupportRequest `json:"support_requests"`
	// Hosts are the machines the order held (SSH driver), oldest first.
	Hosts []domain.HostReservation `json:"hosts"`
	// AllowedActions are the support actions its workflow may take in its
	// status (workflows.SupportActionsFor): what the console offers.
	AllowedActions []string `json:"allowed_actions"`
}

func (s *Server) supportGetOrder(c *gin.Context) {
	d, err := s.SupportOrder(c.Request.Context(), agentOf(c), c.Param("ref"))
	s.answer(c, http.StatusOK, d, err)
}

type supportTopUpDetail struct {
	TopUp topUpView `json:"topup"`
	supportCase
	// AllowedActions: as an order's.
	AllowedActions []string `json:"allowed_actions"`
}

// allowedActions lists the support actions the workflow of a case in
// status may take (never null).
func allowedActions(kind, status string) []string {
	if a := workflows.SupportActionsFor(kind, status); a != nil {
		return a
	}
	return []string{}
}

func (s *Server) supportGetTopUp(c *gin.Context) {
	d, err := s.SupportTopUp(c.Request.Context(), agentOf(c), c.Param("ref"))
	s.answer(c, http.StatusOK, d, err)
}
