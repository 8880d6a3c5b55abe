package domain

import "fmt"

// Timeline event kinds, shown on an order's or a top-up's tracking. Every
// writer (the workflows' transitions, the store, the chain watchers) takes
// its kinds and keys from here.
const (
	EventCreated            = "created"
	EventPaymentRequested   = "payment_requested"
	EventPaymentClaimed     = "payment_claimed" // "J'ai payé": a claim, confirms nothing
	EventPaymentSeen        = "payment_seen"
	EventPaymentReverted    = "payment_reverted"
	EventPaymentConfirmed   = "payment_confirmed"
	EventPaymentPartial     = "payment_partial"
	EventPaymentToSupport   = "payment_to_support" // received after the workflow closed
	EventPaymentDust        = "payment_dust"       // a payment request's dust total, for support
	EventPaid               = "paid"
	EventWaitingForMachine  = "waiting_for_machine" // paid with no free machine: in line
	EventProvisioningStep   = "provisioning_step"
	EventProvisioningFailed = "provisioning_failed"
	EventProvisioningRetry  = "provisioning_retry"
	EventAccessAvailable    = "access_available"
	EventReminderSent       = "reminder_sent"
	EventExtended           = "extended"
	EventExtensionPaid      = "extension_paid"   // a customer's own extension, paid and applied
	EventExtensionLapsed    = "extension_lapsed" // a customer's extension not applied: its money stays on the balance
	EventEndRequested       = "end_requested"
	EventAccessRevoked      = "access_revoked"
	EventTeardownStuck      = "teardown_stuck" // revoking or releasing keeps failing: support is told, retries go on
	EventEnded              = "ended"
	EventCancelled          = "cancelled"
	EventExpired            = "expired"
	EventRefunded           = "refunded"
	// EventBalanceTakenBack: money paid out to the balance on a payment
	// the chain removed is debited (or given back, once mined again).
	EventBalanceTakenBack = "balance_taken_back"
	EventSupportAction    = "support_action"
	EventTopUpCredited    = "topup_credited"
	EventSupportAnswer    = "support_answer"     // an agent answered a support request
	EventAccessKeyChanged = "access_key_changed" // a customer's key change applied on the host, or failed
)

// Timeline keys. A key is unique per order or top-up: an event written
// twice under the same key is stored once, so each writer has its own
// prefix and no two events that must both be stored share a key.
const (
	KeyCreated   = "created"
	KeyPaid      = "paid"
	KeyWaiting   = "waiting-for-machine"
	KeyCredited  = "credited"
	KeyExpired   = "expired"
	KeyCancelled = "cancelled"
	KeyRevoked   = "revoked"
	KeyEnded     = "ended"
	// KeyTeardownStuck: a teardown step reported stuck, once per order.
	KeyTeardownStuck = "teardown-stuck"
)

// nth numbers a repeated key: the first is bare, the next ones get ":n".
func nth(key string, n int) string {
	if n <= 1 {
		return key
	}
	return fmt.Sprintf("%s:%d", key, n)
}

// KeySeen is the n-th "seen" of a payment (a payment re-seen after a reorg
// gets a new event).
func KeySeen(paymentKey string, n int) string { return nth("seen:"+paymentKey, n) }

// KeyReverted is the n-th revert of a payment before its confirmation.
func KeyReverted(paymentKey string, n int) string { return nth("reverted:"+paymentKey, n) }

// KeyRevertedConfirmed is the revert of a payment after its confirmation.
func KeyRevertedConfirmed(paymentKey string) string { return "reverted-confirmed:" + paymentKey }

// KeyDust is the n-th dust summary of a payment request.
func KeyDust(intentID string, version int64) string {
	return fmt.Sprintf("dust:%s:%d", intentID, version)
}

// KeyConfirmed is a payment's confirmation (or a support attribution).
func KeyConfirmed(paymentKey string) string { return "confirmed:" + paymentKey }

// KeyPartial is the "still missing" note after a counted payment.
func KeyPartial(paymentKey string) string { return "partial:" + paymentKey }

// KeySupport is the audit entry of a support action.
func KeySupport(actionID int64, action string) string {
	return fmt.Sprintf("support:%d:%s", actionID, action)
}

// KeyAttribution is the payment key of a support attribution.
func KeyAttribution(actionID int64) string { return fmt.Sprintf("support:%d", actionID) }

// KeyRefund is an order refund by support (its ledger posting and, when it
// closes the order, its status go with it).
func KeyRefund(actionID int64) string { return fmt.Sprintf("refund:%d", actionID) }

// KeyExceptionRefund is the refund of an unsettled received amount.
func KeyExceptionRefund(actionID int64) string { return fmt.Sprintf("exception-refund:%d", actionID) }

// KeyExceptionValue is support's valuation of a queued amount (once).
func KeyExceptionValue(exceptionID int64) string {
	return fmt.Sprintf("exception-value:%d", exceptionID)
}

// KeyExtend, KeyEndEarly: support's extension and early end.
func KeyExtend(actionID int64) string   { return fmt.Sprintf("extend:%d", actionID) }
func KeyEndEarly(actionID int64) string { return fmt.Sprintf("end-early:%d", actionID) }

// KeyExtensionPaid, KeyExtensionLapsed: a customer's extension (by its
// reference) paid and applied, or lapsed.
func KeyExtensionPaid(ref string) string   { return "extension:" + ref }
func KeyExtensionLapsed(ref string) string { return "extension-lapsed:" + ref }

// KeyProvisioning is a provisioning step of an attempt ("start", "done",
// "failed", "retry" or a step name).
func KeyProvisioning(attempt int, step string) string {
	return fmt.Sprintf("prov:%d:%s", attempt, step)
}

// KeyIntent and KeyClaim: a payment request and a "J'ai payé".
func KeyIntent(intentID string) string { return "intent:" + intentID }
func KeyClaim(claimID int64) string    { return fmt.Sprintf("claim:%d", claimID) }

// KeyAccessKey is the outcome of a customer's key change request.
func KeyAccessKey(requestID int64) string { return fmt.Sprintf("access-key:%d", requestID) }

// KeyAfterClose is a payment state received after the workflow closed.
func KeyAfterClose(state, paymentKey string) string {
	return fmt.Sprintf("closed:%s:%s", state, paymentKey)
}

// KeyToSupport is a payment the watcher could not count (another asset,
// after the request's watch window), put aside for support.
func KeyToSupport(paymentKey string) string { return "to-support:" + paymentKey }

// KeyToSupportReverted is the n-th reversal after its confirmation of a
// payment put aside for support.
func KeyToSupportReverted(paymentKey string, n int) string {
	return fmt.Sprintf("to-support-reverted:%s:%d", paymentKey, n)
}

// PaymentKey identifies an on-chain payment: (network, txid, output or log
// index). Seen twice, counted once.
func PaymentKey(network, txid string, index int64) string {
	return fmt.Sprintf("%s:%s:%d", network, txid, index)
}
