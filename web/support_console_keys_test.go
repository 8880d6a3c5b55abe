package web

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// confirmed posts form to a console confirmation page (confirmPath) and
// returns the form its "Confirmer" button posts: the action as confirmed,
// with the page's single-use key.
func (b *jar) confirmed(confirmPath string, form url.Values) url.Values {
	b.ch.t.Helper()
	rec := b.do(http.MethodPost, confirmPath, form)
	if rec.Code != http.StatusOK {
		b.ch.t.Fatalf("confirmation %s: %d %s", confirmPath, rec.Code, rec.Body.String())
	}
	out := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(rec.Body.String(), -1) {
		out.Set(m[1], html.UnescapeString(m[2]))
	}
	if out.Get("key") == "" {
		b.ch.t.Fatalf("confirmation %s: no key in the page", confirmPath)
	}
	return out
}

// An action runs only from its confirmation page: posted without its
// key, with the form changed since, or with another session's key, it is
// refused in French and nothing reaches the API; the confirmation posted
// twice runs it once and shows its first result.
func TestConsoleActRequiresItsConfirmation(t *testing.T) {
	ch := newConsoleHarness(t)
	ref, _ := ch.lateOrder("confirm@example.com")
	if _, err := ch.db.Exec(`UPDATE orders SET status = 'active' WHERE ref = $1`, ref); err != nil {
		t.Fatal(err)
	}
	b := ch.browser()
	b.signIn(consoleToken)
	file := b.get("/support/orders/" + ref)
	form := url.Values{"csrf": {agentCSRF(t, file)}, "action": {"end-early"}, "reason": {"machine défectueuse"}}
	act := "/support/orders/" + ref + "/act"
	refused := func(what string, form url.Values) {
		t.Helper()
		rec := b.do(http.MethodPost, act, form)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(),
			"Action refusée : cette action n&#39;a pas été confirmée depuis sa page de confirmation") {
			t.Fatalf("%s: %d %s", what, rec.Code, rec.Body.String())
		}
		if n := ch.count(`SELECT count(*) FROM support_actions`); n != 0 || len(ch.wf.recorded()) != 0 {
			t.Fatalf("%s acted: %d rows, calls %v", what, n, ch.wf.recorded())
		}
	}
	refused("no key", form)
	confirmed := b.confirmed("/support/orders/"+ref+"/confirm", form)
	changed := url.Values{}
	for k, v := range confirmed {
		changed[k] = v
	}
	changed.Set("reason", "une autre raison")
	refused("reason changed after the confirmation", changed)
	changed = url.Values{}
	for k, v := range confirmed {
		changed[k] = v
	}
	changed.Set("key", "forged-key.0123456789")
	refused("forged key", changed)
	// The same agent signed in from another browser: its session's keys
	// are its own.
	other := ch.browser()
	other.signIn(consoleToken)
	otherForm := other.confirmed("/support/orders/"+ref+"/confirm",
		url.Values{"csrf": {agentCSRF(t, other.get("/support/orders/"+ref))}, "action": {"end-early"}, "reason": {"machine défectueuse"}})
	otherForm.Set("csrf", confirmed.Get("csrf"))
	refused("another session's key", otherForm)

	rec := b.do(http.MethodPost, act, confirmed)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("confirmed: %d %s", rec.Code, rec.Body.String())
	}
	again := b.do(http.MethodPost, act, confirmed)
	if again.Code != http.StatusSeeOther || again.Header().Get("Location") != rec.Header().Get("Location")+"&renvoi=1" {
		t.Fatalf("confirmed again: %d %q", again.Code, again.Header().Get("Location"))
	}
	if page := b.get(again.Header().Get("Location")); !strings.Contains(page, "l&#39;action n&#39;a pas été refaite, voici son résultat. Action n° ") ||
		!strings.Contains(page, "(Fin anticipée) : effectuée.") {
		t.Fatalf("the first result is not shown: %s", page)
	}
	if got := ch.wf.recorded(); len(got) != 1 || ch.count(`SELECT count(*) FROM support_actions`) != 1 {
		t.Fatalf("confirmed twice: calls %v", got)
	}
}
