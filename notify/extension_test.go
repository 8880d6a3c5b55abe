package notify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/notify"
	"github.com/kernodeck/kernodeck/postgres"
)

// The mail of a customer's extension paid (issue 39, item 2) says what
// was added and paid, and the new end in Paris time with UTC beside;
// before the period started, that the days add to it.
func TestExtensionMailSaysTheNewEnd(t *testing.T) {
	r, err := notify.NewRenderer("https://kernodeck.example")
	if err != nil {
		t.Fatal(err)
	}
	end := time.Date(2026, 12, 3, 14, 5, 0, 0, time.UTC)
	ev := map[string]any{"days": float64(7), "amount_cents": float64(11000), "extension": "EX-0000000000"}
	m, err := r.Render(postgres.MailExtensionPaid, "Ada", "KD-0000000000", postgres.MailData{
		Kind: domain.EventExtensionPaid, PeriodEnd: &end, Event: ev})
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"7 jours", "110,00 USD réglés", "3 décembre 2026 à 15:05 (14:05 UTC)",
		"https://kernodeck.example/orders/KD-0000000000"} {
		if !strings.Contains(m.Text, part) || !strings.Contains(m.HTML, part) {
			t.Errorf("extension mail lacks %q:\n%s\n%s", part, m.Text, m.HTML)
		}
	}
	if m.Subject != "Location KD-0000000000 prolongée" {
		t.Errorf("subject %q", m.Subject)
	}
	m, err = r.Render(postgres.MailExtensionPaid, "Ada", "KD-0000000000", postgres.MailData{Kind: domain.EventExtensionPaid, Event: ev})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Text, "s'ajoutent à la période") {
		t.Errorf("extension mail before the period:\n%s", m.Text)
	}
}
