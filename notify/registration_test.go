package notify_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wneessen/go-mail"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/mailverify"
	"github.com/kernodeck/kernodeck/notify"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/secrets"
)

// A registration's mail, for an address a confirmed account holds, goes to
// that address as a notice to its owner (greeted by the owner's name, no
// link, nothing the registrant wrote); for a new address, as the link.
func TestRegistrationOfKnownAddressMailsOwnerNotice(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	if _, err := db.CreateAccount(ctx, domain.Account{FirstName: "Grace", LastName: "Hopper", Email: "grace@example.com"}, "h"); err != nil {
		t.Fatal(err)
	}
	for _, email := range []string{"GRACE@example.com", "new@example.com"} {
		if _, err := db.RegisterAccount(ctx, domain.Account{FirstName: "Mallory", LastName: "Phisher", Email: email}, "h", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	ring, err := secrets.Parse(secrets.Generate("test"))
	if err != nil {
		t.Fatal(err)
	}
	renderer, err := notify.NewRenderer("https://kernodeck.test")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	sent := map[string]string{} // recipient: the whole message
	d := &notify.Dispatcher{DB: db.DB, Renderer: renderer, From: from, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Links: &mailverify.Signer{Keyring: ring},
		Sender: senderFunc(func(_ context.Context, m *mail.Msg) error {
			var b bytes.Buffer
			b.WriteString(strings.Join(m.GetGenHeader(mail.HeaderSubject), "") + "\n")
			for _, part := range m.GetParts() {
				content, err := part.GetContent()
				if err != nil {
					return err
				}
				b.Write(content)
			}
			mu.Lock()
			defer mu.Unlock()
			sent[strings.ToLower(m.GetToString()[0])] = b.String()
			return nil
		})}
	if n, err := d.Once(ctx); err != nil || n != 2 {
		t.Fatalf("dispatch: %d sent, %v", n, err)
	}
	notice := sent["<grace@example.com>"]
	for _, want := range []string{"Bonjour Grace", "déjà celle de votre compte", "https://kernodeck.test/login"} {
		if !strings.Contains(notice, want) {
			t.Errorf("the owner's notice lacks %q:\n%s", want, notice)
		}
	}
	for _, not := range []string{"Mallory", "Phisher", "token=", notify.VerifyPath} {
		if strings.Contains(notice, not) {
			t.Errorf("the owner's notice shows %q:\n%s", not, notice)
		}
	}
	if link := sent["<new@example.com>"]; !strings.Contains(link, notify.VerifyPath+"?token=") {
		t.Errorf("a new address gets its link:\n%s", link)
	}
}
