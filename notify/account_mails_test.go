package notify

import (
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/postgres"
)

// The mails of a second factor turned on or off render with the account
// page's link and no reference.
func TestRenderTwoFactorMails(t *testing.T) {
	r, err := NewRenderer("https://kernodeck.example/")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{postgres.MailTOTPEnabled: "activée", postgres.MailTOTPDisabled: "désactivée"} {
		m, err := r.Render(name, "Ana", "", postgres.MailData{Kind: name})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(m.Subject, want) || strings.Contains(m.Subject, "%") {
			t.Errorf("%s: subject %q", name, m.Subject)
		}
		for _, part := range []string{m.Text, m.HTML} {
			if !strings.Contains(part, "Bonjour Ana") || !strings.Contains(part, "https://kernodeck.example/compte") {
				t.Errorf("%s: %s", name, part)
			}
		}
	}
}

// The password-change mail names no reference; a payout's mails say its
// timeline line and link to its page.
func TestRenderPasswordAndPayoutMails(t *testing.T) {
	r, err := NewRenderer("https://kernodeck.example/")
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Render(postgres.MailPasswordChanged, "Ana", "", postgres.MailData{Kind: postgres.MailPasswordChanged})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Subject, "Mot de passe changé") || !strings.Contains(m.Text, "https://kernodeck.example/compte") {
		t.Errorf("password: %q %s", m.Subject, m.Text)
	}
	const line = "Retrait confirmé : 0,499 LTC reçus à votre adresse."
	for _, name := range []string{postgres.MailPayoutRequested, postgres.MailPayoutDone, postgres.MailPayoutDeclined} {
		m, err := r.Render(name, "Ana", "PO-ABC123", postgres.MailData{Kind: name, Message: line})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(m.Subject, "PO-ABC123") || strings.Contains(m.Subject, "%") {
			t.Errorf("%s: subject %q", name, m.Subject)
		}
		for _, part := range []string{m.Text, m.HTML} {
			if !strings.Contains(part, line) || !strings.Contains(part, "https://kernodeck.example/compte/retraits/PO-ABC123") {
				t.Errorf("%s: %s", name, part)
			}
		}
	}
}
