package web

import (
	"net/http"
	"strings"
	"testing"
)

// An order's page is made once per state of its data: read again unchanged
// it comes from the memo, and any change (here a new event and another
// session of the same account) makes a new page that shows it.
func TestTrackedPageMadeOncePerData(t *testing.T) {
	sh := newSiteHarness(t)
	br, ref := sh.activeOrder("memo@example.com")
	read := func(b *browser, path string, want int) string {
		t.Helper()
		rec := b.do("GET", path, nil)
		if rec.Code != want {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	first := read(br, "/orders/"+ref, http.StatusOK)
	if n := sh.site.madePages.Len(); n != 1 {
		t.Fatalf("%d pages remembered after one read, want 1 (is the page's data digestible?)", n)
	}
	if again := read(br, "/orders/"+ref, http.StatusOK); again != first || sh.site.madePages.Len() != 1 {
		t.Fatalf("an unchanged order made another page (%d remembered; same body: %v)", sh.site.madePages.Len(), again == first)
	}

	if _, err := sh.db.Exec(`INSERT INTO timeline_events (ref, idem_key, kind, message)
		VALUES ($1, 'memo:1', 'provisioning_step', 'Étape mémorable terminée.')`, ref); err != nil {
		t.Fatal(err)
	}
	changed := read(br, "/orders/"+ref, http.StatusOK)
	if !strings.Contains(changed, "Étape mémorable terminée.") || sh.site.madePages.Len() != 2 {
		t.Fatalf("a new event: shown %v, %d pages remembered (want 2)", strings.Contains(changed, "Étape mémorable"), sh.site.madePages.Len())
	}

	other := sh.signedIn("memo@example.com", false)
	mine := read(other, "/orders/"+ref, http.StatusOK)
	if other.csrf(mine) == br.csrf(changed) || !strings.Contains(mine, "Étape mémorable terminée.") {
		t.Fatal("another session of the account was served the first session's page")
	}

	// The live part: made once too, 204 while the client has its version.
	m := liveVersion.FindStringSubmatch(changed)
	if m == nil {
		t.Fatal("no live version on the page")
	}
	read(br, "/orders/"+ref+"/live?v="+m[1], http.StatusNoContent)
	if live := read(br, "/orders/"+ref+"/live?v=old", http.StatusOK); !strings.Contains(live, "Étape mémorable terminée.") {
		t.Fatal("the live part lacks the new event")
	}
}
