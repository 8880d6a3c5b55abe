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
