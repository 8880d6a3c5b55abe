package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// --- replicas killed during the burst ----------------------------------------

type killReport struct {
	mu    sync.Mutex
	lines []string
}

func (k *killReport) add(format string, args ...any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lines = append(k.lines, fmt.Sprintf(format, args...))
}

type readReport struct {
	mu                      sync.Mutex
	ok, s5xx, other, failed int
}

func (r *readReport) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%d answered 2xx, %d 5xx, %d other statuses, %d failed connections", r.ok, r.s5xx, r.other, r.failed)
}

// reading starts the customers' readers (readOrders, four of them, through
// both API replicas); the returned func stops them and reports.
func (b *burst) reading(ctx context.Context, refs, tokens []string) func() *readReport {
	ctx, cancel := context.WithCancel(ctx)
	rep := &readReport{}
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() { b.readOrders(ctx, r, refs, tokens, rep) })
	}
	return func() *readReport {
		cancel()
		wg.Wait()
		return rep
	}
}

// killReplicas SIGKILLs, after the block, the chainwatch holding the
// Litecoin lease (then times the takeover: the lease held by another
// process, and with -btc the Bitcoin lease's if it held that too),
// worker-1 and api-1; scripts/prodlike.sh restarts each.
func (b *burst) killReplicas(ctx context.Context, db *sqlx.DB, tBlock time.Time, rep *killReport) {
	sleepUntil := func(t time.Time) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Until(t)):
			return true
		}
	}
	holder := func(network string) string {
		var h []string
		_ = db.SelectContext(ctx, &h, `SELECT holder FROM watcher_leases WHERE network = $1 AND expires_at > now()`, network)
		if len(h) == 0 {
			return ""
		}
		return h[0]
	}
	if !sleepUntil(tBlock.Add(time.Second)) {
		return
	}
	old := holder("litecoin")
	oldBTC := ""
	if b.btc > 0 {
		oldBTC = holder("bitcoin")
	}
	var pid int
	_, _ = fmt.Sscanf(old[strings.LastIndex(old, ":")+1:], "%d", &pid)
	killed, standby, standbyPID := "", "", 0
	for _, name := range []string{"chainwatch-1", "chainwatch-2"} {
		if p, err := b.prodlikePID(name); err == nil && p == pid {
			killed = name
		} else if err == nil {
			standby, standbyPID = name, p
		}
	}
	if killed == "" || pid <= 0 {
		rep.add("kill: the lease holder %q is not one of prodlike's chainwatch processes: not killed", old)
	} else {
		tKill := time.Now()
		_ = syscallKill(pid)
		// takenBy waits for another holder of network's lease.
		takenBy := func(network string) (string, string) {
			for ctx.Err() == nil {
				if h := holder(network); h != "" && h != old {
					if strings.HasSuffix(h, fmt.Sprintf(":%d", standbyPID)) {
						return "the standby " + standby, h
					}
					return "the restarted " + killed, h
				}
				time.Sleep(100 * time.Millisecond)
			}
			return "", ""
		}
		if who, h := takenBy("litecoin"); who != "" {
			rep.add("kill: %s (%s, lease holder) SIGKILLed %.1f s after the block; lease taken by %s (%s) %.1f s after the kill",
				killed, old, tKill.Sub(tBlock).Seconds(), who, h, time.Since(tKill).Seconds())
		}
		if oldBTC == old {
			if who, h := takenBy("bitcoin"); who != "" {
				rep.add("kill: the Bitcoin lease of %s taken by %s (%s) %.1f s after the kill", killed, who, h, time.Since(tKill).Seconds())
			}
		} else if oldBTC != "" {
			rep.add("kill: the Bitcoin lease was held by %s, not killed", oldBTC)
		}
	}
	for _, k := range []struct {
		name string
		at   time.Duration
	}{{"worker-1", 4 * time.Second}, {"api-1", 7 * time.Second}} {
		if !sleepUntil(tBlock.Add(k.at)) {
			return
		}
		p, err := b.prodlikePID(k.name)
		if err != nil {
			rep.add("kill: %s: %v", k.name, err)
			continue
		}
		tKill := time.Now()
		_ = syscallKill(p)
		if np, ok := b.waitRestarted(ctx, k.name, p); ok {
			rep.add("kill: %s (pid %d) SIGKILLed %.1f s after the block; restarted by prodlike (pid %d), ready %.1f s after the kill",
				k.name, p, tKill.Sub(tBlock).Seconds(), np, time.Since(tKill).Seconds())
		}
	}
}

// readOrders is a customer reading orders (GET /v1/orders/{ref}) through
// both replicas in turn until ctx ends.
func (b *burst) readOrders(ctx context.Context, r int, refs, tokens []string, rep *readReport) {
	for i := r; ctx.Err() == nil; i += 4 {
		j := i % len(refs)
		st, err := b.clients[i%2].Call(ctx, "", "GET", "/v1/orders/"+refs[j], tokens[j/ordersPerCustomer], nil, nil)
		if ctx.Err() != nil {
			return
		}
		rep.mu.Lock()
		switch {
		case err != nil && st == 0:
			rep.failed++
		case st >= 500:
			rep.s5xx++
		case st >= 200 && st < 300:
			rep.ok++
		default:
			rep.other++
		}
		rep.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}
