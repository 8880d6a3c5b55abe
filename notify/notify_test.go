package notify_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wneessen/go-mail"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/notify"
	"github.com/kernodeck/kernodeck/notify/mailtest"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/secrets"
)

const from = "Kernodeck <noreply@kernodeck.test>"

// stopAfter cancels the dispatcher's context once n mails went out: the
// "worker" stops in the middle of its backlog.
type stopAfter struct {
	notify.Sender
	n      int32
	sent   atomic.Int32
	cancel context.CancelFunc
}

func (s *stopAfter) Send(ctx context.Context, m *mail.Msg) error {
	err := s.Sender.Send(ctx, m)
	if err == nil && s.sent.Add(1) == s.n {
		s.cancel()
	}
	return err
}

// Every step of an order and a top-up queues its mail in the transaction of
// the event; a dispatcher stopped halfway and a new one started deliver
// each mail exactly once, in French, text and HTML, with no secret.
func TestEachMailDeliveredOnceAcrossDispatcherRestart(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	mp := mailtest.Start(t)
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash)
		VALUES ('Ada', 'Lovelace', 'ada@example.com', 'h') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	o, err := db.CreateOrder(ctx, acc, domain.Quote{Configuration: domain.Configuration{Model: "rtx-a5000", Lots: 1, DurationDays: 3, Preset: "python"},
		GPUsPerLot: 1, TotalGPUs: 1, LotCents: 2357, TotalCents: 2357})
	if err != nil {
		t.Fatal(err)
	}
	ref := o.Ref
	now := time.Now().UTC().Truncate(time.Second)
	end := now.Add(72 * time.Hour)
	events := []activities.OrderEvent{
		{Key: "payment-request:1", Kind: postgres.KindPaymentRequested, Message: "Demande de paiement créée.",
			Data: map[string]any{"asset": "USDT", "network": "tron", "address": "TXYZ1234567890abcdefghijkLMNOPQRS",
				"amount": "23.570000", "deadline": now.Add(time.Hour).Format(time.RFC3339), "amount_cents": 2357}},
		{Key: "paid", Kind: domain.EventPaid, Message: "Commande réglée.", Status: domain.StatusPaid},
		{Key: "prov:1:reserve:start", Kind: domain.EventProvisioningStep, Message: "Réservation."}, // no mail
		{Key: "access", Kind: domain.EventAccessAvailable, Message: "Machine prête.", Status: domain.StatusActive,
			PeriodStart: &now, PeriodEnd: &end, Data: map[string]any{"host": "127.0.0.1", "username": "kd-x"}},
		{Key: "reminder:1:48h", Kind: domain.EventReminderSent, Message: "Rappel.", Data: map[string]any{"period_end": end}},
		{Key: "support:7:answer", Kind: postgres.KindSupportAnswer, Message: "Réponse du support.",
			Data: map[string]any{"answer": "Relancez avec un batch de 8, puis renvoyez-nous la première erreur."}},
		{Key: "ended", Kind: domain.EventEnded, Message: "Location terminée.", Status: domain.StatusEnded, EndedAt: &end},
	}
	for _, ev := range events {
		ev.OrderRef, ev.At = ref, now
		for i := 0; i < 2; i++ { // a retried activity queues nothing more
			if err := db.RecordOrderEvent(ctx, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	tu, err := db.CreateTopUp(ctx, acc, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreditTopUp(ctx, activities.CreditTopUpInput{TopUpRef: tu.Ref, AccountID: acc, AmountCents: 10000, At: now}); err != nil {
		t.Fatal(err)
	}
	// A secret that exists for this order must never appear in a mail.
	kr, _ := secrets.Parse(secrets.Generate("t"))
	const clearPassword = "Zq9-very-secret-access-password"
	if _, err := db.Exec(`INSERT INTO order_access (order_ref, host, port, username, password, gpu_model_seen,
		gpu_count_seen, driver_version, cuda_version) VALUES ($1, '127.0.0.1', 22, 'kd-x', $2, 'NVIDIA RTX A5000', 1, '570.211.01', '12.8')`,
		ref, kr.Seal(clearPassword, "order_access.password:"+ref)); err != nil {
		t.Fatal(err)
	}
	var queued int
	_ = db.Get(&queued, `SELECT count(*) FROM mail_outbox`)
	if queued != 8 { // created, payment request, paid, ready, reminder, support, ended, top-up
		t.Fatalf("%d mails queued, want 8", queued)
	}

	renderer, err := notify.NewRenderer("https://kernodeck.test/")
	if err != nil {
		t.Fatal(err)
	}
	smtp, err := notify.NewSMTPSender(notify.SMTPConfig{Host: mp.SMTPHost, Port: mp.SMTPPort, Username: "u", Password: "p", TLS: "none"})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	// First worker: stops after 3 mails.
	ctx1, cancel1 := context.WithCancel(ctx)
	first := &notify.Dispatcher{DB: db.DB, Renderer: renderer, From: from, Batch: 1, Poll: 50 * time.Millisecond, Logger: logger,
		Sender: &stopAfter{Sender: smtp, n: 3, cancel: cancel1}}
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx1) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("first dispatcher did not stop")
	}
	var sentBefore int
	_ = db.Get(&sentBefore, `SELECT count(*) FROM mail_outbox WHERE state = 'sent'`)
	if sentBefore != 3 {
		t.Fatalf("%d sent before the restart, want 3", sentBefore)
	}
	// Restarted worker: sends the rest, and twice over finds nothing more.
	second := &notify.Dispatcher{DB: db.DB, Renderer: renderer, From: from, Sender: smtp, Logger: logger}
	for i := 0; i < 2; i++ {
		if _, err := second.Once(ctx); err != nil {
			t.Fatal(err)
		}
	}
	msgs := mp.Messages(t)
	if len(msgs) != queued {
		t.Fatalf("mailpit received %d mails, want %d", len(msgs), queued)
	}
	seen := map[string]int{}
	for _, m := range msgs {
		seen[m.Subject]++
		if len(m.To) != 1 || m.To[0].Address != "ada@example.com" {
			t.Errorf("%q sent to %v", m.Subject, m.To)
		}
		if !strings.Contains(m.Text, "Bonjour Ada") || !strings.Contains(m.HTML, "Bonjour Ada") || !strings.Contains(m.HTML, `lang="fr"`) {
			t.Errorf("%q: not a French text+HTML mail:\n%s", m.Subject, m.Text)
		}
		for _, secret := range []string{clearPassword, "kdsec1:", "PRIVATE KEY", "token"} {
			if strings.Contains(m.Text, secret) || strings.Contains(m.HTML, secret) {
				t.Errorf("%q contains %q", m.Subject, secret)
			}
		}
		if !strings.HasSuffix(m.MessageID, "@kernodeck.test") {
			t.Errorf("%q: Message-ID %q", m.Subject, m.MessageID)
		}
	}
	for subject, n := range seen {
		if n != 1 {
			t.Errorf("%q received %d times", subject, n)
		}
	}
	want := []string{
		"Commande " + ref + " enregistrée",
		"Demande de paiement pour " + ref,
		"Règlement confirmé pour la commande " + ref,
		"Votre machine est prête (" + ref + ")",
		"Rappel : fin de votre location " + ref + ", exportez vos résultats",
		"Réponse du support (" + ref + ")",
		"Location " + ref + " terminée",
		"Recharge " + tu.Ref + " créditée",
	}
	for _, s := range want {
		if seen[s] != 1 {
			t.Errorf("missing %q; got %v", s, seen)
		}
	}
	for _, m := range msgs {
		switch {
		case strings.HasPrefix(m.Subject, "Demande de paiement"):
			for _, part := range []string{"USDT sur le réseau tron", "23.570000", "TXYZ1234567890abcdefghijkLMNOPQRS", "Attention au réseau", "Échéance"} {
				if !strings.Contains(m.Text, part) {
					t.Errorf("payment request lacks %q:\n%s", part, m.Text)
				}
			}
		case strings.HasPrefix(m.Subject, "Votre machine est prête"):
			if !strings.Contains(m.Text, "https://kernodeck.test/orders/"+ref) || strings.Contains(m.Text, "kd-x") {
				t.Errorf("machine ready mail:\n%s", m.Text)
			}
		case strings.HasPrefix(m.Subject, "Rappel"):
			if !strings.Contains(m.Text, "Exportez") || !strings.Contains(m.Text, "vérifiez votre copie") {
				t.Errorf("reminder:\n%s", m.Text)
			}
		}
	}
	var ids int
	_ = db.Get(&ids, `SELECT count(*) FROM mail_outbox WHERE state = 'sent' AND sent_at IS NOT NULL`)
	if ids != queued {
		t.Fatalf("%d rows marked sent, want %d", ids, queued)
	}
}

// A mail whose delivery was cut by a crash (lease expired while sending)
// is never sent again: it is left to an operator as "unknown".
func TestInterruptedDeliveryIsNotResent(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash)
		VALUES ('Bob', 'B', 'bob@example.com', 'h') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateTopUp(ctx, acc, 10000); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO mail_outbox (outbox_key, account_id, template, ref, data, state, attempts, lease_until)
		VALUES ('mail:TU-X:credited', $1, 'topup_credited', 'TU-X', '{}', 'sending', 1, now() - interval '1 minute')`, acc); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	renderer, _ := notify.NewRenderer("https://kernodeck.test")
	d := &notify.Dispatcher{DB: db.DB, Renderer: renderer, From: from, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Sender: senderFunc(func(context.Context, *mail.Msg) error { calls.Add(1); return nil })}
	if _, err := d.Once(ctx); err != nil {
		t.Fatal(err)
	}
	var state string
	_ = db.Get(&state, `SELECT state FROM mail_outbox WHERE outbox_key = 'mail:TU-X:credited'`)
	if state != "unknown" || calls.Load() != 0 {
		t.Fatalf("interrupted mail: state %s, %d sends", state, calls.Load())
	}
}

type senderFunc func(context.Context, *mail.Msg) error

func (f senderFunc) Send(ctx context.Context, m *mail.Msg) error { return f(ctx, m) }

// Every template the store can queue renders.
func TestEveryQueuedTemplateRenders(t *testing.T) {
	r, err := notify.NewRenderer("http://127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	for kind, name := range postgres.MailTemplates {
		data := postgres.MailData{Kind: kind, PeriodEnd: &end, Event: map[string]any{
			"asset": "BTC", "network": "bitcoin", "address": "bc1qexample", "amount": "0.00042", "deadline": end.Format(time.RFC3339)}}
		m, err := r.Render(name, "Ada", "KD-0000000000", data)
		if err != nil || m.Subject == "" || m.Text == "" || m.HTML == "" {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Two dispatchers (two workers) draining one outbox at once: every mail goes
// out exactly once (rows are claimed with FOR UPDATE SKIP LOCKED).
func TestConcurrentDispatchersSendEachMailOnce(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	mp := mailtest.Start(t)
	var acc int64
	if err := db.Get(&acc, `INSERT INTO accounts (first_name, last_name, email, password_hash)
		VALUES ('Gus', 'G', 'gus@example.com', 'h') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := 0; i < n; i++ {
		tu, err := db.CreateTopUp(ctx, acc, 10000)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.CreditTopUp(ctx, activities.CreditTopUpInput{TopUpRef: tu.Ref, AccountID: acc, AmountCents: 10000, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	renderer, _ := notify.NewRenderer("https://kernodeck.test")
	smtp, _ := notify.NewSMTPSender(notify.SMTPConfig{Host: mp.SMTPHost, Port: mp.SMTPPort, TLS: "none"})
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		d := &notify.Dispatcher{DB: db.DB, Renderer: renderer, From: from, Sender: smtp, Batch: 3,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		go func() { _, err := d.Once(ctx); errs <- err }()
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	msgs := mp.Messages(t)
	ids := map[string]int{}
	for _, m := range msgs {
		ids[m.MessageID]++
	}
	if len(msgs) != n || len(ids) != n {
		t.Fatalf("%d mails, %d distinct, want %d", len(msgs), len(ids), n)
	}
}

// The order mail names the model as the catalog does and writes amounts the
// French way (domain.GPUNames, domain.FrenchUSD: the site's formatters).
func TestMailNamesModelAndAmountInFrench(t *testing.T) {
	r, err := notify.NewRenderer("http://127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Render(postgres.MailOrderCreated, "Ada", "KD-0000000000", postgres.MailData{
		Kind: domain.EventCreated, GPUModel: "b200", GPUName: "NVIDIA B200", Lots: 1, TotalGPUs: 2, DurationDays: 7, TotalCents: 155900})
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"1 lot NVIDIA B200, soit 2 GPU", "1\u202f559,00 USD"} {
		if !strings.Contains(m.Text, part) || !strings.Contains(m.HTML, part) {
			t.Errorf("order mail lacks %q:\n%s\n%s", part, m.Text, m.HTML)
		}
	}
	if strings.Contains(m.Text, "b200") || strings.Contains(m.Text, "1559.00") {
		t.Errorf("order mail still spells the code or the raw amount:\n%s", m.Text)
	}
}
