// Package domain holds Kernodeck's domain types, the error codes every layer
// speaks, and the small rules (catalog, money, references) shared by the API,
// the workflows and the store.
package domain

import (
	"errors"
	"fmt"
)

// Error codes. They are stable: clients match on them. Each maps to one HTTP
// status in api.statusFor.
const (
	ECodeInvalid      = "invalid"                // input is malformed or out of range (400)
	ECodeInvalidJSON  = "invalid_json"           // body is not valid JSON / has unknown fields (400)
	ECodeUnauthorized = "unauthorized"           // no or bad credentials (401)
	ECodeForbidden    = "forbidden"              // authenticated but not allowed, e.g. CSRF (403)
	ECodeNotFound     = "not_found"              // absent, or not yours (404)
	ECodeConflict     = "conflict"               // state does not allow it (409)
	ECodeEmailTaken   = "email_unavailable"      // registration refused (409)
	ECodeInsufficient = "insufficient_balance"   // balance does not cover the total (409)
	ECodeNoCapacity   = "no_capacity"            // no GPUs free for that model (409)
	ECodeTooMany      = "too_many_attempts"      // throttled (429)
	ECodeTooLarge     = "body_too_large"         // request body over the limit (413)
	ECodeMediaType    = "unsupported_media_type" // a JSON body not sent as Content-Type: application/json (415)
	ECodeUnavailable  = "unavailable"            // a dependency (Temporal, DB) is down (503)
	ECodeInProgress   = "in_progress"            // accepted, applied once a dependency answers; do not resend (202)
	ECodeInternal     = "internal"               // bug or unexpected failure (500)

	ECodeQuota = "quota_exceeded" // a quota on what an account or network may create or open (429, Retry-After)
	// A write that needs the workflow service (Temporal) refused before
	// anything is written, while that service does not answer; reads go on
	// (503, Retry-After). Unlike unavailable, nothing happened: resend later.
	ECodeWorkflowsUnavailable = "workflows_unavailable"

	ECodeMethodUnavailable = "method_unavailable"     // payment method not offered now (409)
	ECodeRateUnavailable   = "rate_unavailable"       // no fresh rate for the asset (503)
	ECodeIntentActive      = "payment_request_active" // a payment request is still valid (409)
	// Support's value of a payment received in another asset (ValueBound):
	ECodeValueOutOfBounds = "value_out_of_bounds" // off its amount at the rate observed when it came in, beyond the tolerance (422)
	ECodeValueUnbounded   = "value_unbounded"     // no rate observed near its reception: a second agent must approve the value (422)

	ECodeEmailUnverified      = "email_unverified"          // the address is not confirmed yet: one unpaid order at most (409)
	ECodeEmailAlreadyVerified = "email_already_verified"    // nothing to resend: the address is confirmed (409)
	ECodeVerificationInvalid  = "verification_link_invalid" // a confirmation link forged, altered or not for this account (400)
	ECodeVerificationExpired  = "verification_link_expired" // a confirmation link past its expiry (400)

	ECodeWrongPassword   = "wrong_password"    // the current password given to change it is not the account's (403)
	ECodeSessionNotFound = "session_not_found" // no such session among the account's own (404)

	ECodeHostBusy        = "host_busy"                  // an order holds the host (409)
	ECodeHostDirty       = "host_dirty"                 // something of a past customer is left on the host: it stays out of rotation (409)
	ECodeNoHostInventory = "host_inventory_unavailable" // no inventory of hosts: the machine driver is not SSH's (409)

	ECodeIdempotencyKeyReused = "idempotency_key_reused" // a support action's key was sent before with another action, target, reason or parameters (409)
	ECodeAwaitingApproval     = "awaiting_approval"      // a support action recorded, carried out once a second agent approves it (202)
	ECodeOwnAction            = "own_action"             // an agent reviewing their own action: a second agent must (403)
	ECodeAgentDailyCap        = "agent_daily_cap"        // the agent's money actions of the last 24 h would pass their daily cap (409)
	ECodeForbiddenRole        = "forbidden_role"         // the agent's support roles do not allow it: nothing recorded nor changed (403)
	ECodeExportTooLarge       = "export_too_large"       // an export's filter matches more rows than an export holds: narrow it (422)

	ECodeExtensionUnavailable = "extension_unavailable"  // the rental's machine is not free for the added days (409)
	ECodePayoutLimit          = "payout_limit"           // under the minimum, or over the account's daily payout limit (409)
	ECodeSecondFactorRequired = "second_factor_required" // a payout needs the account's second factor turned on (403)
	ECodeQuoteExpired         = "quote_expired"          // a payout's locked rate expired before it was confirmed (409)
)

// Error is a domain error with a stable code and a French, customer-facing
// message. Internal details never go into Message.
type Error struct {
	Code    string
	Message string
	// Field names the offending input field, when there is one.
	Field string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s (%s): %s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Errorf builds a domain error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldError builds an ECodeInvalid error about one field.
func FieldError(field, message string) *Error {
	return &Error{Code: ECodeInvalid, Message: message, Field: field}
}

// ErrorCode returns the code of err if it wraps a *Error, else ECodeInternal.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err == nil {
		return ""
	}
	return ECodeInternal
}

// ErrorMessage returns the French message of err if it wraps a *Error, else
// a generic one (the details stay in the logs).
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "Une erreur interne est survenue. Réessayez plus tard ou contactez le support."
}

// Common errors.
var (
	ErrNotFound = &Error{Code: ECodeNotFound, Message: "Ressource introuvable."}
	// ErrWrongPassword refuses a password change whose current password is wrong.
	ErrWrongPassword = &Error{Code: ECodeWrongPassword, Field: "current_password",
		Message: "Le mot de passe actuel est incorrect : rien n'a été changé."}
	// ErrSessionNotFound refuses ending a session that is not one of the
	// account's open sessions (another account's, ended, or made up): the
	// same answer whichever, nothing changed.
	ErrSessionNotFound = &Error{Code: ECodeSessionNotFound,
		Message: "Cette session n'est pas une session ouverte de votre compte : rien n'a été changé."}
)
