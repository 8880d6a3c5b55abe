package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/mailverify"
	"github.com/kernodeck/kernodeck/notify"
	"github.com/kernodeck/kernodeck/notify/mailtest"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/secrets"
	"github.com/kernodeck/kernodeck/workflows"
)

// startNothing is the Workflows of an API whose orders never start one.
type startNothing struct{ api.Workflows }

func (startNothing) StartRental(context.Context, workflows.RentalInput) error { return nil }
func (startNothing) StartTopUp(context.Context, workflows.TopUpInput) error   { return nil }

// verifyEnv is the API and the mail dispatcher sharing a keyring, mailing
// to mailpit, with one movable clock for the API and the link signer.
type verifyEnv struct {
	t    *testing.T
	db   *postgres.DB
	mp   *mailtest.Server
	h    http.Handler
	d    *notify.Dispatcher
	mu   sync.Mutex
	now  time.Time
	seen int // mails already read from mailpit
}

func (e *verifyEnv) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *verifyEnv) advance(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(d)
}

func newVerifyEnv(t *testing.T) *verifyEnv {
	t.Helper()
	e := &verifyEnv{t: t, db: pgtest.NewDB(t), mp: mailtest.Start(t), now: time.Now()}
	ring, err := secrets.Parse(secrets.Generate("k1"))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.h = api.New(api.Config{Argon2: api.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}},
		api.Deps{Stores: app.APIStores(postgres.NewStore(e.db, nil, "")), Workflows: startNothing{}, Keyring: ring, Now: e.clock, Logger: logger}).Handler()
	renderer, err := notify.NewRenderer("https://kernodeck.test/")
	if err != nil {
		t.Fatal(err)
	}
	smtp, err := notify.NewSMTPSender(notify.SMTPConfig{Host: e.mp.SMTPHost, Port: e.mp.SMTPPort, TLS: "none"})
	if err != nil {
		t.Fatal(err)
	}
	e.d = &notify.Dispatcher{DB: e.db.DB, Renderer: renderer, From: from, Sender: smtp, Logger: logger,
		Links: &mailverify.Signer{Keyring: ring, Now: e.clock}}
	return e
}

