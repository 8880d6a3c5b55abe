package utxo_test

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/chainwatch/watchtest"
	"github.com/kernodeck/kernodeck/domain"
)

// TestConfirmationLatency measures, on regtest, the time from the block that
// gives a payment its last required confirmation being mined to the order's
// status changing to paid (in PostgreSQL, where the API reads it). Gated:
//
//	KERNODECK_LATENCY_BENCH=1 go test ./chainwatch/utxo -run TestConfirmationLatency -v -timeout 30m
//
// KERNODECK_LATENCY_PAYMENTS (default 50) and KERNODECK_LATENCY_POLL (the
// watcher's pause when caught up, default 2s as in production) tune it.
// Before the confirming block it sleeps a random part of the poll, since a
// real block arrives at any point of the watcher's pause. It prints median
// and p95 per network; BENCHMARKS.md records them.
func TestConfirmationLatency(t *testing.T) {
	if os.Getenv("KERNODECK_LATENCY_BENCH") != "1" {
		t.Skip("set KERNODECK_LATENCY_BENCH=1 to measure confirmation latency on regtest")
	}
	count := 50
	if s := os.Getenv("KERNODECK_LATENCY_PAYMENTS"); s != "" {
		var err error
		if count, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	poll := 2 * time.Second
	if s := os.Getenv("KERNODECK_LATENCY_POLL"); s != "" {
		var err error
		if poll, err = time.ParseDuration(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		start func(testing.TB) node
	}{
		{"bitcoin", func(t testing.TB) node { return startBtcd(t) }},
		{"litecoin", func(t testing.TB) node { return startLitecoind(t) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := c.start(t)
			f := newFixture(t, n, watchtest.Options{})
			f.runWatcher("latency", func(w *chainwatch.Watcher) { w.Poll = poll })
			var lat []time.Duration
			for i := range count {
				o, in := f.order()
				n.pay(in.Address, amountOf(in))
				if p := n.policy(); p > 1 {
					n.mine(int(p) - 1)
					f.e.WaitOrderStatus(o.Ref, domain.StatusPaymentDetected)
				}
				// Waiting for payment_detected puts the test in phase with the
				// watcher's steps; a block arrives at any point of its pause.
				time.Sleep(rand.N(poll))
				n.mine(1) // the confirming block
				mined := time.Now()
				for {
					var status string
					if err := f.e.DB.GetContext(f.e.Ctx, &status, `SELECT status FROM orders WHERE ref = $1`, o.Ref); err != nil {
						t.Fatal(err)
					}
					if status != domain.StatusAwaitingPayment && status != domain.StatusPaymentDetected {
						lat = append(lat, time.Since(mined))
						break
					}
					if time.Since(mined) > time.Minute {
						t.Fatalf("payment %d: order %s still %s after a minute", i, o.Ref, status)
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
			slices.Sort(lat)
			pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1)+0.5)] }
			t.Logf("%s: %d payments, watcher poll %s: confirming block mined -> order status changed: median %s, p95 %s, min %s, max %s",
				c.name, len(lat), poll, pct(0.5).Round(time.Millisecond), pct(0.95).Round(time.Millisecond),
				lat[0].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
		})
	}
}
