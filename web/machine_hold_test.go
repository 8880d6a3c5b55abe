package web

import (
	"strings"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// The order page says plainly whether a machine is held for the unpaid
// order and until when, or that the machine goes to the first payment.
func TestOrderPageSaysWhetherAMachineIsHeld(t *testing.T) {
	s := newTestSite(t)
	d := sampleOrder(domain.StatusAwaitingPayment, 0, 0)
	d.Order.ModelName = "NVIDIA RTX A5000"
	until := time.Date(2026, 12, 3, 14, 25, 0, 0, time.UTC)
	d.MachineHold = &domain.MachineHold{Held: true, Until: &until}
	html := renderOrder(t, s, d)
	if want := "Une machine NVIDIA RTX A5000 est réservée pour vous jusqu'à"; !strings.Contains(strings.ReplaceAll(html, "&#39;", "'"), want) {
		t.Errorf("held: missing %q", want)
	}
	if !strings.Contains(html, "3 décembre 2026 à 15:25 (14:25 UTC)") {
		t.Error("held: the end of the hold is not said")
	}

	d.MachineHold = &domain.MachineHold{}
	html = strings.ReplaceAll(renderOrder(t, s, d), "&#39;", "'")
	if want := "Aucune machine n'est réservée pour vous : la machine ira au premier paiement reçu."; !strings.Contains(html, want) {
		t.Errorf("not held: missing %q", want)
	}

	d = sampleOrder(domain.StatusActive, 2357, 0)
	html = renderOrder(t, s, d)
	if strings.Contains(html, "réservée pour vous") {
		t.Error("a paid order speaks of holds")
	}
}
