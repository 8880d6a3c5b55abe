package browsertest

import (
	"testing"
	"time"
)

// The order page outlives its event stream: the server ends every stream
// after its maximum age, the page connects again by itself (EventSource,
// with Last-Event-ID) and still shows what happens next, without a reload.
func TestOpenPageOutlivesItsStream(t *testing.T) {
	s := newShop(t, shopOptions{streamMaxAge: 2 * time.Second})
	ctx := browser(t)
	s.register(t, ctx, "Zoé", "zoe@example.com")
	ref := s.orderThroughSite(t, ctx, "rtx-4090", 1, 7)
	eval[bool](t, ctx, `window.kdMarker = "same page"; window.kdOpens = 0;
		document.body.addEventListener("htmx:sseOpen", () => window.kdOpens++); true`)
	waitJS(t, ctx, "the server ended the stream twice and the page connected again each time", `window.kdOpens >= 2`)
	s.cli(t, "support", "cancel", ref, "--reason", "test du flux")
	waitJS(t, ctx, "the cancellation on the open page", `document.querySelector("[data-status]")?.dataset.status === "cancelled"`)
	if got := eval[string](t, ctx, `window.kdMarker || ""`); got != "same page" {
		t.Fatal("the page was reloaded")
	}
}
