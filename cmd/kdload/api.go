package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"go.temporal.io/sdk/client"

	"github.com/kernodeck/kernodeck/api"
)

// apiLoad measures the API on loopback at rising concurrency.
type apiLoad struct {
	common
	levels string
	each   time.Duration
	rate   int
	warmup time.Duration
}

// result of one closed-loop measurement: successes (counted in n, rps and
// latencies) and failures.
type result struct {
	n, failed int64
	rps       float64
	lat       latencies
}

func (r result) String() string {
	s := fmt.Sprintf("%7.0f/s p50 %8s p99 %8s", r.rps, ms(r.lat.q(.5)), ms(r.lat.q(.99)))
	if r.failed > 0 {
		s += fmt.Sprintf(" (%d failed)", r.failed)
	}
	return s
}

// tooManyFailures stops a measurement whose calls mostly fail.
func tooManyFailures(r result, first error) error {
	if r.failed > 0 && r.failed*10 > r.n+r.failed {
		return fmt.Errorf("%d of %d calls failed, first: %w", r.failed, r.n+r.failed, first)
	}
	return nil
}

// closedLoop runs conc clients calling fn back to back for d.
func closedLoop(ctx context.Context, conc int, d time.Duration, fn func(ctx context.Context) error) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu        sync.Mutex
		all       latencies
		n, failed atomic.Int64
		first     error
		wg        sync.WaitGroup
	)
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine latencies
			for ctx.Err() == nil {
				t0 := time.Now()
				err := fn(ctx)
				if ctx.Err() != nil {
					break // cut by the deadline: not counted
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					failed.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
				n.Add(1)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	r := result{n: n.Load(), failed: failed.Load(), rps: float64(n.Load()) / el.Seconds(), lat: all}
	return r, tooManyFailures(r, first)
}

func (a *apiLoad) run(ctx context.Context, out io.Writer) error {
	if a.each <= 0 || a.each > time.Minute {
		return fmt.Errorf("-d must be in (0, 60s]")
	}
	if err := a.loopbackOnly(); err != nil {
		return err
	}
	var levels []int
	for _, s := range strings.Split(a.levels, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || c < 1 || c > 256 {
			return fmt.Errorf("-c: bad level %q (1..256)", s)
		}
		levels = append(levels, c)
	}
	db, err := sqlx.Open("postgres", a.dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(256)
	// Orders created here need capacity (a load database only).
	if _, err := db.ExecContext(ctx, `UPDATE gpu_inventory SET total_gpus = total_gpus + 1000000 WHERE gpu_model = $1`, a.model); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS kdload_bare (id TEXT PRIMARY KEY, created_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	tc, err := client.Dial(client.Options{HostPort: a.temporal, Namespace: a.namespace})
	if err != nil {
		return err
	}
	defer tc.Close()

	run := time.Now().UnixNano()
	email := fmt.Sprintf("api-load-%d@example.com", run)
	tok, err := a.customer(ctx, email, 1249)
	if err != nil {
		return err
	}
	// Confirmed as the mailed link would: an unconfirmed account has one
	// unpaid order, and the run creates many.
	if _, err := db.ExecContext(ctx, `UPDATE accounts SET email_verified_at = now() WHERE email = $1`, email); err != nil {
		return err
	}
	ref, err := a.createOrder(ctx, tok)
	if err != nil {
		return err
	}
	// The order read is an active one (timeline, payment, access), as a
	// customer reads it most: paid by support, provisioned by the worker.
	if err := a.attribute(ctx, ref); err != nil {
		return err
	}
	events, err := a.waitActive(ctx, db, ref, 3*time.Minute)
	if err != nil {
		return err
	}
	status := func(want int, method, path, token string, body any) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			st, err := a.call(ctx, method, path, token, body, nil)
			if err != nil {
				return err
			}
			if st != want {
				return fmt.Errorf("%s %s: %d", method, path, st)
			}
			return nil
		}
	}
	// The order's page as the site serves it: the customer's session as its
	// cookie, the whole HTML read.
	page := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.api+"/orders/"+ref, nil)
		if err != nil {
			return err
		}
		req.AddCookie(&http.Cookie{Name: api.DevSessionCookie, Value: tok})
		resp, err := a.client.HTTP.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /orders/{ref}: %d", resp.StatusCode)
		}
		return nil
	}
	var seq atomic.Int64
	bare := func(ctx context.Context) error {
		id := fmt.Sprintf("kdload-%d-%d", run, seq.Add(1))
		if _, err := db.ExecContext(ctx, `INSERT INTO kdload_bare (id) VALUES ($1)`, id); err != nil {
			return err
		}
		// A workflow no worker runs: only the start is measured; it times
		// out by itself.
		_, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "kdload-bare",
			WorkflowExecutionTimeout: time.Minute}, "KdloadBare")
		return err
	}
	// The order read at a fixed rate, after a warm-up (the first second
	// opens the connections the rate needs: the client's and the API's
	// database pool), reported apart.
	fixed := func(when string) error {
		if a.rate <= 0 {
			return nil
		}
		read := status(http.StatusOK, "GET", "/v1/orders/"+ref, tok, nil)
		if a.warmup > 0 {
			w, err := openLoop(ctx, a.rate, a.warmup, read)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s: warm-up at %d/s for %s (not counted): p50 %s p99 %s\n",
				when, a.rate, a.warmup, ms(w.lat.q(.5)), ms(w.lat.q(.99)))
		}
		r, err := openLoop(ctx, a.rate, a.each, read)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: GET /v1/orders/{ref} at a fixed %d/s for %s: %d answered (%d failed), p50 %s p99 %s\n",
			when, a.rate, a.each, r.n, r.failed, ms(r.lat.q(.5)), ms(r.lat.q(.99)))
		return nil
	}
	// First on a quiet service, then after the creations, while the worker
	// runs the workflows they started (the same cores).
	if err := fixed("quiet"); err != nil {
		return err
	}
	fmt.Fprintf(out, "each measurement %s, closed loop; ratios in the same run; order read: active, %d timeline events\n", a.each, events)
	fmt.Fprintf(out, "%4s | %-36s | %-36s | %6s | %-36s | %6s | %-36s | %-36s | %6s\n", "c", "GET /healthz", "GET /v1/orders/{ref}", "ratio",
		"GET /orders/{ref} (HTML page)", "/JSON", "POST /v1/orders", "bare StartWorkflow+INSERT", "ratio")
	// A measurement whose calls mostly fail is reported as such (an
	// overloaded server is a result too) and the run goes on.
	measure := func(c int, fn func(ctx context.Context) error) result {
		r, err := closedLoop(ctx, c, a.each, fn)
		if err != nil {
			fmt.Fprintf(out, "c=%d: %v\n", c, err)
		}
		return r
	}
	for _, c := range levels {
		h := measure(c, status(http.StatusOK, "GET", "/healthz", "", nil))
		g := measure(c, status(http.StatusOK, "GET", "/v1/orders/"+ref, tok, nil))
		w := measure(c, page)
		p := measure(c, status(http.StatusCreated, "POST", "/v1/orders", tok,
			map[string]any{"gpu_model": a.model, "lots": 1, "duration_days": 30, "preset": "python"}))
		b := measure(c, bare)
		fmt.Fprintf(out, "%4d | %s | %s | %5.0f%% | %s | %5.0f%% | %s | %s | %5.0f%%\n", c, h, g, 100*g.rps/h.rps,
			w, 100*w.rps/g.rps, p, b, 100*p.rps/b.rps)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fixed("after the creations")
}

