package utxo_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
)

// TestConfirmationLatency measures, on regtest, side by side for a watcher
// that only polls and one that also hears the node's peer-to-peer
// announcements (same node, same harness, one after the other):
//   - confirming block → order status: from the block that gives a payment
//     its last required confirmation being mined to the order's status
//     changing to paid (in PostgreSQL, where the API reads it);
//   - broadcast → payment_detected (push only: a polling watcher sees a
//     payment only once it is in a block).
//
// Gated:
//
//	KERNODECK_LATENCY_BENCH=1 go test ./chainwatch/utxo -run TestConfirmationLatency -v -timeout 30m
//
// KERNODECK_LATENCY_PAYMENTS (default 25 per mode: Litecoin Core 0.21's
// regtest stops mining past ~430 blocks, once MWEB activates, and each
// payment takes 6) and KERNODECK_LATENCY_POLL
// (the watcher's pause when caught up, default 2s as in production) tune
// it. Before the confirming block it sleeps a random part of the poll,
// since a real block arrives at any point of the watcher's pause. It prints
// median and p95 per network and mode; BENCHMARKS.md records them.
func TestConfirmationLatency(t *testing.T) {
	if os.Getenv("KERNODECK_LATENCY_BENCH") != "1" {
		t.Skip("set KERNODECK_LATENCY_BENCH=1 to measure confirmation latency on regtest")
	}
	count := 25
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
	forEachNode(t, func(t *testing.T, n node) {
		f := newFixture(t, n, apptest.Options{})
		for _, push := range []bool{false, true} {
			mode := "polling"
			if push {
				mode = "push (p2p) + polling"
			}
			stop := f.startWatcher("latency-"+mode, nil, func(w *chainwatch.Watcher) {
				w.Poll = poll
				if push {
					w.Notifier = n.notifier()
				}
			})
			var confirm, detect []time.Duration
			for range count {
				o, in := f.order()
				n.pay(in.Address, amountOf(in))
				sent := time.Now()
				if push {
					detect = append(detect, waitStatus(t, f, o.Ref, sent, domain.StatusPaymentDetected))
				}
				if p := n.policy(); p > 1 {
					n.mine(int(p) - 1)
					f.e.WaitOrderStatus(o.Ref, domain.StatusPaymentDetected)
				}
				// Waiting for payment_detected puts the test in phase with
				// the watcher's steps; a block arrives at any point of its
				// pause.
				time.Sleep(rand.N(poll))
				n.mine(1) // the confirming block
				confirm = append(confirm, waitStatus(t, f, o.Ref, time.Now(), domain.StatusPaid))
			}
			t.Logf("%s, %s, watcher poll %s, %d payments: confirming block mined -> order status changed: %s",
				n.cfg().Network, mode, poll, len(confirm), summary(confirm))
			if push {
				t.Logf("%s, %s, %d payments: broadcast -> payment_detected: %s", n.cfg().Network, mode, len(detect), summary(detect))
			}
			stop()
		}
	})
}

// waitStatus waits until the order's status in PostgreSQL is past the
// awaiting states (want paid) or is want, and returns the time since from.
func waitStatus(t *testing.T, f *fixture, ref string, from time.Time, want string) time.Duration {
	t.Helper()
	for {
		var status string
		if err := f.e.DB.GetContext(f.e.Ctx, &status, `SELECT status FROM orders WHERE ref = $1`, ref); err != nil {
			t.Fatal(err)
		}
		past := status != domain.StatusAwaitingPayment && status != domain.StatusPaymentDetected
		if status == want || (want == domain.StatusPaid && past) {
			return time.Since(from)
		}
		if time.Since(from) > time.Minute {
			t.Fatalf("order %s still %s after a minute, want %s", ref, status, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func summary(lat []time.Duration) string {
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1)+0.5)] }
	return fmt.Sprintf("median %s, p95 %s, min %s, max %s", pct(0.5).Round(time.Millisecond),
		pct(0.95).Round(time.Millisecond), lat[0].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}
