package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/wneessen/go-mail"

	"github.com/kernodeck/kernodeck/mailverify"
	"github.com/kernodeck/kernodeck/postgres"
)

// Defaults for the zero fields of Dispatcher.
const (
	DefaultPoll        = 5 * time.Second
	DefaultLease       = 2 * time.Minute
	DefaultMaxAttempts = 12
	DefaultBatch       = 20
)

// Sender delivers one message. A nil error means the server accepted it.
type Sender interface {
	Send(ctx context.Context, m *mail.Msg) error
}

// Dispatcher sends the outbox's pending mails.
//
// Delivery is at most once: a row is claimed (state sending, with a lease)
// in its own committed transaction before SMTP starts, and marked sent after
// the server accepts it. A failure reported by the server puts it back with
// a growing delay. A row still "sending" when its lease runs out means the
// process died mid-delivery, when the server may already have the message:
// it becomes "unknown" and is left to an operator rather than sent twice.
type Dispatcher struct {
	DB       *sqlx.DB
	Sender   Sender
	Renderer *Renderer
	// From is the sender address; its domain also ends each Message-ID.
	From        string
	Poll        time.Duration
	Lease       time.Duration
	MaxAttempts int
	Batch       int
	Logger      *slog.Logger
	// Links seals the address confirmation links (the API checks them with
	// the same keyring). Without it a confirmation mail cannot be built and
	// fails.
	Links *mailverify.Signer
}