// waitActive waits (at most within) for the order to be active and returns
// its number of timeline events.
func (a *apiLoad) waitActive(ctx context.Context, db *sqlx.DB, ref string, within time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		var row struct {
			Status string `db:"status"`
			Events int    `db:"events"`
		}
		if err := db.GetContext(ctx, &row, `SELECT status, (SELECT count(*) FROM timeline_events WHERE ref = $1) AS events
			FROM orders WHERE ref = $1`, ref); err != nil {
			return 0, fmt.Errorf("order %s not active: %w", ref, err)
		}
		if row.Status == "active" {
			return row.Events, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("order %s still %s: %w", ref, row.Status, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// openLoop sends rate requests per second for d whatever the answers take
// (latency measured from the scheduled send time, so queueing counts).
func openLoop(ctx context.Context, rate int, d time.Duration, fn func(ctx context.Context) error) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	total := int(d.Seconds() * float64(rate))
	interval := time.Second / time.Duration(rate)
	var (
		mu     sync.Mutex
		all    latencies
		first  error
		failed int64
		wg     sync.WaitGroup
	)
	sem := make(chan struct{}, 512)
	start := time.Now()
	for i := range total {
		at := start.Add(time.Duration(i) * interval)
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return result{}, ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := fn(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				failed++
				return
			}
			all = append(all, time.Since(at))
		}()
	}
	wg.Wait()
	r := result{n: int64(len(all)), failed: failed, rps: float64(len(all)) / time.Since(start).Seconds(), lat: all}
	return r, tooManyFailures(r, first)
}
