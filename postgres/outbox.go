package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// Timeline kinds written by other parts of the system that call for a mail.
const (
	// KindPaymentRequested is written when a payment request (address,
	// amount, deadline) is created for an order or a top-up.
	KindPaymentRequested = "payment_requested"
	// KindSupportAnswer is written when support answers a customer.
	KindSupportAnswer = domain.EventSupportAnswer
)

// Mail templates (package notify renders them).
const (
	MailOrderCreated     = "order_created"
	MailPaymentRequest   = "payment_request"
	MailPaymentConfirmed = "payment_confirmed"
	MailMachineReady     = "machine_ready"
	MailReminder         = "reminder"
	MailRentalEnded      = "rental_ended"
	MailTopUpCredited    = "topup_credited"
	MailSupportAnswer    = "support_answer"
	MailExtensionPaid    = "extension_paid"
	// A payout asked, done (confirmed on chain) or declined by support.
	MailPayoutRequested = "payout_requested"
	MailPayoutDone      = "payout_done"
	MailPayoutDeclined  = "payout_declined"
	// MailEmailVerification carries the link that confirms the address:
	// the only mail an account gets until it is confirmed.
	MailEmailVerification = "email_verification"
)

// MailTemplates maps the timeline event kinds that call for a mail to the
// template announcing them. The mail is queued in the transaction that
// writes the event, so it exists exactly when the event does.
var MailTemplates = map[string]string{
	domain.EventCreated:         MailOrderCreated,
	KindPaymentRequested:        MailPaymentRequest,
	domain.EventPaid:            MailPaymentConfirmed,
	domain.EventAccessAvailable: MailMachineReady,
	domain.EventReminderSent:    MailReminder,
	domain.EventEnded:           MailRentalEnded,
	domain.EventTopUpCredited:   MailTopUpCredited,
	KindSupportAnswer:           MailSupportAnswer,
	domain.EventExtensionPaid:   MailExtensionPaid,
}

// MailData is what a queued mail carries: enough to render it later without
// reading state that may have moved on. Never a secret.
type MailData struct {
	Kind    string         `json:"kind"`
	Message string         `json:"message"` // the timeline's French message
	Event   map[string]any `json:"event,omitempty"`
	// Order (empty for top-ups).
	GPUModel string `json:"gpu_model,omitempty"`
	// GPUName is GPUModel's display name in the catalog when the mail is
	// sent (notify reads it then, not kept in the outbox).
	GPUName      string     `json:"-"`
	Lots         int        `json:"lots,omitempty"`
	TotalGPUs    int        `json:"total_gpus,omitempty"`
	DurationDays int        `json:"duration_days,omitempty"`
	TotalCents   int64      `json:"total_cents,omitempty"`
	PeriodStart  *time.Time `json:"period_start,omitempty"`
	PeriodEnd    *time.Time `json:"period_end,omitempty"`
	// Top-up.
	AmountCents int64 `json:"amount_cents,omitempty"`
	At          time.Time
}

// orderMailRow is the order state a mail describes.
type orderMailRow struct {
	AccountID    int64      `db:"account_id"`
	GPUModel     string     `db:"gpu_model"`
	Lots         int        `db:"lots"`
	TotalGPUs    int        `db:"total_gpus"`
	DurationDays int        `db:"duration_days"`
	TotalCents   int64      `db:"total_cents"`
	PeriodStart  *time.Time `db:"period_start"`
	PeriodEnd    *time.Time `db:"period_end"`
}

const orderMailColumns = `account_id, gpu_model, lots, total_gpus, duration_days, total_cents, period_start, period_end`

func (o orderMailRow) data(kind, message string, event map[string]any, at time.Time) MailData {
	return MailData{Kind: kind, Message: message, Event: event, GPUModel: o.GPUModel, Lots: o.Lots,
		TotalGPUs: o.TotalGPUs, DurationDays: o.DurationDays, TotalCents: o.TotalCents,
		PeriodStart: o.PeriodStart, PeriodEnd: o.PeriodEnd, At: at}
}

// queueMail inserts a mail into the outbox once per (ref, event key), in the
// caller's transaction. Kinds without a template queue nothing, and nothing
// is queued for an account whose address is not confirmed: a stranger's
// address registered by someone else is never mailed more than the
// confirmation link.
func queueMail(ctx context.Context, tx *sqlx.Tx, accountID int64, ref, eventKey, kind string, data MailData) error {
	template, ok := MailTemplates[kind]
	if !ok {
		return nil
	}
	if data.At.IsZero() {
		data.At = time.Now().UTC()
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("mail data: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO mail_outbox (outbox_key, account_id, template, ref, data)
		SELECT $1, $2, $3, $4, $5 FROM accounts WHERE id = $2 AND email_verified_at IS NOT NULL
		ON CONFLICT (outbox_key) DO NOTHING`,
		"mail:"+ref+":"+eventKey, accountID, template, ref, string(raw)); err != nil {
		return fmt.Errorf("queue mail %s for %s: %w", template, ref, err)
	}
	return nil
}

// queueMailForRef queues the mail of an event written outside
// RecordOrderEvent / RecordTopUpEvent (payment requests, balance payments,
// credits, support answers), reading the order or top-up it concerns.
func queueMailForRef(ctx context.Context, tx *sqlx.Tx, ref, key, kind, message string, data map[string]any, at time.Time) error {
	if _, ok := MailTemplates[kind]; !ok {
		return nil
	}
	if strings.HasPrefix(ref, domain.TopUpRefPrefix+"-") {
		var t struct {
			AccountID   int64 `db:"account_id"`
			AmountCents int64 `db:"amount_cents"`
		}
		err := tx.GetContext(ctx, &t, `SELECT account_id, amount_cents FROM topups WHERE ref = $1`, ref)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // a timeline without a top-up row has nobody to write to
		}
		if err != nil {
			return fmt.Errorf("mail for %s: %w", ref, err)
		}
		return queueMail(ctx, tx, t.AccountID, ref, key, kind, MailData{
			Kind: kind, Message: message, Event: data, AmountCents: t.AmountCents, At: at})
	}
	var o orderMailRow
	err := tx.GetContext(ctx, &o, `SELECT `+orderMailColumns+` FROM orders WHERE ref = $1`, ref)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // no order row: nobody to write to
	}
	if err != nil {
		return fmt.Errorf("mail for %s: %w", ref, err)
	}
	return queueMail(ctx, tx, o.AccountID, ref, key, kind, o.data(kind, message, data, at))
}