func (d *Dispatcher) setDefaults() {
	if d.Poll <= 0 {
		d.Poll = DefaultPoll
	}
	if d.Lease <= 0 {
		d.Lease = DefaultLease
	}
	if d.MaxAttempts <= 0 {
		d.MaxAttempts = DefaultMaxAttempts
	}
	if d.Batch <= 0 {
		d.Batch = DefaultBatch
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
}

// Run sends until ctx ends. A mail being sent when ctx ends is finished
// first, so a graceful stop never leaves one in doubt.
func (d *Dispatcher) Run(ctx context.Context) error {
	d.setDefaults()
	t := time.NewTicker(d.Poll)
	defer t.Stop()
	for {
		if _, err := d.Once(ctx); err != nil && ctx.Err() == nil {
			d.Logger.Warn("mail dispatch pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// MessageID is the stable Message-ID of an outbox row: derived from its
// key, so every attempt for one mail carries the same ID and receivers can
// recognise a copy.
func MessageID(outboxKey, from string) string {
	domain := "kernodeck.invalid"
	if _, d, ok := strings.Cut(from, "@"); ok {
		domain = strings.Trim(d, "> ")
	}
	sum := sha256.Sum256([]byte(outboxKey))
	return hex.EncodeToString(sum[:16]) + "@" + domain
}

type outboxRow struct {
	ID        int64  `db:"id"`
	Key       string `db:"outbox_key"`
	Template  string `db:"template"`
	Ref       string `db:"ref"`
	Data      []byte `db:"data"`
	Attempts  int    `db:"attempts"`
	AccountID int64  `db:"account_id"`
	Email     string `db:"email"`
	FirstName string `db:"first_name"`
	GPUName   string `db:"gpu_name"` // the catalog's name of the order's model
	// Owner is the first name of another account that confirmed the
	// address: a registration's link is then replaced by a notice to them.
	Owner string `db:"owner"`
}

// Once runs one pass: gives up on expired leases, then sends what is due.
// It returns how many mails were sent.
func (d *Dispatcher) Once(ctx context.Context) (int, error) {
	d.setDefaults()
	res, err := d.DB.ExecContext(ctx, `UPDATE mail_outbox SET state = 'unknown',
		last_error = 'interrupted during SMTP delivery: not resent, to never send twice'
		WHERE state = 'sending' AND lease_until < now()`)
	if err != nil {
		return 0, fmt.Errorf("expire mail leases: %w", err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		d.Logger.Error("mails interrupted mid-delivery, left for an operator (state unknown)", "count", n)
	}
	sent := 0
	for ctx.Err() == nil {
		rows, err := d.claim(ctx)
		if err != nil {
			return sent, err
		}
		if len(rows) == 0 {
			return sent, nil
		}
		for _, r := range rows {
			// Finish the claimed batch even if ctx ends: each row is marked.
			if d.deliver(context.WithoutCancel(ctx), r) {
				sent++
			}
		}
	}
	return sent, nil
}

// claim takes up to Batch due rows, skipping rows another dispatcher holds,
// and commits them as sending with a lease. An account whose address is not
// confirmed gets its confirmation mails only: anything else queued for it
// (the store queues nothing, this is the second lock) stays held.
func (d *Dispatcher) claim(ctx context.Context) ([]outboxRow, error) {
	var rows []outboxRow
	err := d.DB.SelectContext(ctx, &rows, `
		WITH due AS (
			SELECT o.id FROM mail_outbox o JOIN accounts a ON a.id = o.account_id
			WHERE o.state = 'pending' AND o.next_attempt_at <= now()
				AND (a.email_verified_at IS NOT NULL OR o.template = $3)
			ORDER BY o.next_attempt_at, o.id LIMIT $1
			FOR UPDATE OF o SKIP LOCKED)
		UPDATE mail_outbox m SET state = 'sending', attempts = m.attempts + 1,
			lease_until = now() + make_interval(secs => $2)
		FROM due, accounts a
		WHERE m.id = due.id AND a.id = m.account_id
		RETURNING m.id, m.outbox_key, m.template, m.ref, m.data, m.attempts, m.account_id, a.email, a.first_name,
			COALESCE((SELECT g.display_name FROM gpu_models g WHERE g.model = m.data->>'gpu_model'), '') AS gpu_name,
			COALESCE((SELECT o.first_name FROM accounts o WHERE m.template = $3 AND lower(o.email) = lower(a.email)
				AND o.id <> a.id AND o.email_verified_at IS NOT NULL), '') AS owner`,
		d.Batch, d.Lease.Seconds(), postgres.MailEmailVerification)
	if err != nil {
		return nil, fmt.Errorf("claim mails: %w", err)
	}
	return rows, nil
}

func (d *Dispatcher) message(r outboxRow) (*mail.Msg, error) {
	var rendered Mail
	if r.Template == postgres.MailEmailVerification && r.Owner != "" {
		// Someone registered an address that is already an account's: its
		// owner is told, with nothing from the registration (its names are
		// the registrant's words), and no link is sealed.
		var err error
		if rendered, err = d.Renderer.RenderRegistrationAttempt(r.Owner); err != nil {
			return nil, err
		}
	} else if r.Template == postgres.MailEmailVerification {
		if d.Links == nil {
			return nil, errors.New("confirmation mail without a link signer (Dispatcher.Links)")
		}
		// Sealed now: the link's lifetime starts when the mail leaves.
		token, expires := d.Links.Token(r.AccountID, r.Email)
		var err error
		if rendered, err = d.Renderer.RenderVerification(r.FirstName, token, expires); err != nil {
			return nil, err
		}
	} else {
		var data postgres.MailData
		if err := json.Unmarshal(r.Data, &data); err != nil {
			return nil, fmt.Errorf("mail data: %w", err)
		}
		data.GPUName = r.GPUName
		var err error
		if rendered, err = d.Renderer.Render(r.Template, r.FirstName, r.Ref, data); err != nil {
			return nil, err
		}
	}
	m := mail.NewMsg()
	if err := m.From(d.From); err != nil {
		return nil, fmt.Errorf("from %q: %w", d.From, err)
	}
	if err := m.To(r.Email); err != nil {
		return nil, fmt.Errorf("to: %w", err)
	}
	m.Subject(rendered.Subject)
	m.SetMessageIDWithValue(MessageID(r.Key, d.From))
	m.SetDate()
	m.SetGenHeader("Auto-Submitted", "auto-generated")
	m.SetBodyString(mail.TypeTextPlain, rendered.Text)
	m.AddAlternativeString(mail.TypeTextHTML, rendered.HTML)
	return m, nil
}

// deliver sends one claimed row and records the outcome.
func (d *Dispatcher) deliver(ctx context.Context, r outboxRow) bool {
	log := d.Logger.With("mail", r.Template, "ref", r.Ref, "outbox_id", r.ID, "attempt", r.Attempts)
	m, err := d.message(r)
	if err != nil {
		// A template or data problem does not heal by retrying.
		log.Error("mail cannot be built", "err", err)
		d.mark(ctx, r.ID, `state = 'failed', last_error = $2`, err.Error())
		return false
	}
	sctx, cancel := context.WithTimeout(ctx, d.Lease/2)
	err = d.Sender.Send(sctx, m)
	cancel()
	if err == nil {
		d.mark(ctx, r.ID, `state = 'sent', sent_at = now(), last_error = NULL, lease_until = NULL`)
		log.Info("mail sent")
		return true
	}
	if r.Attempts >= d.MaxAttempts {
		log.Error("mail given up", "err", err)
		d.mark(ctx, r.ID, `state = 'failed', last_error = $2, lease_until = NULL`, err.Error())
		return false
	}
	delay := min(time.Duration(1<<min(r.Attempts, 10))*10*time.Second, 6*time.Hour)
	log.Warn("mail not sent, will retry", "err", err, "in", delay)
	d.mark(ctx, r.ID, `state = 'pending', last_error = $2, lease_until = NULL,
		next_attempt_at = now() + make_interval(secs => $3)`, err.Error(), delay.Seconds())
	return false
}

func (d *Dispatcher) mark(ctx context.Context, id int64, set string, args ...any) {
	query := `UPDATE mail_outbox SET ` + set + ` WHERE id = $1 AND state = 'sending'`
	if _, err := d.DB.ExecContext(ctx, query, append([]any{id}, args...)...); err != nil {
		// The lease will expire and the row end as unknown: never resent.
		d.Logger.Error("mail outcome not recorded", "outbox_id", id, "err", err)
	}
}

// SMTPConfig configures the SMTP sender.
type SMTPConfig struct {
	Host     string
	Port     int
	Username string
	Password string
	// TLS is "mandatory" (STARTTLS required), "opportunistic", "none"
	// (plain, for mailpit in development and tests) or "tls" (implicit TLS,
	// port 465).
	TLS     string
	Timeout time.Duration
}

// SMTPSender sends with go-mail, one connection per message.
type SMTPSender struct {
	cfg SMTPConfig
}

// NewSMTPSender checks cfg.
func NewSMTPSender(cfg SMTPConfig) (*SMTPSender, error) {
	switch cfg.TLS {
	case "mandatory", "opportunistic", "none", "tls":
	default:
		return nil, fmt.Errorf("SMTP TLS policy %q: want mandatory, opportunistic, none or tls", cfg.TLS)
	}
	if cfg.Host == "" {
		return nil, errors.New("SMTP host missing")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	return &SMTPSender{cfg: cfg}, nil
}

// Send delivers m. An error after the server accepted the message (while
// closing the connection) is logged by the caller as success: the mail went.
func (s *SMTPSender) Send(ctx context.Context, m *mail.Msg) error {
	opts := []mail.Option{mail.WithPort(s.cfg.Port), mail.WithTimeout(s.cfg.Timeout)}
	switch s.cfg.TLS {
	case "mandatory":
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	case "opportunistic":
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic))
	case "none":
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	case "tls":
		opts = append(opts, mail.WithSSL())
	}
	if s.cfg.Username != "" {
		auth := mail.SMTPAuthPlain
		if s.cfg.TLS == "none" {
			auth = mail.SMTPAuthPlainNoEnc // only ever towards a local catcher
		}
		opts = append(opts, mail.WithSMTPAuth(auth), mail.WithUsername(s.cfg.Username), mail.WithPassword(s.cfg.Password))
	}
	c, err := mail.NewClient(s.cfg.Host, opts...)
	if err != nil {
		return fmt.Errorf("smtp client: %w", err)
	}
	conn, err := c.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return fmt.Errorf("smtp dial %s:%d: %w", s.cfg.Host, s.cfg.Port, err)
	}
	if err := c.SendWithSMTPClient(conn, m); err != nil {
		_ = c.CloseWithSMTPClient(conn)
		return fmt.Errorf("smtp send: %w", err)
	}
	// Accepted: a failing QUIT must not make the mail look unsent.
	_ = c.CloseWithSMTPClient(conn)
	return nil
}
