package web

import (
	"html"
	"strings"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// A running rental's page offers to replace a lost key or reissue a
// generated one, labelled, and tells where the last change stands; an
// ended rental offers neither.
func TestOrderPageOffersKeyRecovery(t *testing.T) {
	s := newTestSite(t)
	d := sampleOrder(domain.StatusActive, 2357, 0)
	d.Access = &domain.Access{Host: "gpu-1.example", Port: 22, Username: "kd-test"}
	page := renderOrder(t, s, d)
	for _, want := range []string{`action="/orders/KD-TEST/ssh-key"`, `<label for="new-ssh-key">`, `id="new-ssh-key" name="ssh_public_key"`,
		`action="/orders/KD-TEST/ssh-key/reissue"`, "Générer une nouvelle clé", `name="csrf" value="tok"`} {
		if !strings.Contains(page, want) {
			t.Errorf("active order: missing %q", want)
		}
	}
	done := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	failure := "La clé n'a pas pu être changée sur la machine."
	for _, c := range []struct {
		kr   domain.KeyRequest
		want string
	}{
		{domain.KeyRequest{State: domain.KeyRequestPending}, "en cours d'application"},
		{domain.KeyRequest{State: domain.KeyRequestDone, DoneAt: &done}, "appliqué le 3 décembre 2026 à 11:00 (10:00 UTC) : l'ancienne clé est refusée"},
		{domain.KeyRequest{State: domain.KeyRequestFailed, DoneAt: &done, Failure: &failure}, "n'a pas abouti : " + failure},
	} {
		d.KeyRequest = &c.kr
		if html := html.UnescapeString(renderOrder(t, s, d)); !strings.Contains(html, c.want) {
			t.Errorf("key request %s: missing %q", c.kr.State, c.want)
		}
	}
	d = sampleOrder(domain.StatusEnded, 2357, 0)
	revoked := done
	d.Access = &domain.Access{Host: "gpu-1.example", Port: 22, Username: "kd-test", RevokedAt: &revoked}
	if page := renderOrder(t, s, d); strings.Contains(page, "/ssh-key") {
		t.Error("an ended rental offers a key change")
	}
}
