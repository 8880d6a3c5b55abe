package mailverify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/mailverify"
	"github.com/kernodeck/kernodeck/secrets"
)

func ring(t *testing.T, spec string) *secrets.Keyring {
	t.Helper()
	k, err := secrets.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A link opens with the ring that made it (also after a rotation), until
// its expiry on the signer's clock; a forged, altered or foreign one never.
func TestLinkSignedAndExpiring(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	old := secrets.Generate("old")
	s := &mailverify.Signer{Keyring: ring(t, old), TTL: time.Hour, Now: func() time.Time { return now }}
	tok, exp := s.Token(42, " Ada@Example.COM ")
	if !exp.Equal(now.Add(time.Hour)) {
		t.Fatalf("expiry %v", exp)
	}
	c, err := s.Check(tok)
	if err != nil || c.AccountID != 42 || c.Email != "ada@example.com" || !c.ExpiresAt.Equal(exp) {
		t.Fatalf("check: %+v %v", c, err)
	}
	// Rotated: a new primary key, the old one still in the ring.
	rotated := &mailverify.Signer{Keyring: ring(t, secrets.Generate("new")+","+old), Now: s.Now}
	if _, err := rotated.Check(tok); err != nil {
		t.Fatalf("after rotation: %v", err)
	}

	foreign, _ := (&mailverify.Signer{Keyring: ring(t, secrets.Generate("old")), Now: s.Now}).Token(42, "ada@example.com")
	refused := map[string]string{
		"empty":            "",
		"no key id":        strings.SplitN(tok, ".", 2)[1],
		"one byte changed": flip(tok),
		"truncated":        tok[:len(tok)-4],
		"another ring":     foreign,
		"not base64":       "old.!!!!",
		"unknown key":      "zzz." + strings.SplitN(tok, ".", 2)[1],
		"huge":             "old." + strings.Repeat("A", 5000),
	}
	for name, bad := range refused {
		if _, err := s.Check(bad); domain.ErrorCode(err) != domain.ECodeVerificationInvalid {
			t.Errorf("%s: %v, want %s", name, err, domain.ECodeVerificationInvalid)
		}
	}

	now = now.Add(time.Hour - time.Second)
	if _, err := s.Check(tok); err != nil {
		t.Fatalf("a second before expiry: %v", err)
	}
	now = now.Add(time.Second)
	if _, err := s.Check(tok); domain.ErrorCode(err) != domain.ECodeVerificationExpired {
		t.Fatalf("at expiry: %v, want %s", err, domain.ECodeVerificationExpired)
	}
}

// flip changes one bit in the middle of the sealed part.
func flip(tok string) string {
	b := []byte(tok)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}
