package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// statusFor maps a domain error code to its HTTP status. It is the only
// place where codes meet statuses.
func statusFor(code string) int {
	switch code {
	case domain.ECodeInvalid, domain.ECodeInvalidJSON, domain.ECodeVerificationInvalid, domain.ECodeVerificationExpired:
		return http.StatusBadRequest
	case domain.ECodeUnauthorized, ECodeTOTPRequired:
		return http.StatusUnauthorized
	case domain.ECodeForbidden, domain.ECodeWrongPassword, domain.ECodeOwnAction, domain.ECodeForbiddenRole, domain.ECodeSecondFactorRequired:
		return http.StatusForbidden
	case domain.ECodeNotFound, domain.ECodeSessionNotFound:
		return http.StatusNotFound
	case domain.ECodeConflict, domain.ECodeEmailTaken, domain.ECodeInsufficient, domain.ECodeNoCapacity,
		domain.ECodeMethodUnavailable, domain.ECodeIntentActive, domain.ECodeEmailUnverified, domain.ECodeEmailAlreadyVerified,
		domain.ECodeHostBusy, domain.ECodeHostDirty, domain.ECodeNoHostInventory, domain.ECodeIdempotencyKeyReused,
		domain.ECodeAgentDailyCap, domain.ECodeExtensionUnavailable, domain.ECodePayoutLimit, domain.ECodeQuoteExpired:
		return http.StatusConflict
	case domain.ECodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case domain.ECodeMediaType:
		return http.StatusUnsupportedMediaType
	case domain.ECodeValueOutOfBounds, domain.ECodeValueUnbounded, domain.ECodeExportTooLarge:
		return http.StatusUnprocessableEntity
	case domain.ECodeTooMany, domain.ECodeQuota:
		return http.StatusTooManyRequests
	case domain.ECodeUnavailable, domain.ECodeRateUnavailable, domain.ECodeWorkflowsUnavailable:
		return http.StatusServiceUnavailable
	case domain.ECodeInProgress, domain.ECodeAwaitingApproval:
		return http.StatusAccepted
	default:
		return http.StatusInternalServerError
	}
}

// errorBody is the shape of every error response.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

var (
	errUnavailable = &domain.Error{Code: domain.ECodeUnavailable,
		Message: "Le service est momentanément indisponible. Votre demande n'a peut-être pas abouti : vérifiez le suivi puis réessayez dans quelques instants."}
	errOrderNotFound   = &domain.Error{Code: domain.ECodeNotFound, Message: "Commande introuvable."}
	errTopUpNotFound   = &domain.Error{Code: domain.ECodeNotFound, Message: "Recharge introuvable."}
	errSessionRequired = &domain.Error{Code: domain.ECodeUnauthorized,
		Message: "Connectez-vous pour accéder à cette page."}
	errAgentRequired = &domain.Error{Code: domain.ECodeUnauthorized,
		Message: "Jeton d'agent du support requis (Authorization: Bearer)."}
	errCSRF = &domain.Error{Code: domain.ECodeForbidden,
		Message: "Jeton anti-CSRF manquant ou invalide : envoyez l'en-tête X-CSRF-Token reçu à la connexion."}
	errOrigin = &domain.Error{Code: domain.ECodeForbidden,
		Message: "Requête refusée : elle provient d'un autre site que Kernodeck."}
	errMediaType = &domain.Error{Code: domain.ECodeMediaType,
		Message: "Envoyez le corps de la requête en JSON, avec l'en-tête Content-Type: application/json."}
)

// fail writes err as the error response. A *domain.Error keeps its code,
// message and field; anything else is logged and answered with a generic
// internal error.
func (s *Server) fail(c *gin.Context, err error) {
	var de *domain.Error
	if !errors.As(err, &de) {
		if errors.Is(err, context.Canceled) && c.Request.Context().Err() != nil {
			// The client went away; nobody reads the answer.
			c.Abort()
			return
		}
		s.log.LogAttrs(c.Request.Context(), slog.LevelError, "internal error",
			slog.String("method", c.Request.Method), slog.String("route", c.FullPath()),
			slog.String("err", err.Error()))
		writeError(c, http.StatusInternalServerError, domain.ECodeInternal, domain.ErrorMessage(err), "")
		return
	}
	var qe *domain.QuotaError
	if errors.As(err, &qe) {
		s.refuseQuota(c, qe)
		return
	}
	var re *retryError
	if errors.As(err, &re) {
		c.Header("Retry-After", strconv.Itoa(re.seconds()))
	}
	writeError(c, statusFor(de.Code), de.Code, de.Message, de.Field)
}

// retryError is a refusal (too_many) to try again after a while; the
// answer carries Retry-After.
type retryError struct {
	refusal *domain.Error
	after   time.Duration
}

func (e *retryError) Error() string { return e.refusal.Error() }
func (e *retryError) Unwrap() error { return e.refusal }

// seconds is the wait in whole seconds, rounded up.
func (e *retryError) seconds() int { return int((e.after + time.Second - 1) / time.Second) }

// errTooMany refuses with too_many, saying what and how long to wait.
func errTooMany(retry time.Duration, what string) error {
	re := &retryError{after: retry}
	re.refusal = domain.Errorf(domain.ECodeTooMany, "%s Réessayez dans %s.", what, frenchWait(re.seconds()))
	return re
}

func writeError(c *gin.Context, status int, code, message, field string) {
	c.AbortWithStatusJSON(status, errorBody{Error: errorDetail{Code: code, Message: message, Field: field}})
}

// workflowError turns an error of the Workflows into what the API answers:
// a *domain.Error passes through with its code; anything else means the
// workflow service could not be reached (logged, 503).
func (s *Server) workflowError(ctx context.Context, op, ref string, err error) error {
	if err == nil {
		return nil
	}
	var de *domain.Error
	if errors.As(err, &de) {
		return de
	}
	s.log.LogAttrs(ctx, slog.LevelError, "workflow call failed",
		slog.String("op", op), slog.String("ref", ref), slog.String("err", err.Error()))
	return errUnavailable
}

// notFoundAs replaces a not-found error with a more specific one.
func notFoundAs(err error, nf *domain.Error) error {
	if domain.ErrorCode(err) == domain.ECodeNotFound {
		return nf
	}
	return err
}
