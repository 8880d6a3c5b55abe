package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/notify/mailtest"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/secrets"
)

// migratedDB is a new database with the migrations applied: its URL and
// the store on it.
func migratedDB(t *testing.T) (string, *postgres.DB) {
	t.Helper()
	url := pgtest.EmptyDB(t)
	db, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := postgres.Migrate(context.Background(), db.DB.DB); err != nil {
		t.Fatal(err)
	}
	return url, db
}

// `kernodeck mail` alone sends the outbox: no Temporal, its SMTP login and
// database URL read from systemd-style credentials (docs/secrets.md).
func TestMailCommandSendsTheOutboxFromCredentials(t *testing.T) {
	url, db := migratedDB(t)
	ctx := context.Background()
	// A registration queues its confirmation link.
	if _, err := db.RegisterAccount(ctx, domain.Account{FirstName: "Mai", LastName: "L", Email: "mail-role@example.com"}, "x", time.Now()); err != nil {
		t.Fatal(err)
	}
	mp := mailtest.Start(t)
	cleanEnv(t)
	creds := t.TempDir()
	for k, v := range map[string]string{
		"KERNODECK_DATABASE_URL":  url,
		"KERNODECK_SECRET_KEYS":   secrets.Generate("m1"),
		"KERNODECK_SMTP_USER":     "kernodeck",
		"KERNODECK_SMTP_PASSWORD": "smtp-credential-pass",
	} {
		if err := os.WriteFile(filepath.Join(creds, k), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(config.CredentialsDirectoryEnv, creds)
	t.Setenv("KERNODECK_SMTP_HOST", mp.SMTPHost)
	t.Setenv("KERNODECK_SMTP_PORT", strconv.Itoa(mp.SMTPPort))
	t.Setenv("KERNODECK_SMTP_TLS", "none")
	t.Setenv("KERNODECK_MAIL_POLL", "200ms")
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(runCtx, []string{"mail"}, &out, &out) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if msgs := mp.Messages(t); len(msgs) > 0 {
			if len(msgs[0].To) != 1 || msgs[0].To[0].Address != "mail-role@example.com" {
				t.Fatalf("sent %+v", msgs[0])
			}
			break
		}
		select {
		case code := <-done:
			t.Fatalf("kernodeck mail exited %d before sending:\n%s", code, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no mail sent in 20 s:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("kernodeck mail exited %d:\n%s", code, out.String())
	}
}
