package browsertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// TestBenchmarkPageWeightAndLiveLatency is a benchmark, not a test: it
// runs only with KERNODECK_WEB_BENCH=1 and prints what BENCHMARKS.md
// records (targets: under 100 KB per page, page updated within 200 ms of
// the server's event). It asserts nothing about the figures.
//
//   - bytes: what Chromium received (Network.loadingFinished
//     encodedDataLength: compressed bodies and headers) for a whole page load
//     with its cache disabled, the configurator and an order's checkout with
//     an active LTC payment request (its QR code included; the event stream,
//     which never finishes, not);
//   - latency: from just before the server writes a timeline event (a
//     support answer, committed in PostgreSQL, whose NOTIFY wakes the
//     order's stream) to the moment the open page shows it (a
//     MutationObserver's timestamp in the page), over KERNODECK_WEB_BENCH_N
//     events (30).
func TestBenchmarkPageWeightAndLiveLatency(t *testing.T) {
	if os.Getenv("KERNODECK_WEB_BENCH") == "" {
		t.Skip("benchmark: set KERNODECK_WEB_BENCH=1")
	}
	n := 30
	if v := os.Getenv("KERNODECK_WEB_BENCH_N"); v != "" {
		_, _ = fmt.Sscan(v, &n)
	}
	s := newShop(t, shopOptions{litecoin: true})
	ctx := browser(t)

	var mu sync.Mutex
	received := map[network.RequestID]float64{}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventLoadingFinished); ok {
			mu.Lock()
			received[e.RequestID] += e.EncodedDataLength
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := chromedp.Call(ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true})
		return err
	})); err != nil {
		t.Fatal(err)
	}
	weigh := func(name, url string, ready string) {
		mu.Lock()
		clear(received)
		mu.Unlock()
		run(t, ctx, "load "+name, chromedp.Navigate(url), visible(ready),
			chromedp.Sleep(500*time.Millisecond)) // late images and scripts finish: a measurement window, not a condition
		mu.Lock()
		var total float64
		for _, b := range received {
			total += b
		}
		count := len(received)
		mu.Unlock()
		t.Logf("BENCH page=%s requests=%d bytes=%.0f (%.1f KB)", name, count, total, total/1024)
	}

	weigh("configurator", s.srv.URL+"/?gpu_model=b200&lots=2&duration_days=7", "#resume")
	s.register(t, ctx, "Bench", "bench@example.com")
	ref := s.orderThroughSite(t, ctx, "rtx-a5000", 1, 3)
	run(t, ctx, "payment request",
		click(`#pm-LTC-litecoin`),
		click(`#paiement form.methods button[type=submit]`),
		visible(`#pay-address`),
	)
	weigh("checkout", s.srv.URL+"/orders/"+ref, "#pay-address")

	// Latency: support answers on an open order page.
	run(t, ctx, "support request",
		chromedp.Navigate(s.srv.URL+"/orders/"+ref+"/support"),
		typeIn("#message", "mesure"),
		click(`form[action="/orders/`+ref+`/support"] button[type=submit]`),
		visible("#support .thread"),
	)
	reqs, err := s.env.DB.OpenSupportRequests(s.env.Ctx, 1)
	if err != nil || len(reqs) != 1 {
		t.Fatalf("support request: %v %v", reqs, err)
	}
	eval[bool](t, ctx, `window.kdSeen = {};
		new MutationObserver(() => {
			const now = performance.timeOrigin + performance.now();
			for (const a of document.querySelectorAll("#support .answer .pre")) {
				const m = a.textContent.match(/mesure (\d+)/);
				if (m && !(m[1] in window.kdSeen)) window.kdSeen[m[1]] = now;
			}
		}).observe(document.body, {subtree: true, childList: true, characterData: true}); true`)
	var lat []float64
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := s.env.DB.AnswerSupportRequest(s.env.Ctx, reqs[0].ID, "bench", fmt.Sprintf("mesure %d", i), t0); err != nil {
			t.Fatal(err)
		}
		waitJS(t, ctx, fmt.Sprintf("answer %d", i), fmt.Sprintf(`%d in window.kdSeen`, i))
		seen := eval[float64](t, ctx, fmt.Sprintf(`window.kdSeen[%d]`, i))
		lat = append(lat, seen-float64(t0.UnixNano())/1e6)
	}
	slices.Sort(lat)
	p := func(q float64) float64 { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	t.Logf("BENCH event→page n=%d min=%.1fms median=%.1fms p95=%.1fms max=%.1fms", n, lat[0], p(0.5), p(0.95), lat[len(lat)-1])
}