func (e *verifyEnv) call(method, path, token string, body any) (int, map[string]any) {
	e.t.Helper()
	raw, _ := json.Marshal(body)
	req := httptest.NewRequest(method, path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out
}

func (e *verifyEnv) register(email string) string {
	e.t.Helper()
	code, out := e.call("POST", "/v1/auth/register", "", map[string]any{"first_name": "Ada", "last_name": "Lovelace",
		"email": email, "password": "correct horse battery staple", "bearer": true})
	if code != http.StatusCreated {
		e.t.Fatalf("register: %d %v", code, out)
	}
	return out["token"].(string)
}

func (e *verifyEnv) order(token string) (int, string) {
	e.t.Helper()
	code, out := e.call("POST", "/v1/orders", token, map[string]any{
		"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"})
	ref := ""
	if o, ok := out["order"].(map[string]any); ok {
		ref, _ = o["reference"].(string)
	}
	return code, ref
}

// deliver runs the dispatcher until nothing is due and returns the mails
// mailpit received since the last call.
func (e *verifyEnv) deliver() []mailtest.Message {
	e.t.Helper()
	for {
		n, err := e.d.Once(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	var failed int
	if err := e.db.Get(&failed, `SELECT count(*) FROM mail_outbox WHERE state <> 'sent'
		AND template = $1`, postgres.MailEmailVerification); err != nil {
		e.t.Fatal(err)
	}
	if failed != 0 {
		e.t.Fatalf("%d confirmation mails not sent", failed)
	}
	all := e.mp.Messages(e.t) // newest first
	fresh := all[:len(all)-e.seen]
	e.seen = len(all)
	return fresh
}

var linkPattern = regexp.MustCompile(`https://kernodeck\.test/verify-email\?token=([A-Za-z0-9_%.\-]+)`)

func linkToken(t *testing.T, m mailtest.Message) string {
	t.Helper()
	match := linkPattern.FindStringSubmatch(m.Text)
	if match == nil {
		t.Fatalf("no confirmation link in %q", m.Text)
	}
	if !strings.Contains(m.HTML, match[0]) && !strings.Contains(m.HTML, strings.ReplaceAll(match[0], "&", "&amp;")) {
		t.Errorf("the HTML part lacks the link %s", match[0])
	}
	tok, err := url.QueryUnescape(match[1])
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A new account gets exactly one mail, the confirmation, whatever it does
// until confirmed (an order, its payment, a second order refused, a
// top-up); the link from that mail, posted, confirms it; then order mails
// flow. The same link altered is refused, and a mailed link past its 48
// hours is refused.
func TestNewAccountMailedOnlyItsConfirmationUntilConfirmed(t *testing.T) {
	ctx := context.Background()
	e := newVerifyEnv(t)
	tok := e.register("ada@example.com")
	code, ref := e.order(tok)
	if code != http.StatusCreated {
		t.Fatalf("first order: %d", code)
	}
	if code, _ := e.order(tok); code != http.StatusConflict {
		t.Fatalf("second unpaid order: %d, want 409", code)
	}
	if err := e.db.RecordOrderEvent(ctx, activities.OrderEvent{OrderRef: ref, Key: "paid", Kind: domain.EventPaid,
		Message: "Commande réglée.", Status: domain.StatusPaid, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if code, out := e.call("POST", "/v1/topups", tok, map[string]any{"amount_cents": 10000}); code != http.StatusCreated {
		t.Fatalf("top-up: %d %v", code, out)
	}

	mails := e.deliver()
	if len(mails) != 1 {
		t.Fatalf("%d mails before confirmation, want exactly 1: %+v", len(mails), mails)
	}
	m := mails[0]
	if m.Subject != "Confirmez votre adresse email Kernodeck" || len(m.To) != 1 || m.To[0].Address != "ada@example.com" {
		t.Fatalf("mail %q to %+v", m.Subject, m.To)
	}
	if !strings.Contains(m.Text, "Bonjour Ada") || !strings.Contains(m.Text, "Ce lien fonctionne jusqu'au") {
		t.Errorf("text: %q", m.Text)
	}
	link := linkToken(t, m)
	if len(e.deliver()) != 0 {
		t.Fatal("a second pass mailed again")
	}

	altered := []byte(link)
	altered[len(altered)/2] ^= 1
	if code, out := e.call("POST", "/v1/auth/verify-email", "", map[string]any{"token": string(altered)}); code != http.StatusBadRequest ||
		out["error"].(map[string]any)["code"] != domain.ECodeVerificationInvalid {
		t.Fatalf("altered link: %d %v", code, out)
	}
	if code, out := e.call("POST", "/v1/auth/verify-email", "", map[string]any{"token": link}); code != http.StatusOK {
		t.Fatalf("confirm: %d %v", code, out)
	}

	code, ref2 := e.order(tok)
	if code != http.StatusCreated {
		t.Fatalf("order after confirmation: %d", code)
	}
	mails = e.deliver()
	if len(mails) != 1 || mails[0].Subject != "Commande "+ref2+" enregistrée" {
		t.Fatalf("after confirmation: %+v, want the order's mail", mails)
	}
}

// A link mailed more than 48 hours ago (the API's clock moved) is refused
// and confirms nothing; a resend mails a fresh one that works.
func TestMailedLinkExpires(t *testing.T) {
	e := newVerifyEnv(t)
	tok := e.register("late@example.com")
	mails := e.deliver()
	if len(mails) != 1 {
		t.Fatalf("%d mails", len(mails))
	}
	link := linkToken(t, mails[0])
	e.advance(mailverify.DefaultTTL)
	code, out := e.call("POST", "/v1/auth/verify-email", "", map[string]any{"token": link})
	if code != http.StatusBadRequest || out["error"].(map[string]any)["code"] != domain.ECodeVerificationExpired {
		t.Fatalf("expired link: %d %v", code, out)
	}
	var verified bool
	if err := e.db.Get(&verified, `SELECT email_verified_at IS NOT NULL FROM accounts WHERE email = 'late@example.com'`); err != nil {
		t.Fatal(err)
	}
	if verified {
		t.Fatal("an expired link confirmed the address")
	}
	if code, out := e.call("POST", "/v1/auth/verify-email/resend", tok, nil); code != http.StatusAccepted {
		t.Fatalf("resend: %d %v", code, out)
	}
	mails = e.deliver()
	if len(mails) != 1 {
		t.Fatalf("%d mails after resend", len(mails))
	}
	if code, out := e.call("POST", "/v1/auth/verify-email", "", map[string]any{"token": linkToken(t, mails[0])}); code != http.StatusOK {
		t.Fatalf("fresh link: %d %v", code, out)
	}
}
