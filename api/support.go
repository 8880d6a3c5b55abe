package api

import (
	"cmp"
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

type targetKind int

const (
	targetOrder targetKind = iota
	targetTopUp
)

func reasonOf(r string) (string, error) {
	return text("reason", r, 3, 2000, "Indiquez la raison de l'action (3 à 2 000 caractères).")
}

// supportActionError is the body of a refused or failed support action:
// the usual error, plus the audit record.
type supportActionError struct {
	Error  errorDetail          `json:"error"`
	Action domain.SupportAction `json:"action"`
}

// runSupportAction checks the target exists, records the action (who, what,
// why, parameters) BEFORE carrying it out, calls the workflow with the
// action's ID as idempotency key, then writes the outcome.
func (s *Server) runSupportAction(c *gin.Context, kind targetKind, action, reason string, params any,
	run func(ctx context.Context, actionID int64, agent string) error) {
	ref := c.Param("ref")
	var err error
	if kind == targetOrder {
		_, err = s.store.GetOrder(c.Request.Context(), ref)
		err = notFoundAs(err, errOrderNotFound)
	} else {
		_, err = s.store.GetTopUp(c.Request.Context(), ref)
		err = notFoundAs(err, errTopUpNotFound)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	s.runSupportActionOn(c, ref, action, reason, params, run)
}

// runSupportActionOn is runSupportAction on a target already checked: the
// request's idempotency key is required (support_keys.go).
func (s *Server) runSupportActionOn(c *gin.Context, ref, action, reason string, params any,
	run func(ctx context.Context, actionID int64, agent string) error) {
	key, err := idempotencyKey(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	done, runErr, err := s.runKeyedAction(c, c.GetString(ctxAgent), key, ref, action, reason, params, run)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeSupportAnswer(c, done, runErr)
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
	if rec.ID, err = s.store.InsertSupportAction(ctx, rec); err != nil {
		return done, nil, err
	}
	rec.CreatedAt = time.Now()
	return s.carryOut(ctx, rec, run)
}

// runKeyedAction is runAction under an idempotency key (none: ""): the
// key sent before runs nothing, and answers what its first request was
// answered (recordKeyedAction).
func (s *Server) runKeyedAction(c *gin.Context, agent, key, ref, action, reason string, params any,
	run func(ctx context.Context, actionID int64, agent string) error) (done domain.SupportAction, runErr, err error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return done, nil, err
	}
	return s.runRecorded(c, key, domain.SupportAction{Agent: agent, Action: action, TargetRef: ref, Reason: reason, Params: raw}, run)
}

// runRecorded records rec (under key, if any) and carries it out, unless
// it needs a second agent: it is then only recorded, and answered
// awaiting_approval (four_eyes.go).
func (s *Server) runRecorded(c *gin.Context, key string, rec domain.SupportAction,
	run func(ctx context.Context, actionID int64, agent string) error) (done domain.SupportAction, runErr, err error) {
	var id int64
	if key == "" {
		id, err = s.store.InsertSupportAction(c.Request.Context(), rec)
	} else {
		var replay bool
		id, replay, done, runErr, err = s.recordKeyedAction(c, rec, key)
		if replay || err != nil {
			return done, runErr, err
		}
	}
	if err != nil {
		return done, nil, err
	}
	rec.ID, rec.CreatedAt = id, time.Now()
	if rec.NeedsApproval {
		s.log.Info("support action awaits a second agent", "id", id, "agent", rec.Agent, "action", rec.Action,
			"ref", rec.TargetRef, "money_cents", rec.MoneyCents)
		return rec, domain.ErrAwaitingApproval(id), nil
	}
	return s.carryOut(c.Request.Context(), rec, run)
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
	done, err = s.store.CompleteSupportActionAnswer(ctx, id, outcome, detail, answerOf(runErr))
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

// decodeReason decodes a body that is only {"reason"} and checks it.
func (s *Server) decodeReason(c *gin.Context) (string, bool) {
	var req reasonRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return "", false
	}
	reason, err := reasonOf(req.Reason)
	if err != nil {
		s.fail(c, err)
		return "", false
	}
	return reason, true
}

type attributeRequest struct {
	Reason string `json:"reason"`
	// AmountCents is the USD value attributed; absent or 0 means the full
	// amount due.
	AmountCents *int64 `json:"amount_cents"`
}

func (s *Server) decodeAttribution(c *gin.Context) (attributeRequest, int64, bool) {
	var req attributeRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return req, 0, false
	}
	reason, err := reasonOf(req.Reason)
	if err != nil {
		s.fail(c, err)
		return req, 0, false
	}
	req.Reason = reason
	var amount int64
	if req.AmountCents != nil {
		amount = *req.AmountCents
	}
	// The same rule as the workflow's (the action ID is given later).
	if err := (domain.Attribution{AmountCents: amount}).ValidateParams(); err != nil {
		s.fail(c, err)
		return req, 0, false
	}
	return req, amount, true
}

func (s *Server) supportAttributeOrderPayment(c *gin.Context) {
	req, amount, ok := s.decodeAttribution(c)
	if !ok {
		return
	}
	o, err := s.store.GetOrder(c.Request.Context(), c.Param("ref"))
	if err != nil {
		s.fail(c, notFoundAs(err, errOrderNotFound))
		return
	}
	// All that is due (0) moves at most the order's total.
	s.runMoneyAction(c, o.Ref, domain.ActionAttributePayment, req.Reason, map[string]any{"amount_cents": amount},
		cmp.Or(amount, o.TotalCents), false)
}

func (s *Server) supportAttributeTopUpPayment(c *gin.Context) {
	req, amount, ok := s.decodeAttribution(c)
	if !ok {
		return
	}
	t, err := s.store.GetTopUp(c.Request.Context(), c.Param("ref"))
	if err != nil {
		s.fail(c, notFoundAs(err, errTopUpNotFound))
		return
	}
	s.runMoneyAction(c, t.Ref, domain.ActionAttributePayment, req.Reason, map[string]any{"amount_cents": amount},
		cmp.Or(amount, t.AmountCents), false)
}

func (s *Server) supportExtend(c *gin.Context) {
	var req struct {
		Reason string `json:"reason"`
		Days   int    `json:"days"`
	}
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	reason, err := reasonOf(req.Reason)
	if err != nil {
		s.fail(c, err)
		return
	}
	// The workflow validates the same domain type the same way.
	if err := (domain.Extension{Days: req.Days}).ValidateParams(); err != nil {
		s.fail(c, err)
		return
	}
	s.runSupportAction(c, targetOrder, domain.ActionExtend, reason, map[string]any{"days": req.Days},
		func(ctx context.Context, id int64, agent string) error {
			return s.wf.Extend(ctx, c.Param("ref"),
				workflows.Extension{ActionID: id, Agent: agent, Days: req.Days, Reason: reason})
		})
}

func (s *Server) supportEndEarly(c *gin.Context) {
	reason, ok := s.decodeReason(c)
	if !ok {
		return
	}
	s.runSupportAction(c, targetOrder, domain.ActionEndEarly, reason, map[string]any{},
		func(ctx context.Context, id int64, agent string) error {
			return s.wf.EndEarly(ctx, c.Param("ref"), workflows.SupportAction{ActionID: id, Agent: agent, Reason: reason})
		})
}

func (s *Server) supportRetryProvisioning(c *gin.Context) {
	reason, ok := s.decodeReason(c)
	if !ok {
		return
	}
	s.runSupportAction(c, targetOrder, domain.ActionRetryProvisioning, reason, map[string]any{},
		func(ctx context.Context, id int64, agent string) error {
			return s.wf.RetryProvisioning(ctx, c.Param("ref"), workflows.SupportAction{ActionID: id, Agent: agent, Reason: reason})
		})
}

func (s *Server) supportCancelOrder(c *gin.Context) {
	reason, ok := s.decodeReason(c)
	if !ok {
		return
	}
	s.runSupportAction(c, targetOrder, domain.ActionCancel, reason, map[string]any{},
		func(ctx context.Context, id int64, agent string) error {
			return s.wf.CancelOrder(ctx, c.Param("ref"),
				workflows.CancelRequest{By: "support", ActionID: id, Agent: agent, Reason: reason})
		})
}

func (s *Server) supportCancelTopUp(c *gin.Context) {
	reason, ok := s.decodeReason(c)
	if !ok {
		return
	}
	s.runSupportAction(c, targetTopUp, domain.ActionCancel, reason, map[string]any{},
		func(ctx context.Context, id int64, agent string) error {
			return s.wf.CancelTopUp(ctx, c.Param("ref"),
				workflows.CancelRequest{By: "support", ActionID: id, Agent: agent, Reason: reason})
		})
}

func (s *Server) supportRefund(c *gin.Context) {
	var req struct {
		Reason      string `json:"reason"`
		AmountCents int64  `json:"amount_cents"`
	}
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	reason, err := reasonOf(req.Reason)
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := (domain.Refund{AmountCents: req.AmountCents}).ValidateParams(); err != nil {
		s.fail(c, err)
		return
	}
	o, err := s.store.GetOrder(c.Request.Context(), c.Param("ref"))
	if err != nil {
		s.fail(c, notFoundAs(err, errOrderNotFound))
		return
	}
	s.runMoneyAction(c, o.Ref, domain.ActionRefund, reason, map[string]any{"amount_cents": req.AmountCents}, req.AmountCents, false)
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
	if sc.Customer, err = s.store.Account(ctx, accountID); err != nil {
		return sc, err
	}
	if sc.Timeline, err = s.store.Timeline(ctx, ref, 0); err != nil {
		return sc, err
	}
	if sc.PaymentIntents, err = s.intentViews(ctx, ref); err != nil {
		return sc, err
	}
	if sc.SupportActions, err = s.store.ListSupportActions(ctx, ref); err != nil {
		return sc, err
	}
	es, err := s.store.ExceptionsOf(ctx, ref)
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
	ctx := c.Request.Context()
	o, err := s.store.GetOrder(ctx, c.Param("ref"))
	if err != nil {
		s.fail(c, notFoundAs(err, errOrderNotFound))
		return
	}
	d := supportOrderDetail{Order: viewOrder(o), AllowedActions: allowedActions(domain.TargetOrder, o.Status)}
	if d.supportCase, err = s.supportCase(ctx, o.Ref, o.AccountID); err != nil {
		s.fail(c, err)
		return
	}
	acc, err := s.store.Access(ctx, o.Ref)
	switch {
	case err == nil:
		acc.Password = ""
		d.AccessPresent, d.Access = true, &acc
	case domain.ErrorCode(err) != domain.ECodeNotFound:
		s.fail(c, err)
		return
	}
	if d.SupportRequests, err = s.store.ListSupportRequests(ctx, o.Ref, 0); err != nil {
		s.fail(c, err)
		return
	}
	if d.Hosts, err = s.store.OrderHosts(ctx, o.Ref); err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, d)
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
	ctx := c.Request.Context()
	t, err := s.store.GetTopUp(ctx, c.Param("ref"))
	if err != nil {
		s.fail(c, notFoundAs(err, errTopUpNotFound))
		return
	}
	d := supportTopUpDetail{TopUp: viewTopUp(t), AllowedActions: allowedActions(domain.TargetTopUp, t.Status)}
	if d.supportCase, err = s.supportCase(ctx, t.Ref, t.AccountID); err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, d)
}
