package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/apptest/apicheck"
	"github.com/kernodeck/kernodeck/notify/mailtest"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/secrets"
)

// docRoleNames are the roles and databases docs/database.md's SQL creates:
// the test prefixes each, so that it neither meets nor leaves anything on
// the shared server.
var docRoleNames = regexp.MustCompile(`\b(kernodeck(?:_app|_api|_worker|_chainwatch|_mail)?|temporal|kd_temporal(?:_visibility)?)\b`)

// TestDatabaseRolesFromTheDocs runs docs/database.md's SQL (its blocks
// creating roles, as the superuser, with psql), names prefixed, and checks
// the least privilege it promises: migrate fails as a runtime role and
// succeeds as the owner; the api as kernodeck_api serves (apicheck.Serves:
// a registration read back, support's view of an order the worker's role
// wrote) and the mail dispatcher as kernodeck_mail sends the
// registration's mail; the
// runtime roles are refused DDL; a table a later migration creates is
// theirs to use without a new grant; temporal may create its tables.
func TestDatabaseRolesFromTheDocs(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		t.Skip("psql not installed")
	}
	raw, err := os.ReadFile("../../docs/database.md")
	if err != nil {
		t.Fatal(err)
	}
	var sql []string
	for _, m := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		if strings.Contains(m[1], "CREATE ROLE") {
			sql = append(sql, m[1])
		}
	}
	if len(sql) != 2 {
		t.Fatalf("docs/database.md: %d SQL blocks creating roles, want Kernodeck's and Temporal's", len(sql))
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix := "kdr" + hex.EncodeToString(b[:]) + "_"
	name := func(n string) string { return prefix + n }
	script := docRoleNames.ReplaceAllString(strings.Join(sql, "\n"), prefix+"$1")

	admin := pgtest.AdminURL()
	adminDB, err := sqlx.Open("postgres", admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, db := range []string{"kernodeck", "kd_temporal", "kd_temporal_visibility"} {
			_, _ = adminDB.Exec(`DROP DATABASE IF EXISTS ` + name(db) + ` WITH (FORCE)`)
		}
		for _, r := range []string{"kernodeck_api", "kernodeck_worker", "kernodeck_chainwatch", "kernodeck_mail", "kernodeck_app", "kernodeck", "temporal"} {
			_, _ = adminDB.Exec(`DROP ROLE IF EXISTS ` + name(r))
		}
		_ = adminDB.Close()
	})
	psql := exec.Command("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", admin)
	psql.Stdin = strings.NewReader(script)
	if out, err := psql.CombinedOutput(); err != nil {
		t.Fatalf("docs/database.md's SQL: %v\n%s", err, out)
	}

	// The server's address and options, as each role (trust on loopback:
	// the passwords are the operator's step).
	as := func(role, db string) string {
		u, err := url.Parse(admin)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(name(role))
		u.Path = "/" + name(db)
		return u.String()
	}
	ctx := context.Background()
	cleanEnv(t)

	// migrate: refused as a runtime role, done as the owner.
	t.Setenv("KERNODECK_DATABASE_URL", as("kernodeck_api", "kernodeck"))
	var out bytes.Buffer
	if code := run(ctx, []string{"migrate"}, &out, &out); code == 0 || !strings.Contains(out.String(), "permission denied") {
		t.Fatalf("migrate as kernodeck_api: exit %d, want a refusal:\n%s", code, out.String())
	}
	out.Reset()
	t.Setenv("KERNODECK_DATABASE_URL", as("kernodeck", "kernodeck"))
	if code := run(ctx, []string{"migrate"}, &out, &out); code != 0 {
		t.Fatalf("migrate as kernodeck (the owner): exit %d\n%s", code, out.String())
	}

	open := func(role string) *postgres.DB {
		db, err := postgres.Open(ctx, as(role, "kernodeck"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	// An order as the worker's role writes it.
	_, ref := pgtest.AccountWithOrder(t, open("kernodeck_worker"), "roles@example.com")

	// No DDL for a runtime role.
	api := open("kernodeck_api")
	for _, ddl := range []string{
		`CREATE TABLE intruder (id int)`,
		`ALTER TABLE orders ADD COLUMN intruder int`,
		`DROP TABLE orders`,
		`TRUNCATE orders`,
		`CREATE INDEX intruder ON orders (ref)`,
	} {
		if _, err := api.Exec(ddl); err == nil || !regexp.MustCompile(`permission denied|must be owner`).MatchString(err.Error()) {
			t.Errorf("%s as kernodeck_api: %v, want a refusal", ddl, err)
		}
	}
	// A later migration's table (created by the owner) is every kind's.
	owner := open("kernodeck")
	if _, err := owner.Exec(`CREATE TABLE later_migration (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"kernodeck_api", "kernodeck_worker", "kernodeck_chainwatch", "kernodeck_mail"} {
		if _, err := open(role).Exec(`INSERT INTO later_migration (v) VALUES ($1)`, role); err != nil {
			t.Errorf("%s writes a table created after the grants: %v", role, err)
		}
	}
	if _, err := open("kernodeck_api").Exec(`UPDATE later_migration SET v = v || '!'; DELETE FROM later_migration WHERE v = 'x'`); err != nil {
		t.Errorf("kernodeck_api updates and deletes in it: %v", err)
	}

	// The api as kernodeck_api.
	httpAddr, opsAddr := apicheck.FreeAddr(t), apicheck.FreeAddr(t)
	const agentToken = "roles-test-agent-token-0123456789"
	for k, v := range map[string]string{
		"KERNODECK_DATABASE_URL":   as("kernodeck_api", "kernodeck"),
		"KERNODECK_SECRET_KEYS":    secrets.Generate("r1"),
		"KERNODECK_SUPPORT_TOKENS": "agent:" + agentToken,
		"KERNODECK_HTTP_ADDR":      httpAddr,
		"KERNODECK_METRICS_ADDR":   opsAddr,
		"KERNODECK_COOKIE_SECURE":  "false",
		"KERNODECK_RATES":          "static",
		"KERNODECK_STATIC_RATES":   "LTC=90",
		"KERNODECK_LOG_LEVEL":      "warn",
		"TEMPORAL_ADDRESS":         apicheck.FreeAddr(t), // down: the api still serves
	} {
		t.Setenv(k, v)
	}
	keys := os.Getenv("KERNODECK_SECRET_KEYS")
	gin.SetMode(gin.ReleaseMode)
	apiCtx, stopAPI := context.WithCancel(ctx)
	defer stopAPI()
	apiOut := &lockedWriter{w: &bytes.Buffer{}}
	apiDone := make(chan int, 1)
	go func() { apiDone <- run(apiCtx, []string{"api"}, io.Discard, apiOut) }()
	apicheck.Serves(t, apicheck.API{HTTP: httpAddr, Ops: opsAddr, AgentToken: agentToken, OrderRef: ref,
		Exited: func() error {
			select {
			case code := <-apiDone:
				apiDone <- code
				return fmt.Errorf("exit %d", code)
			default:
				return nil
			}
		},
		Output: apiOut.String})
	stopAPI()
	if code := <-apiDone; code != 0 {
		t.Errorf("api exited %d:\n%s", code, apiOut.String())
	}

	// The mail dispatcher as kernodeck_mail sends the registration's link.
	mp := mailtest.Start(t)
	cleanEnv(t)
	for k, v := range map[string]string{
		"KERNODECK_DATABASE_URL":  as("kernodeck_mail", "kernodeck"),
		"KERNODECK_SECRET_KEYS":   keys,
		"KERNODECK_SMTP_HOST":     mp.SMTPHost,
		"KERNODECK_SMTP_PORT":     strconv.Itoa(mp.SMTPPort),
		"KERNODECK_SMTP_TLS":      "none",
		"KERNODECK_SMTP_USER":     "kernodeck",
		"KERNODECK_SMTP_PASSWORD": "smtp-roles-pass",
		"KERNODECK_MAIL_POLL":     "200ms",
	} {
		t.Setenv(k, v)
	}
	mailCtx, stopMail := context.WithCancel(ctx)
	defer stopMail()
	mailOut := &lockedWriter{w: &bytes.Buffer{}}
	mailDone := make(chan int, 1)
	go func() { mailDone <- run(mailCtx, []string{"mail"}, io.Discard, mailOut) }()
	deadline := time.Now().Add(20 * time.Second)
	for len(mp.Messages(t)) == 0 {
		select {
		case code := <-mailDone:
			t.Fatalf("mail as kernodeck_mail exited %d:\n%s", code, mailOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no mail sent as kernodeck_mail in 20 s:\n%s", mailOut.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopMail()
	if code := <-mailDone; code != 0 {
		t.Errorf("mail exited %d:\n%s", code, mailOut.String())
	}

	// Temporal's role creates its tables in both its databases.
	for _, db := range []string{"kd_temporal", "kd_temporal_visibility"} {
		tdb, err := sqlx.Open("postgres", as("temporal", db))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tdb.Exec(`CREATE TABLE schema_version (v int)`); err != nil {
			t.Errorf("temporal creates a table in %s: %v", db, err)
		}
		_ = tdb.Close()
	}
	// And nobody else connects to them.
	other, err := sqlx.Open("postgres", as("kernodeck_api", "kd_temporal"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Ping(); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("kernodeck_api connects to Temporal's database: %v", err)
	}
}
