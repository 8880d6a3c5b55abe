package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// Support actions are idempotent (issue 36, item 4). Every support action
// request carries a single-use key in the Idempotency-Key header, unique
// per agent, recorded on its support_actions row (migration 00063). The
// same key sent again carries nothing out: it gets the first request's
// answer (same status and body, with Idempotent-Replayed: true), or 202
// in_progress while that request has no outcome yet; the key sent with
// another action, target, reason or parameters is refused (409
// idempotency_key_reused). The console puts a fresh key in each
// confirmation page; the CLI makes one per command.

// IdempotencyKeyHeader carries a support action's key.
const IdempotencyKeyHeader = "Idempotency-Key"

// ReplayedHeader is set (to "true") on an answer given again for a key
// already used: nothing was carried out by that request.
const ReplayedHeader = "Idempotent-Replayed"

// KeyedSupportStore records support actions under their idempotency key.
type KeyedSupportStore interface {
	// InsertKeyedSupportAction records a, unless its agent sent key
	// before: inserted false, and the action first recorded under it.
	// A new money action past its agent's
	// daily cap (capCents) is refused (agent_daily_cap), nothing recorded.
	InsertKeyedSupportAction(ctx context.Context, a domain.SupportAction, key string, capCents int64) (first domain.KeyedSupportAction, inserted bool, err error)
	// CompleteSupportActionAnswer writes the outcome with the error the
	// action was answered (nil: none).
	CompleteSupportActionAnswer(ctx context.Context, id int64, outcome, detail string, answer *domain.Error) (domain.SupportAction, error)
}

var (
	errKeyMissing = domain.FieldError("idempotency_key", fmt.Sprintf(
		"Indiquez une clé d'idempotence dans l'en-tête %s (%d à %d caractères : lettres, chiffres, « . », « _ », « : » ou « - »), "+
			"une nouvelle pour chaque action : renvoyée avec la même clé, une action n'est pas exécutée deux fois.",
		IdempotencyKeyHeader, domain.IdempotencyKeyMin, domain.IdempotencyKeyMax))
	errKeyReused = domain.Errorf(domain.ECodeIdempotencyKeyReused,
		"Cette clé d'idempotence a déjà servi pour une autre action (type, dossier, raison ou paramètres différents) : rien n'a été fait. "+
			"Utilisez une nouvelle clé pour une nouvelle action.")
)

// recordKeyedAction records rec under key, or finds the action its agent
// sent under key before: replay is then true, with that action and the
// error it was answered (runErr nil: done), or an in_progress error
// while it has no outcome; a different request under the key is refused
// (runErr errKeyReused, with the action the key was used for).
func (s *Server) recordKeyedAction(ctx context.Context, rec domain.SupportAction, key string) (id int64, replay bool,
	first domain.SupportAction, runErr, err error) {
	got, inserted, err := s.stores.Support.InsertKeyedSupportAction(ctx, rec, key, s.cfg.SupportLimits.AgentDailyCapCents)
	if err != nil {
		return 0, false, first, nil, err
	}
	if inserted {
		return got.ID, false, first, nil, nil
	}
	if !got.SameRequest(rec) {
		return got.ID, true, got.SupportAction, errKeyReused, nil
	}
	s.log.Info("support action key sent again", "id", got.ID, "agent", rec.Agent, "action", rec.Action, "ref", rec.TargetRef)
	switch {
	case got.AwaitingApproval():
		runErr = domain.ErrAwaitingApproval(got.ID)
	case got.Outcome == nil:
		runErr = domain.Errorf(domain.ECodeInProgress,
			"L'action n° %d, envoyée avec cette clé, est en cours : elle n'est pas exécutée une deuxième fois. "+
				"Son résultat s'inscrira au dossier.", got.ID)
	case got.Answer != nil:
		runErr = got.Answer
	}
	return got.ID, true, got.SupportAction, runErr, nil
}

// answerOf is the *domain.Error an answered error carries (nil: none).
func answerOf(err error) *domain.Error {
	if err == nil {
		return nil
	}
	var de *domain.Error
	if errors.As(err, &de) {
		return de
	}
	return &domain.Error{Code: domain.ECodeInternal, Message: domain.ErrorMessage(err)}
}

// writeSupportAnswer answers a support action: 200 with its record, or
// its error (runErr, a *domain.Error) with the record.
func writeSupportAnswer(c *gin.Context, done domain.SupportAction, runErr error) {
	if runErr == nil {
		c.JSON(http.StatusOK, gin.H{"action": done})
		return
	}
	e := answerOf(runErr)
	c.AbortWithStatusJSON(statusFor(e.Code), supportActionError{
		Error:  errorDetail{Code: e.Code, Message: e.Message, Field: e.Field},
		Action: done,
	})
}
